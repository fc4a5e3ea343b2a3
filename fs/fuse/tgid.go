package fuse

import (
	"bytes"
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
// cheaper than reading status: the kernel formats all of status, memory
// figures included, for the one line read): a thread id that an exited
// thread gave back and another process reuses is looked up again. A new
// thread is first tried, by the same stat, as a thread of the process of
// the last answer: a program that reads from short-lived threads, or from
// a pool, opens file after file from threads of one process. A thread
// that cannot be looked up (gone, or in a pid namespace volfs does not
// see, where the kernel reports 0) is its own reader.

// maxTgids bounds the thread ids kept: far more than the threads of the
// programs that read a mount at once; when full, the map starts afresh.
const maxTgids = 4096

type tgidCache struct {
	proc string // "/proc"; tests may point it elsewhere

	mu   sync.Mutex
	m    map[uint32]uint32 // GUARDED_BY(mu); thread id -> thread group id
	last uint32            // GUARDED_BY(mu); the thread group id last found, or 0
}

// of returns the thread group id of thread tid, or tid when it cannot be
// found. Safe for concurrent use.
func (c *tgidCache) of(tid uint32) uint32 {
	if tid == 0 {
		return 0
	}
	c.mu.Lock()
	tgid, ok := c.m[tid]
	last := c.last
	c.mu.Unlock()
	if ok && (tgid == tid || c.member(tgid, tid)) {
		return tgid
	}
	switch {
	case last != 0 && last != tgid && c.member(last, tid):
		tgid = last
	default:
		if tgid, ok = c.lookup(tid); !ok {
			return tid
		}
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxTgids {
		c.m = make(map[uint32]uint32)
	}
	c.m[tid] = tgid
	c.last = tgid
	c.mu.Unlock()
	return tgid
}

// member reports whether thread tid belongs to process tgid now.
func (c *tgidCache) member(tgid, tid uint32) bool {
	var st syscall.Stat_t
	return syscall.Stat(c.proc+"/"+strconv.FormatUint(uint64(tgid), 10)+"/task/"+strconv.FormatUint(uint64(tid), 10), &st) == nil
}

// statusHead is how much of /proc/<tid>/status lookup reads: the Tgid
// line is the fourth, after Name (a command name of at most 15 bytes,
// escaped to at most 4 bytes each), Umask and State.
const statusHead = 256

// lookup reads the Tgid line of /proc/<tid>/status, in one read of its
// first statusHead bytes.
func (c *tgidCache) lookup(tid uint32) (uint32, bool) {
	var buf [statusHead]byte
	n, err := readHead(c.proc+"/"+strconv.FormatUint(uint64(tid), 10)+"/status", buf[:])
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(buf[:n], []byte("\nTgid:"))
	if !ok {
		return 0, false
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return 0, false // cut short: a Tgid line past statusHead
	}
	tgid, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 32)
	if err != nil || tgid == 0 {
		return 0, false
	}
	return uint32(tgid), true
}

// readHead reads the first len(buf) bytes of the file at path, or fewer
// if it is shorter, in one read: a /proc file's first read returns what
// fits of its text. It costs three system calls and no allocation but the
// path's.
func readHead(path string, buf []byte) (int, error) {
	var fd int
	var err error
	for {
		if fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Read(fd, buf)
		if err != syscall.EINTR {
			return max(n, 0), err
		}
	}
}
