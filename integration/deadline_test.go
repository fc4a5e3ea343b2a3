package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The deadline tests: reads that a slow, dripping or lying server, or a
// flood of clients, must not hold for longer than volfs's flags allow
// (issues 15 and 16). docs/RELIABILITY.md lists the figures they log.

// socketFDs counts the sockets the process pid holds open.
func socketFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestHostileMetricsFlood: 2000 connections to --metrics-addr that send
// half a request and wait hold at most the metrics server's few
// connections, so a volfs limited to 256 descriptors still opens and reads
// every chunk file and lists its directory; once the flood's clients leave,
// a scrape is answered.
func TestHostileMetricsFlood(t *testing.T) {
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 8, nil)
	addr := freeAddr(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft descriptor limit to the hard one: 256 for both.
	s, _ := startCmd(t, exec.Command("prlimit", "--nofile=256:256", volfsBin, "mount", "--cache-size", "16MiB", "--read-ahead", "0",
		"--metrics-addr", addr, src, mnt), mnt)
	pid := s.cmd.Process.Pid
	before := socketFDs(t, pid)

	const flood = 2000
	start := time.Now()
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d to the metrics port: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// The server takes what it will: wait until its cap is in use.
	for socketFDs(t, pid) < before+8 {
		if time.Since(start) > time.Minute {
			t.Fatalf("volfs accepted %d metrics connections in a minute, want 8", socketFDs(t, pid)-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, key := range keys {
		out, err := runBounded(t, time.Minute, "cat", filepath.Join(mnt, key))
		if err != nil || out != string(chunks[i]) {
			t.Errorf("cat %s during the flood: %v, %d bytes, want %d", key, err, len(out), len(chunks[i]))
		}
	}
	out, err := runBounded(t, time.Minute, "ls", filepath.Join(mnt, "s0"))
	for _, key := range keys {
		if !strings.Contains(out, filepath.Base(key)+"\n") {
			t.Errorf("ls during the flood: %v, %q lacks %s", err, out, filepath.Base(key))
		}
	}
	held := socketFDs(t, pid) - before
	t.Logf("metrics flood of %d half-sent requests: volfs holds %d of their sockets; reads done %v after the flood began",
		flood, held, time.Since(start).Round(time.Millisecond))
	if held > 8 {
		t.Errorf("volfs holds %d sockets of the flood, want at most 8", held)
	}
	// The flood leaves; the backlog it filled drains at once.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape after the flood: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "volfs_cache_hits_total") {
		t.Errorf("scrape after the flood: %s, %d bytes", resp.Status, len(body))
	}
	t.Logf("scrape answered %v after the flood began", time.Since(start).Round(time.Millisecond))
	checkPeak(t, s)
}

// dripHandler sends size bytes of 1, one a second, with a Content-Length
// of size, until the client leaves.
func dripHandler(size int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range size {
			if _, err := w.Write([]byte{1}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// TestHostileReadTimeout: with --read-timeout 4s and the default stall
// timeout and minimum rate (under which one attempt at a 128 KiB chunk may
// last 32 s, and the retries and the kernel's re-read 6.5 minutes), a read
// of a chunk or a pass-through file that a server drips fails with EIO
// within the read timeout and a few seconds of slack, while the mount
// serves other chunks; the kernel's re-read of the failed read-ahead
// fails at once.
func TestHostileReadTimeout(t *testing.T) {
	// The slack is below the read timeout: a kernel's re-read that started
	// over would take twice the timeout, and fail the test.
	const readTimeout = 4 * time.Second
	const slack = 3 * time.Second
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 3, nil)
	writeFile(t, filepath.Join(src, "notes.bin"), bytes.Repeat([]byte{9}, 1<<20))
	drip := dripHandler(hostileChunk)
	files := http.FileServer(http.Dir(src))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/"+keys[0] || r.URL.Path == "/notes.bin" && r.Method == http.MethodGet {
			drip(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--read-ahead", "0", "--read-timeout", readTimeout.String(), srv.URL)
	for _, name := range []string{keys[0], "notes.bin"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			start := time.Now()
			cmd := exec.Command("cat", filepath.Join(s.mnt, name))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The mount serves other chunks while the read waits.
			checkAlive(t, s.mnt, keys[1], chunks[1])
			var err error
			select {
			case err = <-done:
			case <-time.After(readTimeout + time.Minute):
				cmd.Process.Kill()
				t.Fatalf("cat %s still running after %v", name, readTimeout+time.Minute)
			}
			took := time.Since(start)
			t.Logf("dripped read of %s: EIO after %v (--read-timeout %v)", name, took.Round(time.Millisecond), readTimeout)
			if err == nil || !strings.Contains(out.String(), "Input/output error") {
				t.Errorf("cat %s: got %v, %q, want EIO", name, err, out.String())
			}
			if took > readTimeout+slack {
				t.Errorf("cat %s: EIO after %v, want at most %v", name, took, readTimeout+slack)
			}
		})
	}
	checkAlive(t, s.mnt, keys[2], chunks[2])
	checkPeak(t, s)
}
