package cache

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// entryCost is the bookkeeping charged per entry on top of its value and
// key, so that many empty values (kept misses) are bounded by what they
// hold: the LRU's element (144 bytes with the entry), its map slot (about
// 30 with the map's slack) and the rounding of the key's allocation.
// TestEntryCost measures it: a kept miss with a shared error and a key of
// 24 bytes holds 190 to 200 bytes and is charged 280.
const entryCost = 176

// errCost is charged on top for a kept error: its message, and the values
// that wrap it. An error shared by many entries (a sentinel) costs less
// than this, but the cache cannot tell.
const errCost = 64

// Loader produces the value of a key. It must honour ctx.
type Loader func(ctx context.Context) ([]byte, error)

// Options configures a Cache and a Store.
type Options struct {
	// MaxBytes bounds the bytes held. Zero disables keeping values (loads
	// are still deduplicated).
	MaxBytes int64
	// ProbationBytes bounds the bytes held by values that were prefetched
	// and not read yet. Zero means MaxBytes/4; a negative value keeps no
	// prefetched values.
	ProbationBytes int64
	// KeepError reports whether a load's error is a stable answer worth
	// keeping (for example "object does not exist"); kept errors are
	// returned by later Gets without a new load. Nil keeps no errors.
	KeepError func(error) bool
	// Workers is the number of persistent workers of a Store's pool. Zero
	// means runtime.GOMAXPROCS(0). The Cache alone ignores it.
	Workers int
	// CPUSlots is the number of Load.CPU's slots: the prefetch
	// decodes that run at once, one per core. Zero means
	// runtime.GOMAXPROCS(0); a process that runs more Ps than cores (see
	// cmd/volfs) passes its core count.
	CPUSlots int
	// Tiers are the Store's tiers below memory, in the order they are
	// asked (see Store.Loader); the Cache alone ignores them.
	Tiers []Tier
	// InFlightBytes is the size of Store.Reserve's budget: the bytes that
	// readers of stitched views hold at once beside the cache. Zero means
	// InFlightBudget(MaxBytes).
	InFlightBytes int64
}

// InFlightBudget is the default budget of the bytes in flight for a cache
// of maxBytes: half the cache, at least 16 MiB (a view's largest batch,
// so that one always fits) and at most memHeadroom, the room that
// MemoryLimit leaves beside the cache.
func InFlightBudget(maxBytes int64) int64 { return min(max(maxBytes/2, 16<<20), memHeadroom) }

// Cache is a byte-bounded LRU of decoded chunks with in-flight dedupe.
type Cache struct {
	opts    Options
	probMax int64

	// LOCK ORDERING: mu is never held while a loader runs or while waiting.
	mu       sync.Mutex
	main     *simplelru.LRU[string, entry] // GUARDED_BY(mu); values a reader has read
	prob     *simplelru.LRU[string, entry] // GUARDED_BY(mu); values only prefetched
	mainUsed int64                         // GUARDED_BY(mu); bytes charged for main
	probUsed int64                         // GUARDED_BY(mu); bytes charged for prob
	flights  map[string]*flight            // GUARDED_BY(mu)

	stats Stats // GUARDED_BY(mu)
}

type entry struct {
	val    []byte
	err    error
	charge int64  // set by charged when kept
	own    *owned // how val is given back for reuse, or nil (recycle.go)
}

// charged returns e with its charge set for key: the capacity of its
// value, not its length (a decoder's pooled buffer may be larger than the
// chunk, and the memory it pins is what counts), its key, its error's
// message, and the bookkeeping of an entry.
func (e entry) charged(key string) entry {
	e.charge = int64(cap(e.val)) + int64(len(key)) + entryCost
	if e.err != nil {
		e.charge += int64(len(e.err.Error())) + errCost
	}
	return e
}

func (e entry) cost() int64 { return e.charge }

