// Package mem recycles the large byte buffers of the read path and faults
// fresh ones in at once.
//
// A chunk load reads a stored object (often several MiB) only to decode it
// and drop it. Allocating that buffer afresh for every load makes the
// kernel fault in every page of it on first touch: on the 2-core VMs this
// project is measured on, faulting in 128 MiB of fresh memory a page at a
// time costs about half a second, as much as inflating it
// (docs/PERFORMANCE.md, "Memory"). So stored objects are read into buffers
// from a small pool and given back once decoded (Get, Put), and the
// buffers that must be fresh because they outlive the load (a decoded
// chunk kept by the cache) are faulted in with one madvise call instead of
// one fault per page (Make).
package mem

import (
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
)

// MinPooled is the smallest buffer worth pooling or prefaulting: below it
// the allocator's own size classes serve well and a page fault or two does
// not matter.
const MinPooled = 256 << 10

// MaxPooled bounds the bytes that idle pooled buffers hold in all. Loads
// in flight hold theirs outside the pool, so this only bounds what the
// pool keeps between loads: a few chunks' worth, enough for the pool's
// workers to reuse rather than allocate.
const MaxPooled = 32 << 20

// Size classes: four per doubling, so a buffer is at most 25% larger than
// asked for.
const stepsPerDoubling = 4

var pool struct {
	mu    sync.Mutex
	free  map[int][][]byte // GUARDED_BY(mu); by class size
	bytes int              // GUARDED_BY(mu)
}

// maxPooledClass bounds the idle bytes of one size class, so that buffers
// of a class nobody takes (decoded chunks given back, of a size no load
// asks for: a chunk whose transport gzip was removed into a buffer of its
// own) cannot crowd out the class every load takes and gives back (the
// stored objects' buffers). Measured: with the whole pool open to one
// class, 512 precomputed ".gz" chunks read in shuffled order through a
// 512 MiB cache faulted in 2.7 times the pages, and took 1.6 times the
// CPU, of a pool closed to decoded chunks (docs/PERFORMANCE.md).
const maxPooledClass = MaxPooled / 2

// poison is Poison's switch; VOLFS_MEM_POISON=1 in the environment turns
// it on at start, so that a test's volfs process poisons too.
var poison atomic.Bool

func init() { poison.Store(os.Getenv("VOLFS_MEM_POISON") == "1") }

// PoisonByte is what Poison fills buffers with.
const PoisonByte = 0xdb

// Poison turns poisoning on or off: while on, every pooled buffer Get
// returns, and every buffer Put takes back, is filled with PoisonByte, so
// that code that relies on Get's undefined contents (a decoder that
// leaves bytes unwritten, expecting zeros), or that reads a buffer after
// it was given back (a reference count wrong by one), reads bytes no
// codec makes and fails a test that compares them. A debugging aid for
// tests; it costs a memset per buffer.
func Poison(on bool) { poison.Store(on) }

// classAtLeast returns the smallest class size of at least n bytes.
func classAtLeast(n int) int {
	c := classAtMost(n)
	if c < n {
		c = nextClass(c)
	}
	return c
}

// classAtMost returns the largest class size of at most n bytes (n >=
// MinPooled).
func classAtMost(n int) int {
	shift := bits.Len(uint(n)) - 1
	base := 1 << shift
	step := max(base/stepsPerDoubling, 1)
	return base + (n-base)/step*step
}

func nextClass(c int) int {
	shift := bits.Len(uint(c)) - 1
	return c + max((1<<shift)/stepsPerDoubling, 1)
}

// Get returns a buffer of length n whose contents are undefined (not
// zeroed). Buffers of MinPooled bytes or more come from the pool when one
// of their size class is free; otherwise they are allocated with Make.
// Give the buffer back with Put once nothing refers to it, or let the
// garbage collector have it.
func Get(n int) []byte {
	if n < MinPooled {
		return make([]byte, n)
	}
	c := classAtLeast(n)
	pool.mu.Lock()
	if l := pool.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		pool.free[c] = l[:len(l)-1]
		pool.bytes -= cap(b)
		pool.mu.Unlock()
		return b[:n]
	}
	pool.mu.Unlock()
	b := Make(c)
	if poison.Load() {
		fill(b)
	}
	return b[:n]
}

// Put gives b back to the pool for a later Get. The caller must hold the
// only reference to b's memory: after Put, another load may overwrite it.
// Buffers that are too small, or that would take the pool past
// MaxPooled, are left to the garbage collector.
func Put(b []byte) {
	if cap(b) < MinPooled {
		return
	}
	if poison.Load() {
		fill(b[:cap(b)])
	}
	c := classAtMost(cap(b))
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.bytes+cap(b) > MaxPooled || (len(pool.free[c])+1)*c > maxPooledClass {
		return
	}
	if pool.free == nil {
		pool.free = make(map[int][][]byte)
	}
	pool.free[c] = append(pool.free[c], b[:c:c])
	pool.bytes += c
}

// fill fills b with PoisonByte, by doubling copies: a memmove each, where
// a loop of byte stores is instrumented store by store under the race
// detector (a 4 MiB buffer took 100-500 ms there, held under the locks
// of the code giving it back).
func fill(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = PoisonByte
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// Make returns a new zeroed buffer of length n, faulted in at once when n
// is at least MinPooled, for a buffer that outlives the call that fills it
// (a decoded chunk). Its contents are zero as make's are.
func Make(n int) []byte {
	b := make([]byte, n)
	if n >= MinPooled {
		prefault(b)
	}
	return b
}

// Overlap reports whether a and b share memory (anywhere within their
// capacities): a decoder that returns its input, or a part of it, must not
// have that input given back to the pool.
func Overlap(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a, b = a[:cap(a)], b[:cap(b)]
	as, bs := addr(a), addr(b)
	return as < bs+uintptr(len(b)) && bs < as+uintptr(len(a))
}
