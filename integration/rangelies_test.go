package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRangeLies: an HTTP origin that lies about ranges — a reply shorter
// than the range with a Content-Range that claims all of it, extra bytes,
// another range than the one asked for, a whole-object answer that
// promises more bytes than it sends — never gives a reader of the mount
// wrong bytes: dd at offsets inside a pass-through object and cat of the
// whole object read either exactly the object's bytes or fail with EIO,
// within the retry budget (issue 28 item 3).
func TestRangeLies(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	blob := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(filepath.Join(src, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	lies := map[string]func(w http.ResponseWriter, first, last int64){
		"short": func(w http.ResponseWriter, first, last int64) {
			n := (last - first + 1) / 2
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(blob)))
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(blob[first : first+n])
		},
		"extra": func(w http.ResponseWriter, first, last int64) {
			end := min(last+1+4096, int64(len(blob)))
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(blob)))
			w.WriteHeader(http.StatusPartialContent)
			w.(http.Flusher).Flush()
			w.Write(blob[first:end])
		},
		"another range": func(w http.ResponseWriter, first, last int64) {
			n := last - first + 1
			from := (first + 8192) % (int64(len(blob)) - n)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, from+n-1, len(blob)))
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(blob[from : from+n])
		},
		"shifted bytes": func(w http.ResponseWriter, first, last int64) {
			// The right headers over the wrong bytes cannot be told from the
			// truth by a reader; what it must not do is splice them with
			// another reply. Sent as the whole object from offset 0 with
			// status 200, which a ranged reader has to skip itself.
			w.Header().Set("Content-Length", strconv.Itoa(len(blob)))
			w.WriteHeader(http.StatusOK)
			w.Write(blob[:len(blob)/3])
		},
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			srv := layerServer(t, src, "/blob", func(w http.ResponseWriter, r *http.Request) {
				first, last, ok := parseRange(r.Header.Get("Range"), int64(len(blob)))
				if r.Method != http.MethodGet || !ok {
					http.ServeFile(w, r, filepath.Join(src, "blob"))
					return
				}
				lie(w, first, last)
			})
			s := startVolfs(t, "mount", "--retries", "1", srv.URL)
			p := filepath.Join(s.mnt, "blob")
			for _, at := range []struct{ bs, skip, count int }{{4096, 3, 4}, {1000, 77, 9}, {65536, 1, 2}} {
				start := time.Now()
				out, err := runBounded(t, time.Minute, "dd", "if="+p, "bs="+strconv.Itoa(at.bs), "skip="+strconv.Itoa(at.skip), "count="+strconv.Itoa(at.count), "status=none")
				want := blob[at.bs*at.skip : at.bs*(at.skip+at.count)]
				switch {
				case err == nil && out != string(want):
					t.Errorf("dd bs=%d skip=%d: %d bytes read without error, not the object's (want %d exact bytes or EIO)", at.bs, at.skip, len(out), len(want))
				case err != nil && !strings.Contains(out, "Input/output error"):
					t.Errorf("dd bs=%d skip=%d: %v %q, want EIO", at.bs, at.skip, err, out)
				}
				t.Logf("dd bs=%d skip=%d: err %v in %v", at.bs, at.skip, err, time.Since(start).Round(time.Millisecond))
			}
			out, err := runBounded(t, time.Minute, "cat", p)
			if err == nil && !bytes.Equal([]byte(out), blob) {
				t.Errorf("cat: %d bytes read without error, not the object's %d", len(out), len(blob))
			}
		})
	}
}

// parseRange returns the first and last byte of a "bytes=first-last" (or
// "bytes=first-") Range header over an object of size bytes.
func parseRange(h string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(spec, "-")
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return first, min(last, size-1), first <= last
}
