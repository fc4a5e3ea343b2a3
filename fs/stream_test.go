package fs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// TestObjectStream reads a pass-through object of 8 MiB from a server that
// honours Range and from one that ignores it, in the orders the kernel
// sends: in order, pieces that overtake each other, concurrent pieces, and
// a jump back. Every read must return the object's bytes; reading in order
// must cost one request, which moves the object once.
func TestObjectStream(t *testing.T) {
	const size, piece = 8 << 20, 1 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	for _, ignoreRange := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignores Range %v", ignoreRange), func(t *testing.T) {
			var gets, sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					gets.Add(1)
				}
				if ignoreRange {
					w.Header().Set("Content-Length", strconv.Itoa(size))
					n, _ := w.Write(data)
					sent.Add(int64(n))
					return
				}
				http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
			}))
			defer srv.Close()
			src, err := fetcher.NewHTTP(srv.URL, fetcher.HTTPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tr := &Tree{src: src}
			ctx := context.Background()
			check := func(f *objectFile, off int64) {
				t.Helper()
				p := make([]byte, piece)
				n, err := f.ReadAt(ctx, p, off)
				if err != nil || n != piece || !bytes.Equal(p, data[off:off+piece]) {
					t.Errorf("read at %d: %d bytes, %v, want the object's %d", off, n, err, piece)
				}
			}

			f := &objectFile{t: tr, key: "obj", size: size}
			for off := int64(0); off < size; off += piece {
				check(f, off)
			}
			if got := gets.Load(); got != 1 {
				t.Errorf("reading in order: %d GETs, want 1", got)
			}
			if ignoreRange && sent.Load() != size {
				t.Errorf("reading in order: the server sent %d bytes, want the object's %d once", sent.Load(), size)
			}

			// Two pieces that overtake each other, then concurrent ones.
			f = &objectFile{t: tr, key: "obj", size: size}
			check(f, 0)
			check(f, 2*piece)
			check(f, piece)
			var wg sync.WaitGroup
			for off := int64(3 * piece); off < size; off += piece {
				wg.Go(func() { check(f, off) })
			}
			wg.Wait()
			check(f, piece) // back
		})
	}
}

// TestObjectStreamOpenEndsWithRead: the opening of a stream is bounded by
// the read that opens it: a server that sends no headers for the stream's
// request keeps the read no longer than the reader's context, not for the
// fetcher's stall timeout.
func TestObjectStreamOpenEndsWithRead(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 1<<20)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rng := r.Header.Get("Range"); strings.HasSuffix(rng, "-") {
			// The stream's open-ended range: no answer.
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	defer close(release)
	const stall = 20 * time.Second
	src, err := fetcher.NewHTTP(srv.URL, fetcher.HTTPOptions{StallTimeout: stall})
	if err != nil {
		t.Fatal(err)
	}
	f := &objectFile{t: &Tree{src: src}, key: "obj", size: int64(len(data))}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	f.ReadAt(ctx, make([]byte, 4096), 0)
	if took := time.Since(start); took >= stall/2 {
		t.Errorf("read took %v, want it ended with its context (200ms), not the stall timeout (%v)", took, stall)
	}
	// A read elsewhere in the file is a ranged read, served.
	p := make([]byte, 4096)
	if n, err := f.ReadAt(context.Background(), p, 64<<10); err != nil || n != len(p) || !bytes.Equal(p, data[64<<10:68<<10]) {
		t.Errorf("read after: %d bytes, %v, want the object's %d", n, err, len(p))
	}
}