// flight is one load, queued or in progress.
type flight struct {
	key    string
	load   Loader
	ctx    context.Context // the load's context: detached, cancelled when all waiters leave
	cancel context.CancelFunc

	claimed atomic.Bool   // set by the goroutine that runs the load
	done    chan struct{} // closed when val and err are set
	val     []byte
	err     error
	stable  bool // err is a stable answer (Options.KeepError) of a load not cancelled

	waiters     int              // GUARDED_BY(Cache.mu); readers waiting, plus one for a prefetch's hold
	finished    bool             // GUARDED_BY(Cache.mu); val and err are set
	prefetched  bool             // GUARDED_BY(Cache.mu); made by a prefetch
	demand      bool             // GUARDED_BY(Cache.mu); a reader waits or waited for it
	wanted      chan struct{}    // closed when demand is first set
	prefetchRef bool             // GUARDED_BY(Cache.mu); the prefetch's hold is counted in waiters
	set         *prefetchSet     // GUARDED_BY(Cache.mu); the Prefetch call holding it, until it finishes
	notify      []chan<- *flight // GUARDED_BY(Cache.mu); batches told when it finishes

	// What the value is and who took it, for giving it back (recycle.go).
	declared *owned // set by the load (Load.Own), read by finish on the same goroutine
	own      *owned // GUARDED_BY(Cache.mu); declared, once finish published it
	escaped  bool   // GUARDED_BY(Cache.mu); a waiter takes the value without a count
	counted  int    // GUARDED_BY(Cache.mu); waiters that count it (Acquire), until finish
}

// Stats counts what a Cache did since it was made.
type Stats struct {
	// Hits counts reads answered from memory, Misses reads that started a
	// load, Shared reads that joined a load already in flight.
	Hits, Misses, Shared int64
	// Evictions counts values dropped to stay within the bounds.
	Evictions int64
	// Abandoned counts flights cancelled because every waiter left.
	Abandoned int64
	// PrefetchIssued counts loads a prefetch started; PrefetchUsed those a
	// reader then read (from probation, or by joining the flight);
	// PrefetchWasted those evicted or cancelled before any reader came.
	PrefetchIssued, PrefetchUsed, PrefetchWasted int64
	// Recycled counts values given back for reuse once nothing could
	// read them (recycle.go).
	Recycled int64
	// Bytes is held now, of which ProbationBytes by prefetched values not
	// read yet.
	Bytes, ProbationBytes int64
}

// New returns an empty cache.
func New(opts Options) *Cache {
	c := &Cache{opts: opts, probMax: opts.ProbationBytes, flights: make(map[string]*flight)}
	if c.probMax == 0 {
		c.probMax = opts.MaxBytes / 4
	}
	c.probMax = min(c.probMax, opts.MaxBytes)
	// Both segments are bounded by bytes below, not by entry count, and
	// evictions are counted where they happen rather than in a callback,
	// so that a promotion from probation is not counted as one.
	c.main, _ = simplelru.NewLRU[string, entry](math.MaxInt, nil)
	c.prob, _ = simplelru.NewLRU[string, entry](math.MaxInt, nil)
	return c
}

// Get returns the value for key: from the cache, from a load of key already
// in flight, or by running load on the calling goroutine. If ctx ends first,
// Get returns ctx.Err(); a load it runs itself is cancelled then unless other
// readers wait for it, in which case Get finishes it for them first and
// returns its result.
func (c *Cache) Get(ctx context.Context, key string, load Loader) ([]byte, error) {
	v, _, err := c.GetHit(ctx, key, load)
	return v, err
}

// GetHit is Get that also reports whether the answer was in memory, so the
// reader did not wait (the read-ahead Tracker's "waited" is its negation).
func (c *Cache) GetHit(ctx context.Context, key string, load Loader) (val []byte, hit bool, err error) {
	e, hit, f := c.lookup(key, load, nil, false)
	if hit {
		return e.val, true, e.err
	}
	val, err = c.await(ctx, f)
	return val, false, err
}

// Holds reports whether key is in memory or being loaded: a Get of it now
// would not start a load of its own. It counts nothing and moves nothing
// in the LRU order (a look, not a use).
func (c *Cache) Holds(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.main.Contains(key) || c.prob.Contains(key) {
		return true
	}
	_, ok := c.flights[key]
	return ok
}

