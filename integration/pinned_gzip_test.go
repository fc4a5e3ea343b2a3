package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPartsPinnedGzipStatic: a large uncompressed chunk read through the
// mount in ranged parts from an nginx-like origin with gzip_static (a GET
// that accepts gzip gets the precompressed .gz file, with that file's own
// ETag) that starts ignoring Range in the middle of the read (a proxy put
// in front, say): python3 reads the chunk's first MiB, then a MiB at
// 70 MiB, past the window and past fetcher.MaxRangeSkip, and gets the
// chunk's bytes both times, not ESTALE for a chunk nobody rewrote. The
// second read is the handle's pinned read of the version its window
// proved (fs.Handle.readPinned), which must ask for the plain form.
func TestPartsPinnedGzipStatic(t *testing.T) {
	const size = 72 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(data)
	zw.Close()
	meta := fmt.Sprintf(`{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1",
 "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, size, size)
	var ignore atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/switch":
			ignore.Store(true)
		case "/z/.zarray":
			w.Write([]byte(meta))
		case "/z/0":
			if ignore.Load() {
				r.Header.Del("Range")
				r.Header.Del("If-Match")
				if r.Method == "GET" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("ETag", `"5f3a-gz"`)
					w.Header().Set("Content-Encoding", "gzip")
					w.Header().Set("Content-Length", fmt.Sprint(gz.Len()))
					w.Write(gz.Bytes())
					return
				}
			}
			w.Header().Set("ETag", `"5f3a-4800000"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	s := startVolfs(t, "mount", srv.URL+"/z")
	out, err := runBounded(t, 2*time.Minute, python, "-c", `
import sys, os, urllib.request
want = lambda off, n: bytes((i*7 + (i >> 20)) & 255 for i in range(off, off + n))
fd = os.open(sys.argv[1] + "/0", os.O_RDONLY)
ok = os.pread(fd, 1 << 20, 0) == want(0, 1 << 20)
urllib.request.urlopen(sys.argv[2] + "/switch").read()
try:
    ok = ok and os.pread(fd, 1 << 20, 70 << 20) == want(70 << 20, 1 << 20)
    print("ok" if ok else "wrong bytes")
except OSError as e:
    print("error", e)
`, s.mnt, srv.URL)
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("python3 read of the chunk across the switch: %v\n%s\nvolfs: %s", err, out, s.stderr.String())
	}
}
