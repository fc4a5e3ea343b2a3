package fs

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// The FUSE request's pid is the calling thread's id, not its process's: a
// program that reads with a pool of threads would look like as many
// readers, each with a read-ahead window of its own and none that sees
// the whole sequence. tgids maps a thread id to its thread group id (the
// process id) from /proc/<tid>/status, and keeps the answers.
//
// A kept answer is checked with a stat of /proc/<tgid>/task/<tid> (far
// cheaper than reading status): a thread id that an exited thread gave
// back and another process reuses is looked up again. A thread that
// cannot be looked up (gone, or in a pid namespace volfs does not see,
// where the kernel reports 0) is its own reader.

// maxTgids bounds the thread ids kept: far more than the threads of the
// programs that read a mount at once; when full, the map starts afresh.
const maxTgids = 4096

type tgidCache struct {
	proc string // "/proc"; tests may point it elsewhere

	mu sync.Mutex
	m  map[uint32]uint32 // GUARDED_BY(mu); thread id -> thread group id
}

// of returns the thread group id of thread tid, or tid when it cannot be
// found. Safe for concurrent use.
func (c *tgidCache) of(tid uint32) uint32 {
	if tid == 0 {
		return 0
	}
	c.mu.Lock()
	tgid, ok := c.m[tid]
	c.mu.Unlock()
	if ok && (tgid == tid || c.member(tgid, tid)) {
		return tgid
	}
	tgid, ok = c.lookup(tid)
	if !ok {
		return tid
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxTgids {
		c.m = make(map[uint32]uint32)
	}
	c.m[tid] = tgid
	c.mu.Unlock()
	return tgid
}

// member reports whether thread tid belongs to process tgid now.
func (c *tgidCache) member(tgid, tid uint32) bool {
	var st syscall.Stat_t
	return syscall.Stat(c.proc+"/"+strconv.FormatUint(uint64(tgid), 10)+"/task/"+strconv.FormatUint(uint64(tid), 10), &st) == nil
}

// lookup reads the Tgid line of /proc/<tid>/status.
func (c *tgidCache) lookup(tid uint32) (uint32, bool) {
	b, err := os.ReadFile(c.proc + "/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(b, []byte("\nTgid:"))
	if !ok {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint32(n), true
}
