package cache

import (
	"context"
	"sync"
)

// MemBudget bounds the memory of work in flight beside the cache: the batches
// a stitched view holds while it copies them out. A reader reserves the
// bytes it is about to hold before it asks for them and releases them when
// done; when the budget is spent, Reserve waits for room instead of
// letting the process grow (mountpoint-s3's memory limiter: reserve
// before allocating). Waiters are served in order of arrival, so a large
// reservation is not starved by small ones. A reservation larger than the
// whole budget is cut to the budget: it waits until nothing else is
// reserved and then runs alone.
//
// A holder must not wait for another reservation while it holds one, or
// two holders could wait for each other. All methods are safe for
// concurrent use; a nil *MemBudget reserves nothing and never waits.
type MemBudget struct {
	limit int64

	mu      sync.Mutex
	used    int64           // GUARDED_BY(mu)
	waiters []*budgetWaiter // GUARDED_BY(mu); in order of arrival
	peak    int64           // GUARDED_BY(mu); the most ever reserved at once
	waited  int64           // GUARDED_BY(mu); reservations that had to wait
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are granted
}

// NewMemBudget returns a budget of limit bytes (at least 1).
func NewMemBudget(limit int64) *MemBudget { return &MemBudget{limit: max(limit, 1)} }

// Limit returns the budget's size in bytes.
func (b *MemBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Reserve waits until n bytes fit in the budget beside those already
// reserved, takes them and returns the function that gives them back
// (call it once). If ctx ends first it returns ctx's error and takes
// nothing.
func (b *MemBudget) Reserve(ctx context.Context, n int64) (release func(), err error) {
	if b == nil || n <= 0 {
		return noRelease, nil
	}
	n = min(n, b.limit)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.take(n)
		b.mu.Unlock()
		return b.releaser(n), nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waited++
	b.mu.Unlock()
	select {
	case <-w.ready:
		return b.releaser(n), nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			b.used -= n
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
		}
		b.grant()
		return nil, ctx.Err()
	}
}

// take counts n bytes reserved.
//
// REQUIRES: b.mu held.
func (b *MemBudget) take(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// grant hands room to the waiters at the head of the queue that fit.
//
// REQUIRES: b.mu held.
func (b *MemBudget) grant() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.limit {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.take(w.n)
		close(w.ready)
	}
}

func (b *MemBudget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			b.grant()
		})
	}
}

// MemBudgetStats are a budget's figures.
type MemBudgetStats struct {
	Limit, Used, Peak int64
	// Waited counts reservations that had to wait for room.
	Waited int64
}

// Stats returns the budget's figures.
func (b *MemBudget) Stats() MemBudgetStats {
	if b == nil {
		return MemBudgetStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return MemBudgetStats{Limit: b.limit, Used: b.used, Peak: b.peak, Waited: b.waited}
}

// TryReserve takes n bytes if they fit now, beside those reserved and
// with nobody waiting, and returns the function that gives them back
// (call it once) and true; otherwise it takes nothing and returns false.
// It never waits, so a holder of another reservation may call it. A nil
// *MemBudget always grants.
func (b *MemBudget) TryReserve(n int64) (release func(), ok bool) {
	if b == nil || n <= 0 {
		return noRelease, true
	}
	if !b.tryTake(n) {
		return nil, false
	}
	return b.releaser(n), true
}

// tryTake is TryReserve without the release function: the caller gives
// the bytes back with give.
func (b *MemBudget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || b.used+n > b.limit {
		return false
	}
	b.take(n)
	return true
}

// give returns n bytes that tryTake took.
func (b *MemBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

func noRelease() {}
