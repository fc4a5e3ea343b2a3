package fuse

import (
	"sync"
	"syscall"
	"time"
)

// failureMemory is how long a failed read of a file is remembered: a read
// that overlaps its byte range within that time fails at once with the
// same error. The kernel answers a failed read-ahead by reading the first
// page again, at once; without the memory that re-read would start every
// fetch and retry over, doubling the time a reader waits for its EIO. It
// is short, so that a program that retries later finds a source that has
// recovered.
const failureMemory = 5 * time.Second

// failedRange remembers the last failed read of a file (failureMemory).
type failedRange struct {
	mu       sync.Mutex
	off, end int64         // GUARDED_BY(mu); the byte range that failed
	errno    syscall.Errno // GUARDED_BY(mu); 0 when none
	at       time.Time     // GUARDED_BY(mu)
}

// recent returns the errno of a failure, remembered less than
// failureMemory ago, whose range overlaps [off, off+n); 0 if none.
func (f *failedRange) recent(off, n int64) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.errno == 0 || time.Since(f.at) >= failureMemory || off >= f.end || off+n <= f.off {
		return 0
	}
	return f.errno
}

// remember records that the read of [off, off+n) failed with errno.
func (f *failedRange) remember(off, n int64, errno syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off, f.end, f.errno, f.at = off, off+n, errno, time.Now()
}
