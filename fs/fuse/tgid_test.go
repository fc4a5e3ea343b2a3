package fuse

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// TestTgidOwnThreads: every thread of this process maps to its pid.
func TestTgidOwnThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	c := &tgidCache{proc: "/proc"}
	got := make(chan [2]int, 4)
	for range 4 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tid := syscall.Gettid()
			got <- [2]int{tid, int(c.of(uint32(tid)))}
		}()
	}
	for range 4 {
		g := <-got
		if g[1] != os.Getpid() {
			t.Errorf("tgid of thread %d: got %d, want %d", g[0], g[1], os.Getpid())
		}
	}
}

// TestTgidFake: answers from a /proc written by the test, kept while the
// thread is its process's member and looked up again when it is not.
func TestTgidFake(t *testing.T) {
	proc := t.TempDir()
	write := func(tid, tgid string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(proc, tid), 0o755); err != nil {
			t.Fatal(err)
		}
		status := "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" + tgid + "\nNgid:\t0\nPid:\t" + tid + "\n"
		if err := os.WriteFile(filepath.Join(proc, tid, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(proc, tgid, "task", tid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &tgidCache{proc: proc}
	write("101", "100")
	write("102", "100")
	for _, tc := range []struct {
		tid, want uint32
	}{
		{101, 100},
		{102, 100},
		{101, 100}, // kept
		{999, 999}, // no such thread: its own reader
		{0, 0},     // outside volfs's pid namespace
	} {
		if got := c.of(tc.tid); got != tc.want {
			t.Errorf("tgid of %d: got %d, want %d", tc.tid, got, tc.want)
		}
	}
	// Thread 101 exits and another process reuses its id.
	if err := os.RemoveAll(filepath.Join(proc, "100", "task", "101")); err != nil {
		t.Fatal(err)
	}
	write("101", "200")
	if got := c.of(101); got != 200 {
		t.Errorf("tgid of a reused thread id: got %d, want 200", got)
	}
	// Malformed status files are no answer.
	for _, status := range []string{"Name:\tx\n", "Name:\tx\nTgid:\tabc\n", "Name:\tx\nTgid:\t0\n"} {
		if err := os.MkdirAll(filepath.Join(proc, "300"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, "300", "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := (&tgidCache{proc: proc}).of(300); got != 300 {
			t.Errorf("tgid from status %q: got %d, want 300 (the thread itself)", status, got)
		}
	}
}

// TestTgidBounded: the map never holds more than maxTgids thread ids.
func TestTgidBounded(t *testing.T) {
	proc := t.TempDir()
	c := &tgidCache{proc: proc}
	for tid := 1; tid <= maxTgids+10; tid++ {
		d := filepath.Join(proc, strconv.Itoa(tid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "status"), []byte("Name:\tx\nTgid:\t"+strconv.Itoa(tid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := c.of(uint32(tid)); got != uint32(tid) {
			t.Fatalf("tgid of %d: got %d, want %d", tid, got, tid)
		}
		c.mu.Lock()
		n := len(c.m)
		c.mu.Unlock()
		if n > maxTgids {
			t.Fatalf("after %d thread ids the map holds %d, want at most %d", tid, n, maxTgids)
		}
	}
}

// TestTgidSeenProcess: a new thread of the process of the last answer is
// found by the stat of its task entry, without its status; a thread of
// another process is looked up in its status.
func TestTgidSeenProcess(t *testing.T) {
	proc := t.TempDir()
	mkdir := func(elem ...string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(append([]string{proc}, elem...)...), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	status := func(tid, tgid string) {
		t.Helper()
		mkdir(tid)
		if err := os.WriteFile(filepath.Join(proc, tid, "status"), []byte("Name:\tx\nTgid:\t"+tgid+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	status("101", "100")
	mkdir("100", "task", "101")
	mkdir("100", "task", "102") // no status: found only as a thread of 100
	status("201", "200")
	mkdir("200", "task", "201")
	c := &tgidCache{proc: proc}
	for _, tc := range []struct {
		tid, want uint32
	}{
		{101, 100},
		{102, 100}, // a thread of the last answer's process
		{201, 200}, // another process: its status
		{102, 100}, // kept
	} {
		if got := c.of(tc.tid); got != tc.want {
			t.Errorf("tgid of %d: got %d, want %d", tc.tid, got, tc.want)
		}
	}
	if got := (&tgidCache{proc: proc}).of(102); got != 102 {
		t.Errorf("tgid of 102 with no process seen: got %d, want 102 (its status is missing)", got)
	}
}
