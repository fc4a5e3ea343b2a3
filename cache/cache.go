// Package cache holds decoded chunks in memory, bounded in bytes, and
// deduplicates concurrent loads of the same chunk.
//
// # Flights
//
// Get runs at most one load per key at a time; every concurrent Get of that
// key waits for the same load (a flight). The load runs on its own goroutine
// under a context detached from any one caller: a caller whose context ends
// stops waiting at once, and the load is cancelled only when the last waiter
// has left (tailscale's singleflight.DoChanContext). A load that finishes
// with no waiters left still fills the cache, so the work is not lost.
//
// # Bounds
//
// The cache holds at most MaxBytes of values (plus a fixed cost per entry),
// evicting the least recently used. A value larger than the whole budget is
// returned to its waiters but not kept.
//
// All methods are safe for concurrent use. Values are shared between callers
// and must not be modified.
package cache

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// entryCost is the bookkeeping charged per entry on top of its bytes, so that
// many empty values (cached misses) are bounded too.
const entryCost = 128

// Loader produces the value of a key. It must honour ctx.
type Loader func(ctx context.Context) ([]byte, error)

// Options configures a Cache.
type Options struct {
	// MaxBytes bounds the bytes held. Zero disables keeping values (loads
	// are still deduplicated).
	MaxBytes int64
	// KeepError reports whether a load's error is a stable answer worth
	// keeping (for example "object does not exist"); kept errors are
	// returned by later Gets without a new load. Nil keeps no errors.
	KeepError func(error) bool
}

// Cache is a byte-bounded LRU of decoded chunks with in-flight dedupe.
type Cache struct {
	opts Options

	// LOCK ORDERING: mu is never held while a loader runs or while waiting.
	mu      sync.Mutex
	lru     *simplelru.LRU[string, entry] // GUARDED_BY(mu)
	used    int64                         // GUARDED_BY(mu); bytes charged for lru's entries
	flights map[string]*flight            // GUARDED_BY(mu)

	stats Stats // GUARDED_BY(mu)
}

type entry struct {
	val []byte
	err error
}

func (e entry) cost() int64 { return int64(len(e.val)) + entryCost }

// flight is one load in progress.
type flight struct {
	done    chan struct{} // closed when val and err are set
	val     []byte
	err     error
	waiters int                // GUARDED_BY(Cache.mu)
	cancel  context.CancelFunc // cancels the load's context
}

// Stats counts what a Cache did since it was made.
type Stats struct {
	Hits, Misses, Shared, Evictions int64
	Bytes                           int64 // bytes held now
}

// New returns an empty cache.
func New(opts Options) *Cache {
	c := &Cache{opts: opts, flights: make(map[string]*flight)}
	// The LRU is bounded by bytes below, not by entry count.
	c.lru, _ = simplelru.NewLRU[string, entry](math.MaxInt, func(_ string, e entry) {
		c.used -= e.cost()
		c.stats.Evictions++
	})
	return c
}

// Get returns the value for key: from the cache, from a load of key already
// in flight, or by running load. If ctx ends first, Get returns ctx.Err()
// and leaves the load to any other waiters.
func (c *Cache) Get(ctx context.Context, key string, load Loader) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.lru.Get(key); ok {
		c.stats.Hits++
		c.mu.Unlock()
		return e.val, e.err
	}
	f, ok := c.flights[key]
	if ok {
		c.stats.Shared++
	} else {
		c.stats.Misses++
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		c.flights[key] = f
		go c.run(lctx, key, f, load)
	}
	f.waiters++
	c.mu.Unlock()

	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		c.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// run executes one flight and publishes its result.
func (c *Cache) run(ctx context.Context, key string, f *flight, load Loader) {
	defer f.cancel()
	defer func() {
		// A panicking decoder must not take the process down: it becomes
		// this chunk's error.
		if r := recover(); r != nil {
			f.val, f.err = nil, fmt.Errorf("cache: load %s panicked: %v\n%s", key, r, debug.Stack())
		}
		c.mu.Lock()
		delete(c.flights, key)
		e := entry{f.val, f.err}
		keep := e.err == nil || (c.opts.KeepError != nil && c.opts.KeepError(e.err))
		if keep && e.cost() <= c.opts.MaxBytes {
			c.lru.Add(key, e)
			c.used += e.cost()
			for c.used > c.opts.MaxBytes {
				c.lru.RemoveOldest()
			}
		}
		c.mu.Unlock()
		close(f.done)
	}()
	f.val, f.err = load(ctx)
}

// memHeadroom is the memory beyond the cache that MemoryLimit leaves for
// loads in flight, HTTP buffers and go-fuse's request buffers.
const memHeadroom = 256 << 20

// MemoryLimit returns a soft memory limit (runtime/debug.SetMemoryLimit)
// for a process whose heap is mostly a cache of maxBytes: 1.25 x maxBytes
// plus a fixed headroom. Without a limit the collector lets the heap grow
// to about twice the live data before it runs, so a full cache would cost
// twice its size (BenchmarkChurnHeap).
func MemoryLimit(maxBytes int64) int64 { return maxBytes + maxBytes/4 + memHeadroom }

// Stats returns counters and the bytes held.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes = c.used
	return s
}