// Peek returns what memory holds for key, if anything: a value, or a kept
// error. Like Holds it counts nothing and moves nothing in the LRU order,
// and it never waits for a load in flight.
func (c *Cache) Peek(key string) (val []byte, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.main.Peek(key)
	if !ok {
		e, ok = c.prob.Peek(key)
	}
	return e.val, ok, e.err
}

// await waits for f, running it inline if no one has claimed it, and leaves
// it. The caller holds one waiter reference on f.
func (c *Cache) await(ctx context.Context, f *flight) ([]byte, error) {
	if f.claimed.CompareAndSwap(false, true) {
		stop := context.AfterFunc(ctx, func() { c.leave(f) })
		c.execute(f)
		if stop() {
			c.leave(f)
		}
		if f.err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return f.val, f.err
	}
	select {
	case <-f.done:
		c.leave(f)
		return f.val, f.err
	case <-ctx.Done():
		c.leave(f)
		return nil, ctx.Err()
	}
}

// lookup answers key from memory (hit) or returns the flight that loads it,
// with one waiter reference taken for the caller, made with load if none
// was in flight. If notify is not nil, f is sent on it when it finishes (a
// flight in the table has not finished yet). A counted caller (Acquire)
// takes a reference on the value it will release; any other caller's
// value is never given back for reuse (recycle.go).
func (c *Cache) lookup(key string, load Loader, notify chan<- *flight, counted bool) (e entry, hit bool, f *flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.main.Get(key); ok {
		c.stats.Hits++
		handOut(e.own, counted)
		return e, true, nil
	}
	if e, ok := c.prob.Peek(key); ok {
		c.stats.Hits++
		c.stats.PrefetchUsed++
		c.prob.Remove(key)
		c.probUsed -= e.cost()
		handOut(e.own, counted)
		c.addMain(key, e)
		return e, true, nil
	}
	f, ok := c.flights[key]
	if ok {
		c.stats.Shared++
		if f.prefetched && !f.demand {
			c.stats.PrefetchUsed++
		}
	} else {
		c.stats.Misses++
		f = c.newFlight(key, load)
	}
	if !f.demand {
		f.demand = true
		close(f.wanted)
	}
	f.waiters++
	if counted {
		f.counted++
	} else {
		f.escaped = true
	}
	if notify != nil {
		f.notify = append(f.notify, notify)
	}
	return entry{}, false, f
}

// lookupPrefetch returns a new flight for key, held by a prefetch reference,
// or nil if key is in memory or already in flight.
func (c *Cache) lookupPrefetch(key string, load Loader) *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.main.Contains(key) || c.prob.Contains(key) {
		return nil
	}
	if _, ok := c.flights[key]; ok {
		return nil
	}
	f := c.newFlight(key, load)
	f.prefetched, f.prefetchRef = true, true
	f.waiters++
	return f
}

// newFlight makes a flight for key and enters it in the table.
//
// REQUIRES: c.mu held.
func (c *Cache) newFlight(key string, load Loader) *flight {
	wanted := make(chan struct{})
	f := &flight{key: key, load: load, done: make(chan struct{}), wanted: wanted}
	ctx := context.WithValue(context.WithValue(context.Background(), wantedKey{}, wanted), flightKey{}, f)
	f.ctx, f.cancel = context.WithCancel(ctx)
	c.flights[key] = f
	return f
}

// leave drops one reader's waiter reference. The last reference out of an
// unfinished flight cancels it and takes it out of the table.
func (c *Cache) leave(f *flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.waiters--
	c.abandonIfUnwanted(f)
}

// countIssued counts n prefetch loads queued.
func (c *Cache) countIssued(n int) {
	c.mu.Lock()
	c.stats.PrefetchIssued += int64(n)
	c.mu.Unlock()
}

// prefetchSet is the flights of one Prefetch call that have not finished.
// Its context's AfterFunc holds it, so it must not hold finished flights:
// a long-lived context would pin their values.
type prefetchSet struct {
	flights map[*flight]struct{} // GUARDED_BY(Cache.mu)
	stop    func() bool          // GUARDED_BY(Cache.mu); unregisters the AfterFunc, once set
}

