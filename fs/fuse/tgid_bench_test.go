package fuse

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// BenchmarkTgid measures tgidCache.of, which every open of a file through
// the mount calls with the caller's thread id: a process's main thread
// (kept, no system call), another thread of it (kept, checked with a stat
// of /proc/<tgid>/task/<tid>), and a thread seen for the first time (its
// /proc/<tid>/status read), as a program that opens each file from a new
// short-lived thread makes it, in a process seen before or not.
func BenchmarkTgid(b *testing.B) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		b.Skip("no /proc")
	}
	// A thread of this process other than its main one, kept alive for
	// the benchmark: a goroutine locked to the main thread keeps it, and
	// the next one gets another.
	tids := make(chan uint32)
	done := make(chan struct{})
	defer close(done)
	thread := uint32(os.Getpid())
	for thread == uint32(os.Getpid()) {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- uint32(syscall.Gettid())
			<-done
		}()
		thread = <-tids
	}
	for _, bc := range []struct {
		name  string
		tid   uint32
		fresh bool // forget every kept answer before each lookup
		alone bool // and every process seen
	}{
		{"main-thread", uint32(os.Getpid()), false, false},
		{"other-thread-kept", thread, false, false},
		{"new-thread-seen-process", thread, true, false},
		{"new-thread-new-process", thread, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &tgidCache{proc: "/proc"}
			c.of(bc.tid)
			b.ReportAllocs()
			for b.Loop() {
				if bc.fresh {
					c.forget(bc.alone)
				}
				if got := c.of(bc.tid); got != uint32(os.Getpid()) {
					b.Fatalf("tgid of %d: got %d, want %d", bc.tid, got, os.Getpid())
				}
			}
		})
	}
}

// forget drops every kept answer, and with processes the processes seen.
func (c *tgidCache) forget(processes bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
	if processes {
		c.last = 0
	}
}
