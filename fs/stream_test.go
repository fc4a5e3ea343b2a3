package fs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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
// moves the object once (ranged parts), or, from a server that ignores
// Range, costs one request to find that out and one stream.
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
				cw := &countingResponse{ResponseWriter: w, n: &sent}
				http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
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
			// In ranged parts, each byte once; from a server that ignores
			// Range, the first read's request finds it out and one stream
			// reads the rest (the first request's whole object may sit in
			// the socket's buffers when it is abandoned).
			if got, want := gets.Load(), int64(2); ignoreRange && got != want {
				t.Errorf("reading in order: %d GETs, want %d", got, want)
			}
			if !ignoreRange && sent.Load() != size {
				t.Errorf("reading in order: the server sent %d bytes, want the object's %d once", sent.Load(), size)
			}
			if ignoreRange && sent.Load() > 2*size {
				t.Errorf("reading in order: the server sent %d bytes, want at most %d", sent.Load(), 2*size)
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
	f.stream.read(ctx, src, f.key, make([]byte, 4096), 0, false)
	if took := time.Since(start); took >= stall/2 {
		t.Errorf("read took %v, want it ended with its context (200ms), not the stall timeout (%v)", took, stall)
	}
	// A read elsewhere in the file is a ranged read, served.
	p := make([]byte, 4096)
	if n, err := f.ReadAt(context.Background(), p, 64<<10); err != nil || n != len(p) || !bytes.Equal(p, data[64<<10:68<<10]) {
		t.Errorf("read after: %d bytes, %v, want the object's %d", n, err, len(p))
	}
}

// countingResponse counts the body bytes written into n.
type countingResponse struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingResponse) Write(p []byte) (int, error) {
	k, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(k))
	return k, err
}