// holdSet attaches the unfinished flights of fs to a new set, released when
// ctx ends.
func (c *Cache) holdSet(ctx context.Context, fs []*flight) {
	set := &prefetchSet{flights: make(map[*flight]struct{}, len(fs))}
	c.mu.Lock()
	for _, f := range fs {
		if !f.finished {
			set.flights[f] = struct{}{}
			f.set = set
		}
	}
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for f := range set.flights {
			f.set = nil
			c.releaseLocked(f, true)
		}
		clear(set.flights)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(set.flights) == 0 {
		stop()
	} else {
		set.stop = stop
	}
}

// release drops a prefetch's hold on f, if it still has it; if that cancels
// the load and wasted is set, the prefetch counts as wasted.
func (c *Cache) release(f *flight, wasted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(f, wasted)
}

// releaseLocked is release with c.mu held.
//
// REQUIRES: c.mu held.
func (c *Cache) releaseLocked(f *flight, wasted bool) {
	if !f.prefetchRef {
		return
	}
	f.prefetchRef = false
	f.waiters--
	if c.abandonIfUnwanted(f) && wasted && !f.demand {
		c.stats.PrefetchWasted++
	}
}

// abandonIfUnwanted cancels f if it is unfinished and no one waits for it,
// and reports whether it did.
//
// REQUIRES: c.mu held.
func (c *Cache) abandonIfUnwanted(f *flight) bool {
	if f.waiters > 0 || f.finished {
		return false
	}
	f.cancel()
	if c.flights[f.key] == f {
		delete(c.flights, f.key)
		c.stats.Abandoned++
	}
	return true
}

// execute runs f's load on the calling goroutine, which must have claimed
// it, and publishes the result. A flight abandoned before it started does
// not run its load.
func (c *Cache) execute(f *flight) {
	var val []byte
	var err error
	func() {
		defer func() {
			// A panicking decoder must not take the process down: it
			// becomes this chunk's error.
			if r := recover(); r != nil {
				val, err = nil, fmt.Errorf("cache: load %s panicked: %v\n%s", f.key, r, debug.Stack())
			}
		}()
		if err = f.ctx.Err(); err == nil {
			val, err = f.load(f.ctx)
		}
	}()
	c.finish(f, val, err)
}

// finish publishes a flight's result, keeps it if it is worth keeping, and
// wakes its waiters.
func (c *Cache) finish(f *flight, val []byte, err error) {
	defer f.cancel()
	c.mu.Lock()
	f.val, f.err, f.finished = val, err, true
	if c.flights[f.key] == f {
		delete(c.flights, f.key)
	}
	e := entry{val: val, err: err}
	o := f.declared
	if o != nil {
		// The waiters so far took it counted or not; none come after.
		// A load whose Loader returned other than what it declared
		// (a wrapper's error or value) owns nothing it returns.
		o.escaped = o.escaped || f.escaped || err != nil || !sameMemory(val, o.val)
		if err == nil {
			f.own, e.own = o, o
			o.refs += f.counted
		}
	}
	f.stable = err != nil && f.ctx.Err() == nil && c.opts.KeepError != nil && c.opts.KeepError(err)
	keep := err == nil || f.stable
	if keep {
		if f.demand {
			c.addMain(f.key, e)
		} else {
			c.addProbation(f.key, e)
		}
	} else if f.prefetched && !f.demand && f.prefetchRef {
		c.stats.PrefetchWasted++
	}
	if o != nil {
		o.refs-- // the load's own hold (Load.Own)
		c.recycleLocked(o)
	}
	f.prefetchRef = false
	if set := f.set; set != nil {
		f.set = nil
		delete(set.flights, f)
		if len(set.flights) == 0 && set.stop != nil {
			set.stop() // does not wait for the AfterFunc: safe under c.mu
		}
	}
	for _, ch := range f.notify {
		ch <- f // buffered for every flight of the batch: never blocks
	}
	f.notify = nil
	c.mu.Unlock()
	close(f.done)
}

