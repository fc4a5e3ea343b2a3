package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/fs"
)

// writeVolume writes the test layer with numpy (mkprecomputed.py) and
// returns the layer directory and the truth directory.
func writeVolume(t *testing.T, args ...string) (vol, truth string) {
	t.Helper()
	requirePython(t)
	dir := t.TempDir()
	vol, truth = filepath.Join(dir, "vol"), filepath.Join(dir, "truth")
	run(t, python, append([]string{"testdata/mkprecomputed.py", vol}, args...)...)
	return vol, truth
}

// check runs the independent checker over a mounted layer.
func check(t *testing.T, truth, mnt, vol string, args ...string) {
	t.Helper()
	out := run(t, python, append([]string{"testdata/checkprecomputed.py", truth, mnt, "--orig", vol}, args...)...)
	t.Log(strings.TrimSpace(out))
}

// gzipEncodingServer serves dir over HTTP the way a bucket with gzip
// content encoding does: a key whose ".gz" object exists is answered with
// that object's bytes and Content-Encoding: gzip. Other keys are served as
// files.
func gzipEncodingServer(t *testing.T, dir string) *httptest.Server {
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := filepath.Join(dir, filepath.FromSlash(path.Clean(r.URL.Path)))
		if _, err := os.Stat(p); os.IsNotExist(err) && !strings.HasSuffix(p, ".gz") {
			if gz, err := os.ReadFile(p + ".gz"); err == nil {
				if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					t.Errorf("request for %s does not accept gzip", r.URL.Path)
				}
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(gz)
				return
			}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPrecomputedSources mounts one numpy-written layer from disk and over
// HTTP, and compares every chunk file with numpy.
func TestPrecomputedSources(t *testing.T) {
	vol, truth := writeVolume(t)
	for _, tc := range []struct {
		name   string
		source func(t *testing.T) string
	}{
		{"disk path", func(*testing.T) string { return vol }},
		{"file URL", func(*testing.T) string { return "file://" + vol }},
		{"HTTP Content-Encoding gzip", func(t *testing.T) string { return gzipEncodingServer(t, vol).URL }},
		{"HTTP .gz objects", func(t *testing.T) string {
			srv := httptest.NewServer(http.FileServer(http.Dir(vol)))
			t.Cleanup(srv.Close)
			return srv.URL + "/"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := mountSource(t, tc.source(t), fs.Options{})
			check(t, truth, mnt, vol)
		})
	}
}

func TestPrecomputedMissingError(t *testing.T) {
	vol, truth := writeVolume(t)
	mnt := mountSource(t, vol, fs.Options{Missing: fs.MissingError})
	check(t, truth, mnt, vol, "--missing-error")
}

// TestCorruptChunk: a chunk that does not decode is EIO with one log line
// naming it, its neighbours stay exact, and the mount stays up.
func TestCorruptChunk(t *testing.T) {
	const bad = "-13-19_21-37_-3-1"
	vol, truth := writeVolume(t, "--corrupt="+bad)
	var logs logBuffer
	mnt := mountSource(t, vol, fs.Options{Log: newLogger(&logs)})
	check(t, truth, mnt, vol) // asserts EIO for the corrupt chunk, exact bytes elsewhere
	if got := strings.Count(logs.String(), bad+".gz"); got == 0 {
		t.Errorf("no log line names the corrupt object %s.gz; log:\n%s", bad, logs.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, bad) && !strings.Contains(line, "gzip") {
			t.Errorf("log line does not give the cause: %s", line)
		}
	}
	// Still serving, and reading the bad chunk again fails again.
	run(t, "ls", filepath.Join(mnt, "s0"))
	if out, err := runErr("cat", filepath.Join(mnt, "s0", bad)); err == nil || !strings.Contains(out, "Input/output error") {
		t.Errorf("second read of the corrupt chunk: got %v %q, want EIO", err, out)
	}
}

// TestStatNeverFetches: ls -l and stat of every chunk file of a scale ask
// the server for nothing; the first read of a chunk asks for it once.
func TestStatNeverFetches(t *testing.T) {
	vol, _ := writeVolume(t)
	var mu sync.Mutex
	var requests []string
	files := http.FileServer(http.Dir(vol))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.Path)
		mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	mnt := mountSource(t, srv.URL, fs.Options{})
	run(t, "ls", "-l", filepath.Join(mnt, "s0"))
	run(t, "sh", "-c", `stat -c '%s' "$0"/s0/* > /dev/null`, mnt)
	mu.Lock()
	for _, p := range requests {
		if strings.HasPrefix(p, "/s0/") {
			t.Errorf("ls -l and stat fetched %s", p)
		}
	}
	before := len(requests)
	mu.Unlock()
	run(t, "cat", filepath.Join(mnt, "s0", "-13-19_5-21_-3-1"))
	run(t, "cat", filepath.Join(mnt, "s0", "-13-19_5-21_-3-1"))
	mu.Lock()
	defer mu.Unlock()
	// The plain key first (404), then its .gz: two requests, once.
	if got := requests[before:]; len(got) != 2 {
		t.Errorf("two reads of one chunk made requests %v, want the plain key then .gz, once", got)
	}
}

// TestConcurrentReaders runs several checkers at once against one mount
// whose cache holds only a few chunks, so that loads are shared, evicted
// and repeated while other readers copy out: every byte must still match.
func TestConcurrentReaders(t *testing.T) {
	vol, truth := writeVolume(t)
	srv := gzipEncodingServer(t, vol)
	mnt := mountSource(t, srv.URL, fs.Options{CacheBytes: 64 << 10})
	const readers = 6
	errs := make(chan error, readers)
	for range readers {
		go func() {
			out, err := runErr(python, "testdata/checkprecomputed.py", truth, mnt, "--orig", vol)
			if err != nil {
				err = fmt.Errorf("%v\n%s", err, out)
			}
			errs <- err
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestConcurrentReadsShareOneFetch: readers that ask for one chunk at once
// (O_DIRECT, so that the kernel's page cache does not merge them) wait for
// one fetch of its object.
func TestConcurrentReadsShareOneFetch(t *testing.T) {
	vol, _ := writeVolume(t)
	const object = "/s1/9-25_2-18_-3-1.gz"
	var fetches atomic.Int64
	files := http.FileServer(http.Dir(vol))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == object {
			fetches.Add(1)
			time.Sleep(time.Second) // long enough for every reader to ask
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	mnt := mountSource(t, srv.URL, fs.Options{})
	const readers = 4
	errs := make(chan error, readers)
	for range readers {
		go func() {
			_, err := runErr(python, "-c", "import os, sys; os.read(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT), 1 << 20)",
				filepath.Join(mnt, "s1", "9-25_2-18_-3-1"))
			errs <- err
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := fetches.Load(); got != 1 {
		t.Errorf("%d concurrent readers made %d fetches of %s, want 1", readers, got, object)
	}
}
