package integration

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// warmRun is a `volfs warm` process whose output lines the test reads as
// they come.
type warmRun struct {
	cmd   *exec.Cmd
	lines chan string // stdout and stderr, line by line; closed at the end
	mu    sync.Mutex
	all   bytes.Buffer // every line read, GUARDED_BY(mu)
}

// startWarm starts `volfs warm args...`, through `sh -c` with SIGINT
// ignored when ignoreINT is set (as a shell starts a background job).
func startWarm(t *testing.T, ignoreINT bool, args ...string) *warmRun {
	t.Helper()
	var cmd *exec.Cmd
	if ignoreINT {
		cmd = exec.Command("sh", append([]string{"-c", `trap '' INT; exec "$0" warm "$@"`, volfsBin}, args...)...)
	} else {
		cmd = exec.Command(volfsBin, append([]string{"warm"}, args...)...)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &warmRun{cmd: cmd, lines: make(chan string, 1<<16)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.all.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.lines <- sc.Text():
			default: // a flood of "would fetch": the test waits for one
			}
		}
	}()
	go func() {
		cmd.Wait()
		pw.Close()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
	})
	return w
}

// waitLine waits up to d for a line matching re and returns it.
func (w *warmRun) waitLine(t *testing.T, re string, d time.Duration) (string, bool) {
	t.Helper()
	rx := regexp.MustCompile(re)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				return "", false
			}
			if rx.MatchString(l) {
				return l, true
			}
		case <-timer.C:
			return "", false
		}
	}
}

// stop sends sig and waits up to d for the process to exit; it returns
// the exit status (-1 if it did not exit) and everything it printed.
func (w *warmRun) stop(t *testing.T, sig syscall.Signal, d time.Duration) (int, string) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-w.lines:
			if ok {
				continue
			}
			w.mu.Lock()
			out := w.all.String()
			w.mu.Unlock()
			return w.cmd.ProcessState.ExitCode(), out
		case <-deadline:
			w.cmd.Process.Kill()
			w.mu.Lock()
			out := w.all.String()
			w.mu.Unlock()
			return -1, out
		}
	}
}

