package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// readAheadInitial is the window, in chunks, after the first
	// sequential step. One chunk is the least that overlaps the next load
	// with the current copy-out; a chunk is already 32 KiB to several MiB,
	// so starting bigger would waste a lot on a reader that reads two
	// neighbours and jumps.
	readAheadInitial = 1
	// readAheadGrowth multiplies the window when the reader waited: the
	// doubling of mountpoint-s3 and gcsfuse's buffered reader, which
	// reaches a window of 32 chunks in 5 waits.
	readAheadGrowth = 2
	// readAheadBackTolerance is how far behind the last position a touch
	// may be without breaking the run: a reader with two threads (or the
	// kernel's async reads) may touch chunk n+1 just before chunk n.
	readAheadBackTolerance = 1
	// A pool of threads that shares out one sequence (each thread takes
	// the next chunk from a queue) touches its chunks out of order by up
	// to the number it reads at once: the caller says how many
	// (TouchConcurrent), and the run tolerates that much disorder both
	// ways. Such a pool's first touches come in any order, so it only
	// starts a forward run: a pool that walks a sequence backwards gets
	// no read-ahead (rare, and no worse than before).
	// IdleAfter is how long a reader may pause before its prefetches are
	// cancelled and its budget returned (the caller calls Stop then). It
	// is far longer than the gap between two chunk reads of any program
	// that reads in order, even one that computes per chunk, and short
	// enough that an abandoned handle does not hold the budget that other
	// readers need.
	IdleAfter = 3 * time.Second
)

// Budget is the global cap on read-ahead: the bytes that trackers have
// prefetched and that no reader has read yet. It also counts what the
// trackers sharing it did. Safe for concurrent use.
type Budget struct {
	max int64
	// mem is drawn from as well, without waiting; nil for none.
	// LOCK ORDERING: mu, then mem's.
	mem *MemBudget

	mu   sync.Mutex
	used int64 // GUARDED_BY(mu)

	issued, used2, wasted, exhausted, cancels atomic.Int64
}

// NewBudget returns a budget of max bytes. A max of 0 or less allows no
// read-ahead at all.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// DrawFrom makes every byte b grants a byte of mem too, taken without
// waiting (MemBudget.TryReserve): a window stops growing when either is
// spent, as mountpoint-s3's prefetcher shrinks its window when the shared
// memory limiter refuses. It returns b; call it before b is shared.
func (b *Budget) DrawFrom(mem *MemBudget) *Budget {
	b.mem = mem
	return b
}

func (b *Budget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	if b.mem != nil && !b.mem.tryTake(n) {
		return false
	}
	b.used += n
	return true
}

func (b *Budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	if b.mem != nil {
		b.mem.give(n)
	}
}

// BudgetStats counts what the trackers sharing a budget did.
type BudgetStats struct {
	// Issued positions were advised for prefetch; Used were then touched
	// by their reader; Wasted were released unread (passed, cancelled or
	// stopped). Exhausted counts the times a window was cut short by the
	// budget, Cancels the advices to cancel.
	Issued, Used, Wasted, Exhausted, Cancels int64
	// Bytes are held now by prefetches not yet read; Max is the budget.
	Bytes, Max int64
}

// Stats returns the budget's counters.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	used := b.used
	b.mu.Unlock()
	return BudgetStats{
		Issued: b.issued.Load(), Used: b.used2.Load(), Wasted: b.wasted.Load(),
		Exhausted: b.exhausted.Load(), Cancels: b.cancels.Load(),
		Bytes: used, Max: b.max,
	}
}

// TrackerConfig describes the sequence a Tracker follows and its caps.
type TrackerConfig struct {
	// Len is the number of positions: they run from 0 to Len-1.
	Len int64
	// ChunkBytes is charged to the budget for each prefetched position,
	// unless Charge is set; it also sizes the window (MaxBytes).
	ChunkBytes int64
	// Charge, when set, returns what a prefetch of a position holds, in
	// bytes, to charge to the budget instead of ChunkBytes: for
	// positions that stand for a varying number of chunks (a block of a
	// stitched view). It is called with the tracker's lock held.
	Charge func(pos int64) int64
	// MaxBytes caps this reader's window in bytes; the window is at least
	// one chunk when MaxBytes > 0. Zero or less turns read-ahead off.
	MaxBytes int64
	// Budget is the shared cap. Nil means no global cap.
	Budget *Budget
}

// Advice is a Tracker's answer.
type Advice struct {
	// Cancel asks to cancel every prefetch issued for this tracker before
	// this advice (their budget is already released). It comes before
	// Prefetch: issue Prefetch under a new cancel scope.
	Cancel bool
	// Prefetch lists the positions to prefetch now, nearest first.
	Prefetch []int64
}

// Tracker follows one reader of one array. Safe for concurrent use (a
// handle may serve concurrent reads).
type Tracker struct {
	cfg       TrackerConfig
	maxWindow int64 // in chunks

	mu          sync.Mutex
	span        int64           // GUARDED_BY(mu); the disorder tolerated, in positions (at least readAheadBackTolerance)
	started     bool            // GUARDED_BY(mu); a position has been touched since the last reset
	last        int64           // GUARDED_BY(mu); the furthest position of the run
	dir         int64           // GUARDED_BY(mu); +1, -1, or 0 when no run holds
	window      int64           // GUARDED_BY(mu); in chunks, 0 when closed
	frontier    int64           // GUARDED_BY(mu); the furthest position issued, or last
	outstanding map[int64]int64 // GUARDED_BY(mu); prefetched positions not yet touched, and their charge
}

