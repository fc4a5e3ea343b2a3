package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// step is one touch and the advice expected for it.
type step struct {
	pos        int64
	waited     bool
	prefetch   []int64
	cancel     bool
	stopBefore bool  // call Stop (close, idleness) before this touch; expect cancel == stop's advice
	inFlight   int64 // chunks the reader reads at once (TouchConcurrent); 0 is 1
}

func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name     string
		len      int64
		maxBytes int64 // per reader, in chunks (ChunkBytes is 1)
		budget   int64 // 0: no shared budget
		steps    []step
	}{
		{"sequential grows while waiting, capped per reader", 100, 4, 0, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
			{pos: 2, prefetch: []int64{3}}, // found loaded: the window stays 1
			{pos: 3, waited: true, prefetch: []int64{4, 5}},
			{pos: 4, waited: true, prefetch: []int64{6, 7, 8}},
			{pos: 5, prefetch: []int64{9}},
			{pos: 6, waited: true, prefetch: []int64{10}}, // capped at 4
		}},
		{"reverse", 10, 8, 0, []step{
			{pos: 9, waited: true},
			{pos: 8, waited: true, prefetch: []int64{7}},
			{pos: 7, waited: true, prefetch: []int64{6, 5}},
			{pos: 6, waited: true, prefetch: []int64{4, 3, 2}},
			{pos: 5, waited: true, prefetch: []int64{1, 0}}, // stops at the start
			{pos: 4},
		}},
		{"end of the sequence", 4, 8, 0, []step{
			{pos: 1, waited: true},
			{pos: 2, waited: true, prefetch: []int64{3}},
			{pos: 3, waited: true},
		}},
		{"random prefetches nothing", 100, 8, 0, []step{
			{pos: 50, waited: true},
			{pos: 7, waited: true},
			{pos: 93, waited: true},
			{pos: 12, waited: true},
			{pos: 60, waited: true},
		}},
		{"jump collapses the window and cancels", 100, 8, 0, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
			{pos: 2, waited: true, prefetch: []int64{3, 4}},
			{pos: 50, waited: true, cancel: true},
			{pos: 51, waited: true, prefetch: []int64{52}}, // starts small again
			{pos: 20, waited: true, cancel: true},
			{pos: 90, waited: true}, // nothing outstanding: nothing to cancel
		}},
		{"out of order within the window keeps the run", 100, 8, 0, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
			{pos: 2, waited: true, prefetch: []int64{3, 4}},
			{pos: 4, waited: true, prefetch: []int64{5, 6, 7, 8}},
			{pos: 3}, // one behind: ignored
			{pos: 5, prefetch: []int64{9}},
		}},
		{"budget exhausted", 100, 8, 3, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
			{pos: 2, waited: true, prefetch: []int64{3, 4}},
			{pos: 3, waited: true, prefetch: []int64{5, 6}}, // 4, 5, 6 held: full
			{pos: 4, waited: true, prefetch: []int64{7}},
		}},
		{"stop cancels, then starts afresh", 100, 8, 0, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
			{pos: 2, waited: true, cancel: true, stopBefore: true}, // first touch after Stop
			{pos: 3, waited: true, prefetch: []int64{4}},
		}},
		{"a pool of 4 threads out of order starts and keeps a forward run", 100, 8, 0, []step{
			{pos: 2, waited: true, inFlight: 3},
			{pos: 0, waited: true, inFlight: 4}, // behind the first: no direction yet
			{pos: 1, waited: true, inFlight: 4},
			{pos: 3, waited: true, inFlight: 4, prefetch: []int64{4}},
			{pos: 6, waited: true, inFlight: 4, prefetch: []int64{7, 8}}, // 3 ahead: within the pool's span; 5 is another thread's
			{pos: 5, inFlight: 4},                                        // behind, within the span: ignored
			{pos: 4, inFlight: 4},
			{pos: 7, waited: true, inFlight: 4, prefetch: []int64{9, 10, 11}},
		}},
		{"a pool's prefetches behind it are not wasted within its span", 100, 8, 0, []step{
			{pos: 0, waited: true, inFlight: 4},
			{pos: 1, waited: true, inFlight: 4, prefetch: []int64{2}},
			{pos: 4, waited: true, inFlight: 4, prefetch: []int64{5, 6}}, // 2 stays outstanding: within the span
			{pos: 2, inFlight: 4},                                        // prefetched, touched late: used
			{pos: 3, inFlight: 4},
			{pos: 40, waited: true, inFlight: 4, cancel: true}, // past the span: a jump
		}},
		{"one thread one behind its pool is still a jump when alone", 100, 8, 0, []step{
			{pos: 2, waited: true},
			{pos: 0, waited: true},
			{pos: 1, waited: true, prefetch: []int64{2}},
		}},
		{"off", 100, 0, 0, []step{
			{pos: 0, waited: true},
			{pos: 1, waited: true},
			{pos: 2, waited: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b *Budget
			if tc.budget > 0 {
				b = NewBudget(tc.budget)
			}
			tr := NewTracker(TrackerConfig{Len: tc.len, ChunkBytes: 1, MaxBytes: tc.maxBytes, Budget: b})
			for i, s := range tc.steps {
				var cancel bool
				if s.stopBefore {
					cancel = tr.Stop().Cancel
				}
				adv := tr.TouchConcurrent(s.pos, s.waited, max(1, s.inFlight))
				cancel = cancel || adv.Cancel
				if !slices.Equal(adv.Prefetch, s.prefetch) || cancel != s.cancel {
					t.Errorf("step %d (touch %d): got prefetch %v, cancel %v; want %v, %v", i, s.pos, adv.Prefetch, cancel, s.prefetch, s.cancel)
				}
			}
			tr.Stop()
			if b != nil {
				if got := b.Stats().Bytes; got != 0 {
					t.Errorf("after Stop the budget holds %d bytes, want 0", got)
				}
			}
		})
	}
}

