package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