// hugeLayer writes a precomputed layer of 2^60 one-voxel chunks, none of
// them stored.
func hugeLayer(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [1048576, 1048576, 1048576], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[1, 1, 1]], "encoding": "raw"}]}`))
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestWarmHugePlan: a warm, and a dry run, over a --bbox of 2^60 chunks
// start at once (the plan is streamed, never enumerated ahead), show
// progress, stay within bounded memory, and stop within seconds of SIGINT
// with exit status 130 and a summary that says what is left and that the
// same command resumes.
func TestWarmHugePlan(t *testing.T) {
	src := hugeLayer(t)
	const box = "0:1048576,0:1048576,0:1048576"
	for _, tc := range []struct {
		name  string
		args  []string
		first string // the first output that shows work
	}{
		{"warm", []string{"--cache-dir", t.TempDir(), "--bbox", box, src, "s0"}, `volfs warm: [1-9]\d* of 1152921504606846976 chunks done`},
		{"dry-run", []string{"--dry-run", "--bbox", box, src, "s0"}, `^would fetch s0/`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			w := startWarm(t, false, tc.args...)
			if _, ok := w.waitLine(t, `^volfs warm: (warming|dry run over) 1152921504606846976 chunks`, 10*time.Second); !ok {
				code, out := w.stop(t, syscall.SIGKILL, 5*time.Second)
				t.Fatalf("no announcement of 2^60 chunks within 10 s (exit %d):\n%.2000s", code, out)
			}
			t.Logf("announced after %v", time.Since(start).Round(time.Millisecond))
			if _, ok := w.waitLine(t, tc.first, 15*time.Second); !ok {
				code, out := w.stop(t, syscall.SIGKILL, 5*time.Second)
				t.Fatalf("no work shown within 15 s (exit %d):\n%.2000s", code, out)
			}
			t.Logf("first work shown after %v", time.Since(start).Round(time.Millisecond))
			peak := peakRSS(t, w.cmd.Process.Pid)
			t.Logf("peak resident memory after %v: %.1f MiB", time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
			if peak > maxPeakRSS {
				t.Errorf("peak resident memory %d MiB, want at most %d MiB", peak>>20, maxPeakRSS>>20)
			}
			stopped := time.Now()
			code, out := w.stop(t, syscall.SIGINT, 10*time.Second)
			t.Logf("SIGINT to exit: %v, status %d", time.Since(stopped).Round(time.Millisecond), code)
			if i := strings.LastIndex(out, "\nwould fetch"); i >= 0 {
				out = out[i+1:] // the tail: summary and interruption
				out = out[strings.Index(out, "\n")+1:]
			}
			if code != 130 {
				t.Errorf("exit status %d after SIGINT, want 130:\n%.3000s", code, out)
			}
			m := regexp.MustCompile(`interrupted \(interrupt\) after (\d+) chunks: \d+ kept, (\d+) left, \d+ failed; run the same command again to resume`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no interruption summary:\n%.3000s", out)
			}
			done, _ := strconv.ParseInt(m[1], 10, 64)
			left, _ := strconv.ParseInt(m[2], 10, 64)
			if done == 0 || done+left != 1<<60 {
				t.Errorf("%d done and %d left, want some done and 2^60 in all", done, left)
			}
		})
	}
}

// slowOrigin serves src over HTTP, each chunk (under /s0/) after delay,
// counting the chunk requests in served (when not nil); with bare set,
// with neither ETag nor Last-Modified.
func slowOrigin(t *testing.T, src string, delay time.Duration, bare bool, served *atomic.Int64) *httptest.Server {
	t.Helper()
	files := http.FileServer(http.Dir(src))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/s0/") {
			time.Sleep(delay)
			if served != nil {
				served.Add(1)
			}
		}
		if bare {
			w = bareHeaders{w}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// bareHeaders drops ETag and Last-Modified from a response.
type bareHeaders struct{ http.ResponseWriter }

func (b bareHeaders) WriteHeader(code int) {
	b.Header().Del("Etag")
	b.Header().Del("Last-Modified")
	b.ResponseWriter.WriteHeader(code)
}

func (b bareHeaders) Write(p []byte) (int, error) {
	b.Header().Del("Etag")
	b.Header().Del("Last-Modified")
	return b.ResponseWriter.Write(p)
}

// TestWarmBackgroundSIGINT: a warm started by a script in the background
// (SIGINT ignored, as a shell starts `volfs warm ... &`) stops on
// `kill -INT` within seconds, with exit status 130 and its summary (kept,
// left, failed) saying that the same command resumes; run again, it skips
// what the first kept and fetches the rest.
func TestWarmBackgroundSIGINT(t *testing.T) {
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	var served atomic.Int64
	srv := slowOrigin(t, src, 150*time.Millisecond, false, &served)
	cacheDir := t.TempDir()
	args := []string{"--workers", "1", "--cache-dir", cacheDir, srv.URL, "s0"}

	w := startWarm(t, true, args...)
	for deadline := time.Now().Add(30 * time.Second); served.Load() < 8; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			code, out := w.stop(t, syscall.SIGKILL, 5*time.Second)
			t.Fatalf("warm fetched %d chunks in 30 s (exit %d):\n%s", served.Load(), code, out)
		}
	}
	start := time.Now()
	code, out := w.stop(t, syscall.SIGINT, 10*time.Second)
	t.Logf("kill -INT to exit: %v, status %d\n%s", time.Since(start).Round(time.Millisecond), code, out)
	if code != 130 {
		t.Fatalf("exit status %d after kill -INT, want 130", code)
	}
	m := regexp.MustCompile(`interrupted \(interrupt\) after (\d+) chunks: (\d+) kept, (\d+) left, (\d+) failed; run the same command again to resume`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no interruption summary:\n%s", out)
	}
	done, _ := strconv.Atoi(m[1])
	kept, _ := strconv.Atoi(m[2])
	left, _ := strconv.Atoi(m[3])
	if kept == 0 || kept != done || done+left != len(want) || m[4] != "0" {
		t.Errorf("interrupted: %d done, %d kept, %d left, %s failed; want some kept, all done kept, %d in all, 0 failed", done, kept, left, m[4], len(want))
	}

	out, err := runBounded(t, 2*time.Minute, volfsBin, append([]string{"warm"}, args...)...)
	t.Logf("warm again:\n%s", out)
	if f, c, _, x := warmSummaryOf(t, out); err != nil || c != kept || f != len(want)-kept || x != 0 {
		t.Errorf("resumed warm: %v, %d fetched, %d cached, %d failed; want %d, %d, 0", err, f, c, x, len(want)-kept, kept)
	}
}

// TestWarmNotKept: a warm that cannot keep what it loads says so, per
// reason, and exits with status 3. Into a disk cache too small for the
// layer it keeps what fits, and a mount with the origin gone reads exactly
// the chunks it reported kept, failing the others with EIO; from an origin
// that sends neither ETag nor Last-Modified it keeps nothing and says why.
func TestWarmNotKept(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	notKept := regexp.MustCompile(`(\d+) kept, (\d+) not kept`)

	t.Run("full", func(t *testing.T) {
		requireFUSE(t)
		srv := slowOrigin(t, src, 0, false, nil)
		cacheDir := t.TempDir()
		out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--disk-cache-size", "1MiB", srv.URL)
		t.Logf("warm into 1 MiB:\n%s", out)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("exit: %v, want status 3", err)
		}
		m := notKept.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "the disk cache is full") {
			t.Fatalf("no count of chunks not kept, or no reason:\n%s", out)
		}
		kept, _ := strconv.Atoi(m[1])
		lost, _ := strconv.Atoi(m[2])
		if kept == 0 || lost == 0 || kept+lost != len(want) {
			t.Errorf("%d kept and %d not kept, want both and %d in all", kept, lost, len(want))
		}
		srv.Close()
		s := startVolfs(t, "mount", "--cache-dir", cacheDir, "--disk-cache-size", "1MiB", srv.URL)
		var keys []string
		for k := range want {
			keys = append(keys, k)
		}
		sums, failed := hashChunks(t, s.mnt, keys)
		for k, sum := range sums {
			if sum != want[k] {
				t.Errorf("%s with the origin gone: sha256 %s, want %s", k, sum, want[k])
			}
		}
		for k, errno := range failed {
			if errno != "EIO" {
				t.Errorf("%s with the origin gone: %s, want EIO", k, errno)
			}
		}
		if len(sums) != kept {
			t.Errorf("with the origin gone %d chunks read and %d failed; warm reported %d kept", len(sums), len(failed), kept)
		}
	})

	t.Run("no-version", func(t *testing.T) {
		srv := slowOrigin(t, src, 0, true, nil)
		cacheDir := t.TempDir()
		out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, srv.URL)
		t.Logf("warm from an origin without versions:\n%s", out)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("exit: %v, want status 3", err)
		}
		if m := notKept.FindStringSubmatch(out); m == nil || m[1] != "0" || m[2] != "64" || !strings.Contains(out, "neither ETag nor Last-Modified") {
			t.Errorf("want 0 kept, 64 not kept, and why:\n%s", out)
		}
		out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--dry-run", "--cache-dir", cacheDir, srv.URL)
		if err != nil || !strings.Contains(out, "dry run: 64 chunks: 64 would be fetched, 0 already cached") {
			t.Errorf("dry run after the warm that kept nothing: %v\n%s", err, out)
		}
	})
}
