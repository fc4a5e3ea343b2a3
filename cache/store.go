package cache

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// BatchInline is the gate of the pool: a batch with fewer than BatchInline
// loads to run runs them one after another on the requesting goroutine; a
// batch with BatchInline or more hands them to the pool. A single chunk
// (Store.Get) always loads inline.
//
// BenchmarkGate chose it (docs/PERFORMANCE.md, "Pipeline"): batches of k
// loads of 1 MiB chunks, each mode run side by side in every iteration,
// medians of 5 runs on 2 cores shared with other work (load average 7 to
// 9). Time of the pool over time inline (below 1: the pool wins):
//
//	decode  k=1   k=2   k=4   k=8   k=16  k=32
//	none    1.73  1.63  1.56  1.42  1.26  1.29   (10 to 100 us per batch)
//	raw     1.04  1.22  1.31  1.13  1.07  2.31
//	gzip    1.05  0.92  1.03  0.96  1.00  0.83
//	zstd    1.10  0.99  0.98  0.89  0.95  1.29
//
// The "none" row is the machinery alone: the pool adds 2 to 30 us to a
// batch, under 1% of one 1 MiB gzip decode (4 to 5 ms on an idle core). At
// k=1 a handoff can only add latency; from k=2 on the pool costs little and
// overlaps decodes when a second core is free. On this machine a second
// core was seldom free (a gzip decode took 14 ms, three times its idle
// time), so the pool gained only on the slow codecs (gzip 0.83 to 0.96,
// zstd 0.89 to 0.99) and lost on raw copies, which are bound by memory
// bandwidth; an earlier run under heavier load gave the same picture. The
// gate is therefore the smallest batch a second core can help, two: the
// cost where the pool does not help is bounded, and the gain where it
// does is up to the core count. Go's pool costs microseconds, not
// CloudVolume's ~20 ms in Python.
const BatchInline = 2

// Queue depths of the pool. Demand batches block when their queue is full
// (each waits for its own loads anyway); prefetches are dropped instead,
// because a prefetch that waits behind a full queue arrives too late.
const (
	demandQueue   = 1024
	prefetchQueue = 256
)

// ErrClosed is returned for loads a closed Store did not run.
var ErrClosed = errors.New("cache: store closed")

// Store is the chunk store: a Cache plus one bounded pool of persistent
// workers that runs batches and prefetches. Demand loads go ahead of
// prefetches: workers always take a queued demand load first, and a reader
// who needs a chunk whose prefetch is still queued runs it at once.
//
// All methods are safe for concurrent use.
type Store struct {
	c      *Cache
	budget *MemBudget // Reserve's
	loads  *MemBudget // ReserveLoad's

	demand   chan *flight
	prefetch chan *flight
	cpu      chan struct{}  // Load.CPU's slots
	tiers    []*tier        // below memory, in order
	writes   sync.WaitGroup // writeBehind's goroutines
	quit     chan struct{}
	closing  sync.Once
	workers  sync.WaitGroup

	// Counters for metrics.
	batchesInline, batchesPooled atomic.Int64
	prefetchDropped              atomic.Int64
	throttled                    atomic.Int64 // prefetch loads that took a CPU slot
	batchSizes                   batchHistogram
}

// Result is one chunk of a batch: its value, or a stable error that
// Options.KeepError accepts (such as not found).
type Result struct {
	Val []byte
	Err error
}