// TestObjectParts reads a 24 MiB object in ranged parts as the kernel
// does, pieces handed out in order to four readers at once (so that they
// overtake each other), then seeks about; every read must return the
// object's bytes, and the in-order pass moves little more than the object.
func TestObjectParts(t *testing.T) {
	const size, piece = 24 << 20, 1 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*13 + i>>18)
	}
	var sent atomic.Int64
	_, f := objectOver(t, size, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"one"`)
		http.ServeContent(&countingResponse{ResponseWriter: w, n: &sent}, r, "", time.Time{}, bytes.NewReader(data))
	})
	read := func(off, n int64) {
		t.Helper()
		p := make([]byte, n)
		k, err := f.ReadAt(context.Background(), p, off)
		want := data[off:min(off+n, size)]
		if err != nil || k != len(want) || !bytes.Equal(p[:k], want) {
			t.Errorf("read of %d at %d: %d bytes, %v, want the object's %d", n, off, k, err, len(want))
		}
	}
	read(0, piece) // the kernel's first read comes alone
	var next atomic.Int64
	next.Store(piece)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for off := next.Add(piece) - piece; off < size; off = next.Add(piece) - piece {
				read(off, piece)
			}
		})
	}
	wg.Wait()
	// A reader that falls further behind the others than the window keeps
	// (partsBehind) is served by a ranged read of its own.
	if got := sent.Load(); got < size || got > size+size/4 {
		t.Errorf("in order: the server sent %d bytes, want the object's %d once, and at most a quarter more", got, size)
	}
	for _, off := range []int64{3 << 20, 3<<20 + piece, 3<<20 + 5*piece, 1 << 20, 20 << 20, size - 100, 0, 128 << 10} {
		read(off, piece)
	}
	if v := f.parts.version(); v != `etag:"one"` {
		t.Errorf("version pinned: %q, want the ETag's", v)
	}
}

// TestObjectPartsClosed: the window's parts in flight are cancelled when
// the file's last handle closes, not when the window next times out. The
// server sends a little of each range and then holds the reply until the
// request is cancelled; the idle timeout is an hour, so only Close can end
// the requests. A second handle open on the file keeps the window going.
func TestObjectPartsClosed(t *testing.T) {
	const size = 64 << 20
	var inflight atomic.Int64
	tree, f := objectOver(t, size, func(w http.ResponseWriter, r *http.Request) {
		var first, last int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last); err != nil {
			http.Error(w, "ranges only", http.StatusBadRequest)
			return
		}
		inflight.Add(1)
		defer inflight.Add(-1)
		w.Header().Set("ETag", `"one"`)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		w.Header().Set("Content-Length", strconv.FormatInt(last-first+1, 10))
		w.WriteHeader(http.StatusPartialContent)
		if first < 512<<10 {
			w.Write(make([]byte, last-first+1)) // the first reads' ranges, whole
			return
		}
		w.Write(make([]byte, 1))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	f.parts.idleAfter = time.Hour
	ctx := context.Background()
	h1, err := tree.Open(ctx, f, "obj", 1)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := tree.Open(ctx, f, "obj", 2)
	if err != nil {
		t.Fatal(err)
	}
	// The first read is served by its own range and finds that the
	// server honours Range; the second one, continuing it, fills the
	// window ahead, whose parts past 512 KiB the server holds.
	for _, off := range []int64{0, 128 << 10} {
		if k, err := h1.ReadAt(ctx, make([]byte, 128<<10), off); err != nil || k != 128<<10 {
			t.Fatalf("read at %d: %d, %v", off, k, err)
		}
	}
	waitInflight := func(want func(int64) bool, what string) {
		t.Helper()
		// Less than the fetcher's stall timeout (30 s), which would end
		// the held requests too.
		deadline := time.Now().Add(10 * time.Second)
		for !want(inflight.Load()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d ranges in flight after 10s", what, inflight.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitInflight(func(n int64) bool { return n > 0 }, "window after the first read")
	h1.Close()
	h1.Close() // a second Close does nothing
	time.Sleep(100 * time.Millisecond)
	if n := inflight.Load(); n == 0 {
		t.Fatalf("the window was cancelled with a handle of the file still open")
	}
	h2.Close()
	waitInflight(func(n int64) bool { return n == 0 }, "after the last handle closed")

	// A handle kept open with no reads: the idle timer cancels the
	// window, and does so again for the next window of the same file.
	f.parts.mu.Lock()
	f.parts.idleAfter = 50 * time.Millisecond
	f.parts.mu.Unlock()
	h3, err := tree.Open(ctx, f, "obj", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer h3.Close()
	for round := range 2 {
		for _, off := range []int64{0, 128 << 10} {
			if k, err := h3.ReadAt(ctx, make([]byte, 128<<10), off); err != nil || k != 128<<10 {
				t.Fatalf("round %d: read at %d: %d, %v", round, off, k, err)
			}
		}
		waitInflight(func(n int64) bool { return n > 0 }, fmt.Sprintf("round %d: window", round))
		waitInflight(func(n int64) bool { return n == 0 }, fmt.Sprintf("round %d: idle, handle open", round))
		f.parts.mu.Lock()
		f.parts.next = 0 // the reader starts over from 0, as a new window
		f.parts.mu.Unlock()
	}
}

// TestObjectPartsLent: reads through Handle.ReadPieces are served as the
// window's own bytes without a copy, exactly the object's, and a piece
// still held (its reply not yet written) survives the window's end: its
// part is freed only once the piece is given back, and every other part
// with the window.
func TestObjectPartsLent(t *testing.T) {
	const size, piece = 24 << 20, 1 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	tree, f := objectOver(t, size, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"one"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	})
	ctx := context.Background()
	h, err := tree.Open(ctx, f, "obj", 1)
	if err != nil {
		t.Fatal(err)
	}
	var held [][]byte
	var heldRelease func()
	lentReads := 0
	for off := int64(0); off < 8<<20; off += piece {
		pieces, release, err := h.ReadPieces(ctx, make([]byte, piece), off)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if got := bytes.Join(pieces, nil); !bytes.Equal(got, data[off:off+piece]) {
			t.Fatalf("read at %d: %d bytes, not the object's", off, len(got))
		}
		if release == nil {
			continue
		}
		lentReads++
		if off == 4<<20 {
			held, heldRelease = pieces, release
			continue
		}
		release()
	}
	if lentReads < 4 || heldRelease == nil {
		t.Fatalf("%d of 8 in-order reads lent the window's bytes (the one at 4 MiB: %v), want most", lentReads, heldRelease != nil)
	}
	f.parts.mu.Lock()
	parts := slices.Clone(f.parts.parts)
	f.parts.mu.Unlock()
	h.Close() // the window ends: every part is dropped
	for _, pt := range parts {
		<-pt.done
	}
	if got := bytes.Join(held, nil); !bytes.Equal(got, data[4<<20:5<<20]) {
		t.Errorf("a piece held across the window's end changed")
	}
	freed := func() (n int) {
		f.parts.mu.Lock()
		defer f.parts.mu.Unlock()
		for _, pt := range parts {
			if pt.data == nil {
				n++
			}
		}
		return n
	}
	if n := freed(); n != len(parts)-1 && n != len(parts)-2 {
		t.Errorf("%d of %d parts freed with one piece held, want all but the one or two it lies in", n, len(parts))
	}
	heldRelease()
	if n := freed(); n != len(parts) {
		t.Errorf("%d of %d parts freed after the held piece was given back, want all", n, len(parts))
	}
}

// TestObjectStreamClosed: the stream of an object whose server ignores
// Range is closed when the file's last handle closes, not when it has been
// idle for a while (an hour here): the server sends the start of the
// object and then holds each reply until its request is cancelled.
func TestObjectStreamClosed(t *testing.T) {
	const size = 64 << 20
	var inflight atomic.Int64
	tree, f := objectOver(t, size, func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Add(-1)
		w.Header().Set("ETag", `"one"`)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(make([]byte, 4<<20))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	f.stream.idleAfter = time.Hour
	ctx := context.Background()
	h, err := tree.Open(ctx, f, "obj", 1)
	if err != nil {
		t.Fatal(err)
	}
	// The first read finds that the server ignores Range; the second
	// opens the stream, which the server then holds.
	for _, off := range []int64{0, 1 << 20} {
		if k, err := h.ReadAt(ctx, make([]byte, 1<<20), off); err != nil || k != 1<<20 {
			t.Fatalf("read at %d: %d, %v", off, k, err)
		}
	}
	f.stream.mu.Lock()
	open := f.stream.rc != nil
	f.stream.mu.Unlock()
	if !open {
		t.Fatal("no stream open after two reads in order")
	}
	h.Close()
	deadline := time.Now().Add(10 * time.Second) // less than the fetcher's 30 s stall timeout
	for inflight.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still open 10s after the last handle closed", inflight.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// objectOver returns a tree over a loopback HTTP server answering with
// handler, and its object "obj" of size bytes; the server closes with the
// test.
func objectOver(t *testing.T, size int64, handler http.HandlerFunc) (*Tree, *objectFile) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	src, err := fetcher.NewHTTP(srv.URL, fetcher.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tree := &Tree{src: src}
	return tree, &objectFile{t: tree, key: "obj", size: size}
}