// addMain keeps e as read, evicting read values first.
//
// REQUIRES: c.mu held.
func (c *Cache) addMain(key string, e entry) {
	e = e.charged(key)
	cost := e.cost()
	if cost > c.opts.MaxBytes || c.main.Contains(key) || c.prob.Contains(key) {
		// Too big, or a flight that was abandoned and redone raced this
		// one: the value already held is as good.
		c.unkept(e)
		return
	}
	if e.own != nil {
		e.own.kept = true
	}
	c.main.Add(key, e)
	c.mainUsed += cost
	for c.mainUsed+c.probUsed > c.opts.MaxBytes {
		if c.main.Len() > 1 {
			c.evictRead()
		} else {
			c.evictPrefetched()
		}
	}
}

// addProbation keeps e as prefetched. Within probation's share it makes
// room by evicting the least recently used read values, but never below
// MaxBytes-probMax of them; beyond its share, or when read values hold no
// more than that, it evicts the oldest prefetched values, possibly e.
//
// REQUIRES: c.mu held.
func (c *Cache) addProbation(key string, e entry) {
	e = e.charged(key)
	cost := e.cost()
	if cost > c.probMax || c.main.Contains(key) || c.prob.Contains(key) {
		c.stats.PrefetchWasted++
		c.unkept(e)
		return
	}
	if e.own != nil {
		e.own.kept = true
	}
	c.prob.Add(key, e)
	c.probUsed += cost
	for c.probUsed > c.probMax || c.mainUsed+c.probUsed > c.opts.MaxBytes {
		if c.probUsed <= c.probMax && c.mainUsed > c.opts.MaxBytes-c.probMax && c.main.Len() > 0 {
			// A streaming reader's read chunks are older than the
			// prefetch it will read next: evicting that prefetch
			// instead would decode every chunk twice.
			c.evictRead()
		} else {
			c.evictPrefetched()
		}
	}
}

// evictRead evicts the least recently used read value.
//
// REQUIRES: c.mu held; c.main not empty.
func (c *Cache) evictRead() {
	_, old, _ := c.main.RemoveOldest()
	c.mainUsed -= old.cost()
	c.stats.Evictions++
	c.unkept(old)
}

// evictPrefetched evicts the oldest prefetched value, which no reader read.
//
// REQUIRES: c.mu held; c.prob not empty.
func (c *Cache) evictPrefetched() {
	_, old, _ := c.prob.RemoveOldest()
	c.probUsed -= old.cost()
	c.stats.PrefetchWasted++
	c.stats.Evictions++
	c.unkept(old)
}

// Remove forgets the value kept for key, if any, so that the next Get
// loads it again. A load of key in flight is not affected: its value is
// kept when it finishes.
func (c *Cache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.main.Peek(key); ok {
		c.main.Remove(key)
		c.mainUsed -= e.cost()
		c.unkept(e)
	}
	if e, ok := c.prob.Peek(key); ok {
		c.prob.Remove(key)
		c.probUsed -= e.cost()
		c.unkept(e)
	}
}

// memHeadroom is the memory beyond the cache that MemoryLimit leaves for
// loads in flight, the idle buffers of internal/mem (at most 32 MiB), HTTP
// buffers and go-fuse's request buffers. Loads in flight are few since
// prefetches decode one per core (Load.CPU), so a small headroom
// holds: W1 with a 64 MiB cache peaked at 166-170 MiB of RSS with 64 MiB,
// 199-212 MiB with 256 MiB, at the same speed (docs/PERFORMANCE.md,
// "Memory").
const memHeadroom = 64 << 20

// MemoryLimit returns a soft memory limit (runtime/debug.SetMemoryLimit)
// for a process whose heap is mostly a cache of maxBytes: maxBytes plus a
// fixed headroom (memHeadroom). Without a limit the collector lets the heap
// grow to about twice the live data before it runs, so a full cache would
// cost twice its size (BenchmarkChurnHeap). The limit is the cache budget
// itself: a reader streaming through more than the cache peaks at 589-597
// MiB with a 512 MiB cache, for 7-19% more CPU in the collector than a limit
// of 1.25 x maxBytes + memHeadroom, which peaked at 714-723 MiB
// (docs/PERFORMANCE.md, "Current figures").
func MemoryLimit(maxBytes int64) int64 { return maxBytes + memHeadroom }

// Stats returns counters and the bytes held.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes = c.mainUsed + c.probUsed
	s.ProbationBytes = c.probUsed
	return s
}