// NewTracker returns a tracker with no history.
func NewTracker(cfg TrackerConfig) *Tracker {
	t := &Tracker{cfg: cfg, outstanding: make(map[int64]int64)}
	if cfg.MaxBytes > 0 {
		t.maxWindow = max(1, cfg.MaxBytes/max(1, cfg.ChunkBytes))
	}
	return t
}

// Touch tells the tracker that the reader touched pos for the first time
// (since it was last loaded), and whether it had to wait for the chunk
// (not in memory). It returns what to prefetch or cancel. It is
// TouchConcurrent for a reader of one chunk at a time.
func (t *Tracker) Touch(pos int64, waited bool) Advice {
	return t.TouchConcurrent(pos, waited, 1)
}

// TouchConcurrent is Touch for a reader that reads up to inFlight chunks
// at once (a pool of threads, each with a chunk file open): touches out
// of order by up to inFlight positions keep its run.
func (t *Tracker) TouchConcurrent(pos int64, waited bool, inFlight int64) Advice {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.maxWindow == 0 {
		return Advice{}
	}
	// Two in flight is also a reader of one chunk at a time whose last
	// handle's release has not arrived yet (FUSE sends it after close
	// returns): it keeps the one-thread rule for the direction.
	pool := inFlight > 2
	t.span = max(readAheadBackTolerance, inFlight)
	if n, ok := t.outstanding[pos]; ok {
		delete(t.outstanding, pos)
		t.releaseBytes(n)
		if b := t.cfg.Budget; b != nil {
			b.used2.Add(1)
		}
	}
	if !t.started {
		t.started, t.last, t.frontier = true, pos, pos
		return Advice{}
	}
	d := pos - t.last
	switch {
	case d == 0:
		return Advice{}
	case t.dir == 0 && !pool && (d == 1 || d == -1):
		t.dir = d
	case t.dir == 0 && pool && d > 0 && d <= t.span:
		t.dir = 1
	case t.dir == 0 && pool && d < 0 && -d <= t.span:
		// Behind the furthest touch of a pool: its threads took the
		// earlier positions first. Wait for a forward step.
		return Advice{}
	case t.dir != 0 && sign(d) == t.dir && abs(d) <= max(1, t.window, t.span):
		// Ahead within the window: the run holds.
	case t.dir != 0 && sign(d) == -t.dir && abs(d) <= t.span:
		return Advice{}
	default:
		adv := Advice{Cancel: t.dropAll()}
		t.last, t.frontier, t.dir, t.window = pos, pos, 0, 0
		return adv
	}
	t.last = pos
	if t.dir*(t.frontier-pos) < 0 {
		t.frontier = pos
	}
	t.dropBehind()
	switch {
	case t.window == 0:
		t.window = min(readAheadInitial, t.maxWindow)
	case waited:
		t.window = min(t.window*readAheadGrowth, t.maxWindow)
	}
	var adv Advice
	for p := t.frontier + t.dir; t.dir*(p-pos) <= t.window && p >= 0 && p < t.cfg.Len; p += t.dir {
		n := t.cfg.ChunkBytes
		if t.cfg.Charge != nil {
			n = t.cfg.Charge(p)
		}
		if b := t.cfg.Budget; b != nil && !b.acquire(n) {
			b.exhausted.Add(1)
			break
		}
		t.outstanding[p] = n
		t.frontier = p
		adv.Prefetch = append(adv.Prefetch, p)
	}
	if b := t.cfg.Budget; b != nil {
		b.issued.Add(int64(len(adv.Prefetch)))
	}
	return adv
}

// Stop releases everything the tracker holds, for a closed handle or an
// idle reader (IdleAfter), and reports whether prefetches should be
// cancelled. The next Touch starts afresh.
func (t *Tracker) Stop() Advice {
	t.mu.Lock()
	defer t.mu.Unlock()
	adv := Advice{Cancel: t.dropAll()}
	t.started, t.dir, t.window = false, 0, 0
	return adv
}

// Window returns the current window in chunks (for tests and metrics).
func (t *Tracker) Window() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.window
}

// dropAll releases every outstanding position as wasted and reports
// whether there was any.
//
// REQUIRES: t.mu held.
func (t *Tracker) dropAll() bool {
	if len(t.outstanding) == 0 {
		return false
	}
	for p, n := range t.outstanding {
		delete(t.outstanding, p)
		t.releaseBytes(n)
		if b := t.cfg.Budget; b != nil {
			b.wasted.Add(1)
		}
	}
	if b := t.cfg.Budget; b != nil {
		b.cancels.Add(1)
	}
	return true
}

// dropBehind releases, as wasted, outstanding positions the reader has
// passed by more than the back tolerance.
//
// REQUIRES: t.mu held.
func (t *Tracker) dropBehind() {
	for p, n := range t.outstanding {
		if t.dir*(t.last-p) > t.span {
			delete(t.outstanding, p)
			t.releaseBytes(n)
			if b := t.cfg.Budget; b != nil {
				b.wasted.Add(1)
			}
		}
	}
}

func (t *Tracker) releaseBytes(n int64) {
	if b := t.cfg.Budget; b != nil {
		b.release(n)
	}
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}

func abs(x int64) int64 { return x * sign(x) }