// NewStore returns a store with an empty cache and opts.Workers workers
// running. Close stops them.
func NewStore(opts Options) *Store {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	s := &Store{
		c:        New(opts),
		budget:   NewMemBudget(cmp.Or(opts.InFlightBytes, InFlightBudget(opts.MaxBytes))),
		loads:    NewMemBudget(LoadBudget(cmp.Or(opts.InFlightBytes, InFlightBudget(opts.MaxBytes)))),
		demand:   make(chan *flight, demandQueue),
		prefetch: make(chan *flight, prefetchQueue),
		cpu:      make(chan struct{}, cmp.Or(opts.CPUSlots, runtime.GOMAXPROCS(0))),
		quit:     make(chan struct{}),
	}
	for _, t := range opts.Tiers {
		s.tiers = append(s.tiers, &tier{Tier: t, trust: trustOf(t), slots: make(chan struct{}, TierWriters)})
	}
	s.workers.Add(opts.Workers)
	for range opts.Workers {
		go s.work()
	}
	return s
}

// Cache returns the store's cache.
func (s *Store) Cache() *Cache { return s.c }

// Reserve takes n bytes of the store's budget of bytes in flight
// (Options.InFlightBytes), waiting for room, and returns the function
// that gives them back; see MemBudget.Reserve. A reader calls it before it
// asks for a batch it will hold (a view's chunks while it copies them
// out) and must not call it again before releasing.
func (s *Store) Reserve(ctx context.Context, n int64) (release func(), err error) {
	return s.budget.Reserve(ctx, n)
}

// work is one persistent worker. It exits when the store is closed.
func (s *Store) work() {
	defer s.workers.Done()
	for {
		var f *flight
		select {
		case f = <-s.demand:
		default:
			select {
			case f = <-s.demand:
			case f = <-s.prefetch:
			case <-s.quit:
				return
			}
		}
		// A flight may be queued twice (as a prefetch, then for a
		// batch) or run by a reader meanwhile: only its claimer runs it.
		if f.claimed.CompareAndSwap(false, true) {
			s.c.execute(f)
		}
	}
}

// Close stops the workers once their current loads end, and waits for the
// writes to the tiers still running behind loads. Loads still queued fail
// with ErrClosed. Call it after the last Get, GetBatch and Prefetch have
// returned. Calls after the first do nothing.
func (s *Store) Close() {
	s.closing.Do(s.close)
}

func (s *Store) close() {
	close(s.quit)
	s.workers.Wait()
	defer s.writes.Wait()
	for {
		select {
		case f := <-s.demand:
			s.fail(f)
		case f := <-s.prefetch:
			s.fail(f)
		default:
			return
		}
	}
}

func (s *Store) fail(f *flight) {
	if f.claimed.CompareAndSwap(false, true) {
		s.c.finish(f, nil, ErrClosed)
	}
}

// Get returns the value of key: from memory, from a load in flight, or by
// running load on the calling goroutine. A stable error (Options.KeepError)
// is kept and returned again without a load. If ctx ends first, Get
// returns ctx.Err() (see the package comment for a load it runs itself).
func (s *Store) Get(ctx context.Context, key string, load Loader) ([]byte, error) {
	return s.c.Get(ctx, key, load)
}

// GetHit is Get that also reports whether the answer was in memory (the
// reader did not wait), for the read-ahead Tracker.
func (s *Store) GetHit(ctx context.Context, key string, load Loader) ([]byte, bool, error) {
	return s.c.GetHit(ctx, key, load)
}

// Acquire is Get for a reader that releases the value when done with it,
// so that its memory can be reused once the cache lets it go; see
// Cache.Acquire.
func (s *Store) Acquire(ctx context.Context, key string, load Loader) (val []byte, hold *Hold, hit bool, err error) {
	return s.c.Acquire(ctx, key, load)
}

// GetBatch returns the values of keys, in order; loadFor(i) loads keys[i]
// if it is neither in memory nor in flight. Fewer than BatchInline loads
// run inline, one after another; more run on the pool. A stable error
// (Options.KeepError, such as not found) does not fail the batch: it is
// that key's Result.Err. Any other error, or the end of ctx, fails it: the
// first such error is returned at once, and loads that only this batch was
// waiting for are cancelled. Keys may repeat.
//
// A Loader must not call GetBatch: run on a worker, it could wait for
// workers that are all busy with loads doing the same. Get (inline) is
// safe from a Loader.
func (s *Store) GetBatch(ctx context.Context, keys []string, loadFor func(i int) Loader) ([]Result, error) {
	return s.getBatch(ctx, keys, loadFor, BatchInline)
}

