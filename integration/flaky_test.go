package integration

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/fs"
)

// flakyHandler fails requests in turn: every third is a 503, every third a
// body cut off halfway through (the connection is then closed), the rest are
// served whole.
type flakyHandler struct {
	next http.Handler
	n    atomic.Int64
}

func (h *flakyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch h.n.Add(1) % 3 {
	case 0:
		http.Error(w, "try again", http.StatusServiceUnavailable)
	case 1:
		rec := httptest.NewRecorder()
		h.next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code != http.StatusOK || len(body) < 2 {
			h.next.ServeHTTP(w, r)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		h.next.ServeHTTP(w, r)
	}
}

// TestFlakyServer: a server that fails two requests in three, with 503s
// and truncated bodies, still yields exact bytes for every chunk.
func TestFlakyServer(t *testing.T) {
	vol, truth := writeVolume(t)
	h := &flakyHandler{next: http.FileServer(http.Dir(vol))}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	mnt := mountSource(t, srv.URL, fs.Options{})
	check(t, truth, mnt, vol)
	t.Logf("%d requests", h.n.Load())
}

// TestServerGone: once the server is gone, an uncached chunk is EIO after
// the retries, and the mount stays up: listings and cached chunks still
// work.
func TestServerGone(t *testing.T) {
	vol, _ := writeVolume(t)
	srv := httptest.NewServer(http.FileServer(http.Dir(vol)))
	t.Cleanup(srv.Close)
	var logs logBuffer
	mnt := mountSource(t, srv.URL, fs.Options{Log: newLogger(&logs)})
	cached := filepath.Join(mnt, "s1", "-7-9_2-18_-3-1")
	want := run(t, "cat", cached)

	srv.CloseClientConnections()
	srv.Close()

	uncached := filepath.Join(mnt, "s1", "9-25_2-18_-3-1")
	if out, err := runErr("dd", "if="+uncached, "of=/dev/null", "bs=1M"); err == nil || !strings.Contains(out, "Input/output error") {
		t.Errorf("read with the server gone: got %v %q, want EIO", err, out)
	}
	if !strings.Contains(logs.String(), "9-25_2-18_-3-1") || !strings.Contains(logs.String(), "attempts") {
		t.Errorf("no log line names the object and the retries:\n%s", logs.String())
	}
	if got := run(t, "cat", cached); got != want {
		t.Errorf("cached chunk changed after the server went away")
	}
	// 27 chunks and the 6 stitched views.
	if entries, err := os.ReadDir(filepath.Join(mnt, "s0")); err != nil || len(entries) != 27+6 {
		t.Errorf("listing with the server gone: %d entries, %v", len(entries), err)
	}
}
