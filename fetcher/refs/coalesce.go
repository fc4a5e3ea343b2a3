package refs

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/internal/mem"
)

// Coalescing neighbouring ranges of one target
//
// A reference set's chunks are often neighbours in one file (an HDF5
// dataset's chunks are written one after another), and read-ahead asks for
// several of them at once. A remote target's ranged reads pass through a
// lane per target: a read that finds no other read of its target in
// flight goes at once, alone, for exactly its bytes (a lone chunk read
// moves its bytes and waits for nothing). A read that finds one in flight
// joins a batch, which collects for coalesceWait and then goes as one
// ranged request per run of ranges no further than coalesceGap apart (and
// at most coalesceMax long), each split back into its reads' bytes. Local
// targets are read alone: a pread costs no round trip.
//
// A read of a batch waits for its batch or for its own context; a batch
// is cancelled when every read that joined it has given up. A read pinned
// to a version of its target (fetcher.WithVersion) goes alone, with its
// precondition.
const (
	coalesceWait = 2 * time.Millisecond
	coalesceGap  = 64 << 10
	coalesceMax  = 16 << 20
)

// lanes holds the lanes of a Fetcher's targets; the zero value is ready.
type lanes struct {
	mu sync.Mutex
	m  map[string]*lane // GUARDED_BY(mu); by target tag, while in use
}

type lane struct {
	busy    int    // GUARDED_BY(lanes.mu): requests in flight
	pending *batch // GUARDED_BY(lanes.mu): the batch collecting, if any
}

type batch struct {
	reqs   []*rangeReq
	live   int // GUARDED_BY(lanes.mu): reads still waiting
	done   chan struct{}
	cancel context.CancelFunc
}

type rangeReq struct {
	off, n int64
	b      []byte
	id     fetcher.Identity
	err    error
}

// read returns n bytes of t from off as t's fetcher's GetRange does,
// coalesced with its neighbours when other reads of t are in flight.
func (ls *lanes) read(ctx context.Context, t target, off, n int64) ([]byte, fetcher.Identity, error) {
	if !t.remote {
		return t.f.GetRange(ctx, t.key, off, n)
	}
	if _, pinned := fetcher.Pinned(ctx, t.key); pinned {
		return t.f.GetRange(ctx, t.key, off, n)
	}
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = map[string]*lane{}
	}
	l := ls.m[t.tag]
	if l == nil {
		l = &lane{}
		ls.m[t.tag] = l
	}
	if l.busy == 0 && l.pending == nil {
		l.busy++
		ls.mu.Unlock()
		b, id, err := t.f.GetRange(ctx, t.key, off, n)
		ls.done(t.tag, l)
		return b, id, err
	}
	r := &rangeReq{off: off, n: n}
	bt := l.pending
	leader := bt == nil
	if leader {
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		bt = &batch{done: make(chan struct{}), cancel: cancel}
		l.pending = bt
		go ls.collect(bctx, t, l, bt)
	}
	bt.reqs = append(bt.reqs, r)
	bt.live++
	ls.mu.Unlock()
	select {
	case <-bt.done:
		return r.b, r.id, r.err
	case <-ctx.Done():
		ls.mu.Lock()
		if bt.live--; bt.live == 0 {
			bt.cancel()
		}
		ls.mu.Unlock()
		return nil, "", ctx.Err()
	}
}

// done ends one request of lane l, forgetting the lane once it is idle.
func (ls *lanes) done(tag string, l *lane) {
	ls.mu.Lock()
	if l.busy--; l.busy == 0 && l.pending == nil {
		delete(ls.m, tag)
	}
	ls.mu.Unlock()
}

// collect lets bt gather reads for coalesceWait, then sends it.
func (ls *lanes) collect(ctx context.Context, t target, l *lane, bt *batch) {
	time.Sleep(coalesceWait)
	ls.mu.Lock()
	l.pending = nil
	l.busy++
	reqs := slices.Clone(bt.reqs)
	ls.mu.Unlock()
	defer ls.done(t.tag, l)
	defer bt.cancel()
	defer close(bt.done)

	slices.SortFunc(reqs, func(a, b *rangeReq) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	var wg sync.WaitGroup
	for i := 0; i < len(reqs); {
		start, end := reqs[i].off, reqs[i].off+reqs[i].n
		j := i + 1
		for j < len(reqs) && reqs[j].off <= end+coalesceGap && max(end, reqs[j].off+reqs[j].n)-start <= coalesceMax {
			end = max(end, reqs[j].off+reqs[j].n)
			j++
		}
		run := reqs[i:j]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendRun(ctx, t, run, start, end)
		}()
		i = j
	}
	wg.Wait()
}

// sendRun reads [start, end) of t in one request and gives each read of
// run its part, in a buffer of its own (a caller may give it back to
// internal/mem's pool).
func sendRun(ctx context.Context, t target, run []*rangeReq, start, end int64) {
	if len(run) == 1 {
		r := run[0]
		r.b, r.id, r.err = t.f.GetRange(ctx, t.key, r.off, r.n)
		return
	}
	b, id, err := t.f.GetRange(ctx, t.key, start, end-start)
	for _, r := range run {
		if err != nil {
			r.err = err
			continue
		}
		lo := min(r.off-start, int64(len(b)))
		hi := min(r.off+r.n-start, int64(len(b)))
		r.b = append(mem.Get(int(hi - lo))[:0], b[lo:hi]...)
		r.id = id
	}
	// b is left to the collector, not given to the pool: a fetcher may
	// return a slice that does not start its buffer.
}
