package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultOrigin serves src over loopback HTTP; the next n requests for a
// key set with fail(key, n) answer 503, as an origin's burst of SlowDown
// or overload does for one key. Every request is counted by key.
type faultOrigin struct {
	*httptest.Server
	mu    sync.Mutex
	burst map[string]int // GUARDED_BY(mu)
	seen  map[string]int // GUARDED_BY(mu)
}

func newFaultOrigin(t *testing.T, src string) *faultOrigin {
	t.Helper()
	o := &faultOrigin{burst: map[string]int{}, seen: map[string]int{}}
	files := http.FileServer(http.Dir(src))
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		o.mu.Lock()
		o.seen[key]++
		fail := o.burst[key] > 0
		if fail {
			o.burst[key]--
		}
		o.mu.Unlock()
		if fail {
			http.Error(w, "slow down", http.StatusServiceUnavailable)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *faultOrigin) fail(key string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.burst[key] = n
}

// rewriteChunk writes new random bytes over the chunk at key under src,
// with a modification time well past the old one (an HTTP origin without
// ETag names versions by Last-Modified, to the second), and returns their
// sha256.
func rewriteChunk(t *testing.T, src, key string, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	data := make([]byte, 32*32*32)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p := filepath.Join(src, key)
	writeFile(t, p, data)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestOfflineNotOnOneKey: offline is a state of the origin, not of one
// request. A disk cache holds a warmed layer; one chunk is rewritten at
// the origin, and another answers only 503 (a burst on one key). A mount
// with --metadata-ttl reads the failing chunk as EIO (its copy cannot be
// checked, the origin is up) and the rewritten one as its new bytes: the
// one failing key does not take the tree offline, which would serve every
// disk copy unchecked.
func TestOfflineNotOnOneKey(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	o := newFaultOrigin(t, src)
	cacheDir := t.TempDir()
	if out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--bbox", ",,0:32", o.URL, "s0"); err != nil {
		t.Fatalf("warm: %v\n%s", err, out)
	}
	const failing, rewritten = "s0/0-32_0-32_0-32", "s0/32-64_0-32_0-32"
	newSum := rewriteChunk(t, src, rewritten, 99)
	if newSum == want[rewritten] {
		t.Fatal("rewrite left the bytes as they were")
	}
	o.fail(failing, 1<<20)

	s := startVolfs(t, "mount", "--cache-dir", cacheDir, "--metadata-ttl", "1s", "--retries", "1", o.URL)
	sums, failed := hashChunks(t, s.mnt, []string{failing})
	if failed[failing] != "EIO" {
		t.Errorf("%s, answering 503 alone: sha256 %q, error %q; want EIO", failing, sums[failing], failed[failing])
	}
	sums, failed = hashChunks(t, s.mnt, []string{rewritten})
	if sums[rewritten] != newSum {
		old := sums[rewritten] == want[rewritten]
		t.Errorf("%s, rewritten at the origin: sha256 %q (the old bytes: %v), error %q; want the new bytes %s", rewritten, sums[rewritten], old, failed[rewritten], newSum)
	}
	if strings.Contains(s.stderr.String(), "the origin cannot be reached") {
		t.Errorf("one key's 503s took the origin offline:\n%s", s.stderr.String())
	}
}

// TestKeptAbsenceNotForTransient: a chunk that `volfs warm` found missing
// and that then appears at the origin reads as its bytes, never as the
// fill value: neither when its first request meets a burst of 503s (the
// read fails, and a read after the failure is forgotten reads the bytes),
// nor afterwards.
func TestKeptAbsenceNotForTransient(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	const bursty, quiet = "s0/96-128_96-128_0-32", "s0/64-96_96-128_0-32"
	warmLayer(t, src, bursty, "")
	if err := os.Remove(filepath.Join(src, quiet)); err != nil {
		t.Fatal(err)
	}
	o := newFaultOrigin(t, src)
	cacheDir := t.TempDir()
	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--bbox", ",,0:32", o.URL, "s0")
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 14 || c != 0 || m != 2 || x != 0 {
		t.Fatalf("warm: %v, %d fetched, %d cached, %d missing, %d failed; want 14, 0, 2, 0\n%s", err, f, c, m, x, out)
	}
	want := map[string]string{bursty: rewriteChunk(t, src, bursty, 1), quiet: rewriteChunk(t, src, quiet, 2)}
	zero := sha256.Sum256(make([]byte, 32*32*32))
	fill := hex.EncodeToString(zero[:])
	// --retries 1: one request is two attempts, both 503.
	o.fail(bursty, 2)

	s := startVolfs(t, "mount", "--cache-dir", cacheDir, "--metadata-ttl", "1s", "--retries", "1", o.URL)
	sums, failed := hashChunks(t, s.mnt, []string{quiet})
	if sums[quiet] != want[quiet] {
		t.Errorf("%s, missing at warm, then written: sha256 %q (fill: %v), error %q; want its bytes", quiet, sums[quiet], sums[quiet] == fill, failed[quiet])
	}
	// A failed read is remembered for a few seconds (fs.failureMemory).
	for i := 0; i < 12; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		sums, failed = hashChunks(t, s.mnt, []string{bursty})
		if sums[bursty] == fill {
			t.Fatalf("read %d of %s, missing at warm, then written, after a burst of 503s: the fill value", i, bursty)
		}
		if sums[bursty] == want[bursty] {
			return
		}
		t.Logf("read %d of %s: %q", i, bursty, failed[bursty])
	}
	t.Errorf("%s: never read its bytes", bursty)
}