// getBatch is GetBatch with the gate as a parameter, for BenchmarkGate.
func (s *Store) getBatch(ctx context.Context, keys []string, loadFor func(i int) Loader, gate int) ([]Result, error) {
	res := make([]Result, len(keys))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ready := make(chan *flight, len(keys))
	// held are the flights this batch holds a waiter reference on; slot
	// maps each to the results it fills.
	var held []*flight
	slot := make(map[*flight][]int)
	for i, key := range keys {
		e, hit, f := s.c.lookup(key, lazy(loadFor, i), ready, false)
		if hit {
			res[i] = Result{e.val, e.err}
			continue
		}
		if _, ok := slot[f]; !ok {
			held = append(held, f)
		}
		slot[f] = append(slot[f], i)
	}
	if len(held) == 0 {
		return res, nil
	}
	var leaveOnce sync.Once
	leaveAll := func() {
		leaveOnce.Do(func() {
			for _, f := range held {
				for range slot[f] {
					s.c.leave(f)
				}
			}
		})
	}
	defer leaveAll()
	stop := context.AfterFunc(ctx, leaveAll)
	defer stop()

	var todo []*flight // not started by anyone yet
	for _, f := range held {
		if !f.claimed.Load() {
			todo = append(todo, f)
		}
	}
	s.batchSizes.observe(len(todo))
	// Each key not in memory subscribed once to its flight's notice, so a
	// repeated key's flight is announced once per repeat.
	pending := 0
	for _, f := range held {
		pending += len(slot[f])
	}
	collect := func(f *flight) error {
		pending--
		if f.err != nil && !f.stable {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return f.err
		}
		for _, i := range slot[f] {
			res[i] = Result{f.val, f.err}
		}
		return nil
	}
	drain := func() error {
		for {
			select {
			case f := <-ready:
				if err := collect(f); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	if len(todo) < gate {
		s.batchesInline.Add(1)
		for _, f := range todo {
			if f.claimed.CompareAndSwap(false, true) {
				s.c.execute(f)
			}
			if err := drain(); err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	} else {
		s.batchesPooled.Add(1)
		for _, f := range todo {
			for queued := false; !queued; {
				select {
				case s.demand <- f:
					queued = true
				case g := <-ready:
					if err := collect(g); err != nil {
						return nil, err
					}
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
	}
	for pending > 0 {
		select {
		case f := <-ready:
			if err := collect(f); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// lazy defers loadFor(i) until a flight actually runs the load.
func lazy(loadFor func(i int) Loader, i int) Loader {
	return func(ctx context.Context) ([]byte, error) { return loadFor(i)(ctx) }
}

// Prefetch starts loads of the keys that are neither in memory nor in
// flight, at low priority on the pool, and returns how many it started.
// Nobody waits for them: their values land in the cache's probation
// segment until read. When ctx ends, prefetches no reader has joined are
// cancelled (a reader who joined keeps its load going). Prefetches that do
// not fit in the pool's queue are dropped.
func (s *Store) Prefetch(ctx context.Context, keys []string, loadFor func(i int) Loader) int {
	if ctx.Err() != nil {
		return 0
	}
	var issued []*flight
	for i, key := range keys {
		f := s.c.lookupPrefetch(key, lazy(loadFor, i))
		if f == nil {
			continue
		}
		select {
		case s.prefetch <- f:
			issued = append(issued, f)
		default:
			s.prefetchDropped.Add(1)
			s.c.release(f, false)
		}
	}
	s.c.countIssued(len(issued))
	if len(issued) > 0 {
		s.c.holdSet(ctx, issued)
	}
	return len(issued)
}
