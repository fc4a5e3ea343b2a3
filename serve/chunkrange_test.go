package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// originLog is what an origin was asked for one key: its requests
// ("HEAD", "GET bytes=0-1023", "GET") and the body bytes it wrote.
type originLog struct {
	mu    sync.Mutex
	reqs  []string
	bytes int64
}

func (l *originLog) Write(p []byte) {
	l.mu.Lock()
	l.bytes += int64(len(p))
	l.mu.Unlock()
}

func (l *originLog) snapshot() ([]string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...), l.bytes
}

type countingWriter struct {
	http.ResponseWriter
	log *originLog
}

func (w countingWriter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	w.log.Write(p[:k])
	return k, err
}

// TestChunkRanges: a client reading a large uncompressed chunk through
// volfs serve in 1 MiB Range requests costs the origin what it cost
// before chunks were read in ranged parts: the chunk once, in one or two
// requests, the later ranges served from memory. Each range opening a
// window of parts of its own asked the origin for a HEAD per range and
// for parts past each range's end that its close then cancelled: 33
// HEADs, 185 GETs and 74 MiB for a 32 MiB chunk. A GET of a whole chunk
// is still read in parts.
func TestChunkRanges(t *testing.T) {
	const chunk = 32 << 20
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	meta := fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1",
 "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, 2*chunk, chunk)
	logs := map[string]*originLog{"big/0": {}, "big/1": {}}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		b := data
		switch key {
		case "big/.zarray":
			b = meta
		case "big/0", "big/1":
			l := logs[key]
			l.mu.Lock()
			l.reqs = append(l.reqs, strings.TrimSpace(r.Method+" "+r.Header.Get("Range")))
			l.mu.Unlock()
			w = countingWriter{w, l}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(origin.Close)
	get := frontOver(t, origin.URL)

	for off := 0; off < chunk; off += 1 << 20 {
		if b := get("/big/0", fmt.Sprintf("bytes=%d-%d", off, off+1<<20-1)); !bytes.Equal(b, data[off:off+1<<20]) {
			t.Fatalf("range at %d: %d bytes, not the chunk's", off, len(b))
		}
	}
	time.Sleep(100 * time.Millisecond) // for cancelled parts to be counted
	if reqs, n := logs["big/0"].snapshot(); len(reqs) > 2 || n > chunk {
		t.Errorf("32 ranges of 1 MiB: the origin was asked %d times (%d HEAD) and sent %d MiB, want the chunk once: %q",
			len(reqs), countPrefix(reqs, "HEAD"), n>>20, reqs)
	}

	if b := get("/big/1", ""); !bytes.Equal(b, data) {
		t.Fatalf("GET of the whole chunk: %d bytes, not the chunk's", len(b))
	}
	if reqs, _ := logs["big/1"].snapshot(); countPrefix(reqs, "GET bytes=") < 4 {
		t.Errorf("GET of a whole chunk: %q, want it read in ranged parts", reqs)
	}
}

func countPrefix(ss []string, prefix string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// TestObjectRanges: a client reading a large pass-through object through
// volfs serve in 1 MiB Range requests costs the origin each range once:
// a Range request of a piece of the file reads that piece, not a window
// of parts that runs past the range's end and is cancelled when the
// reply ends (32 ranges of 1 MiB pulled 78 MiB of a 32 MiB object). A
// GET of the whole object is still read in parts.
func TestObjectRanges(t *testing.T) {
	const size = 32 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*11 + i>>19)
	}
	logs := map[string]*originLog{"a.bin": {}, "b.bin": {}}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := logs[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, strings.TrimSpace(r.Method+" "+r.Header.Get("Range")))
		l.mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(countingWriter{w, l}, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(origin.Close)
	get := frontOver(t, origin.URL)

	for off := 0; off < size; off += 1 << 20 {
		if b := get("/a.bin", fmt.Sprintf("bytes=%d-%d", off, off+1<<20-1)); !bytes.Equal(b, data[off:off+1<<20]) {
			t.Fatalf("range at %d: %d bytes, not the object's", off, len(b))
		}
	}
	time.Sleep(100 * time.Millisecond) // for cancelled parts to be counted
	if reqs, n := logs["a.bin"].snapshot(); n > size+size/8 {
		t.Errorf("32 ranges of 1 MiB: the origin sent %d MiB in %d requests, want the object's 32 about once: %q", n>>20, len(reqs), reqs)
	}

	if b := get("/b.bin", ""); !bytes.Equal(b, data) {
		t.Fatalf("GET of the whole object: %d bytes, not the object's", len(b))
	}
	if reqs, _ := logs["b.bin"].snapshot(); countPrefix(reqs, "GET bytes=") < 4 {
		t.Errorf("GET of a whole object: %q, want it read in ranged parts", reqs)
	}
}

// frontOver serves, over loopback HTTP until the test ends, the tree of
// the HTTP source at url (256 MiB of cache), and returns a GET of a path
// of it with the Range header rg (none when empty).
func frontOver(t *testing.T, url string) func(path, rg string) []byte {
	t.Helper()
	src, err := fetcher.Open(url, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := fs.New(context.Background(), src, fs.Options{CacheBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	front := httptest.NewServer(New(tree, Options{}))
	t.Cleanup(front.Close)
	return func(path, rg string) []byte { return getRange(t, front.URL+path, rg) }
}

// getRange GETs url, with the Range header rg when not empty, and returns
// the body.
func getRange(t *testing.T, url, rg string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if rg != "" {
		req.Header.Set("Range", rg)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