// TestTrackerBudgetShared: one reader's read-ahead fills the budget, and a
// second reader gets none until the first reads what it prefetched.
func TestTrackerBudgetShared(t *testing.T) {
	b := NewBudget(2)
	a := NewTracker(TrackerConfig{Len: 100, ChunkBytes: 1, MaxBytes: 8, Budget: b})
	c := NewTracker(TrackerConfig{Len: 100, ChunkBytes: 1, MaxBytes: 8, Budget: b})
	a.Touch(0, true)
	a.Touch(1, true)
	if got := a.Touch(2, true).Prefetch; !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("a: got %v, want [3 4]", got)
	}
	c.Touch(50, true)
	if got := c.Touch(51, true).Prefetch; len(got) != 0 {
		t.Errorf("c with the budget full: got %v, want nothing", got)
	}
	a.Touch(3, false) // frees 3, takes 5
	a.Stop()          // frees 4 and 5
	if got := c.Touch(52, true).Prefetch; !slices.Equal(got, []int64{53, 54}) {
		t.Errorf("c after a stopped: got %v, want [53 54]", got)
	}
	s := b.Stats()
	if s.Issued != 6 || s.Used != 2 || s.Wasted != 2 || s.Exhausted < 1 || s.Bytes != 2 {
		t.Errorf("got %+v; want 6 issued, 2 used, 2 wasted, exhausted, 2 bytes", s)
	}
}

// TestTrackerLexicalOrder: a program that reads chunk files in the lexical
// order of their names (ls, cat dir/*) jumps about in grid order; fed the
// position of each name in lexical order, the tracker sees a sequential
// reader and prefetches the names that come next.
func TestTrackerLexicalOrder(t *testing.T) {
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("%d-%d", 64*i, 64*(i+1)))
	}
	lexical := slices.Clone(names)
	sort.Strings(lexical) // 0-64, 128-192, ..., 64-128, 640-704, 704-768
	pos := make(map[string]int64)
	for i, n := range lexical {
		pos[n] = int64(i)
	}
	grid := NewTracker(TrackerConfig{Len: 12, ChunkBytes: 1, MaxBytes: 8})
	lex := NewTracker(TrackerConfig{Len: 12, ChunkBytes: 1, MaxBytes: 8})
	var fromGrid, fromLex []string
	for _, n := range lexical {
		for _, p := range grid.Touch(int64(slices.Index(names, n)), true).Prefetch {
			fromGrid = append(fromGrid, names[p])
		}
		for _, p := range lex.Touch(pos[n], true).Prefetch {
			fromLex = append(fromLex, lexical[p])
		}
	}
	// In grid order the lexical reader looks random after its first
	// steps; in lexical order every name after the second is prefetched.
	if want := lexical[2:]; !slices.Equal(fromLex, want) {
		t.Errorf("lexical positions: prefetched %v, want %v", fromLex, want)
	}
	if len(fromGrid) >= len(fromLex) {
		t.Errorf("grid positions: prefetched %v, want fewer than in lexical order", fromGrid)
	}
}

// TestTrackerPool: a pool of 8 threads shares out 256 positions in order,
// each block of 8 touched in a shuffled order (the threads race to their
// first reads). The run holds: read-ahead prefetches most of the sequence
// and the pool reads almost everything prefetched.
func TestTrackerPool(t *testing.T) {
	const n, threads = 256, 8
	b := NewBudget(1 << 20)
	tr := NewTracker(TrackerConfig{Len: n, ChunkBytes: 1, MaxBytes: 32, Budget: b})
	rng := rand.New(rand.NewPCG(3, 4))
	for block := int64(0); block < n; block += threads {
		for _, i := range rng.Perm(threads) {
			tr.TouchConcurrent(block+int64(i), true, threads)
		}
	}
	tr.Stop()
	s := b.Stats()
	t.Logf("budget: %+v", s)
	if s.Issued < n/2 {
		t.Errorf("prefetches issued for a pool in order: got %d, want at least %d", s.Issued, n/2)
	}
	if s.Wasted > 40 {
		t.Errorf("prefetches wasted by a pool in order: got %d of %d, want at most 40 (the last window)", s.Wasted, s.Issued)
	}
	if s.Bytes != 0 {
		t.Errorf("after Stop the budget holds %d bytes, want 0", s.Bytes)
	}
}
