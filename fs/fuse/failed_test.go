package fuse

import (
	"syscall"
	"testing"
	"time"
)

// TestFailedRange: a failed read is remembered for the reads that overlap
// its byte range, and only for them.
func TestFailedRange(t *testing.T) {
	var f failedRange
	if got := f.recent(0, 4096); got != 0 {
		t.Errorf("nothing failed yet: got %v, want 0", got)
	}
	f.remember(1<<20, 1<<20, syscall.EIO)
	for _, tc := range []struct {
		off, n int64
		want   syscall.Errno
	}{
		{1 << 20, 4096, syscall.EIO},      // the kernel's re-read of the first page
		{2<<20 - 1, 4096, syscall.EIO},    // the last byte
		{1<<20 - 4096, 8192, syscall.EIO}, // straddles the start
		{1<<20 - 4096, 4096, 0},           // ends where it starts
		{2 << 20, 4096, 0},                // starts where it ends
		{0, 128 << 10, 0},                 // elsewhere
	} {
		if got := f.recent(tc.off, tc.n); got != tc.want {
			t.Errorf("recent(%d, %d): got %v, want %v", tc.off, tc.n, got, tc.want)
		}
	}
	f.mu.Lock()
	f.at = time.Now().Add(-failureMemory)
	f.mu.Unlock()
	if got := f.recent(1<<20, 4096); got != 0 {
		t.Errorf("after failureMemory: got %v, want 0", got)
	}
}

// BenchmarkFailedRange measures the check of a file's remembered failure
// that every read of the mount pays before its work.
func BenchmarkFailedRange(b *testing.B) {
	var failed failedRange
	for b.Loop() {
		if failed.recent(0, 128<<10) != 0 {
			b.Fatal("a failure remembered")
		}
	}
}
