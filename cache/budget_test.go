package cache

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// TestMemBudget checks that reservations wait for room, in order of
// arrival, that one larger than the budget runs alone, and that a
// cancelled wait takes nothing.
func TestMemBudget(t *testing.T) {
	ctx := context.Background()
	b := NewMemBudget(100)
	r1, err := b.Reserve(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	// 50 does not fit beside 60: it waits, and so does a later 10 that
	// would fit, since waiters are served in order (checked once both
	// are queued: nothing is granted while the 60 is held).
	got := make(chan string, 3)
	wait := func(name string, n int64) func() {
		ready := make(chan func())
		go func() {
			rel, err := b.Reserve(ctx, n)
			if err != nil {
				t.Error(err)
			}
			got <- name
			ready <- rel
		}()
		return func() { (<-ready)() }
	}
	// Queue the 50 before the 10: wait until it is in the queue.
	rel50 := wait("50", 50)
	for b.Stats().Waited < 1 {
		runtime.Gosched() // Waited is counted under the lock before the waiter blocks
	}
	rel10 := wait("10", 10)
	for b.Stats().Waited < 2 {
		runtime.Gosched() // Waited is counted under the lock before the waiter blocks
	}
	select {
	case name := <-got:
		t.Fatalf("%s granted while 60 of 100 are held", name)
	default:
	}
	r1() // both fit now, and both are granted
	<-got
	<-got
	rel50()
	rel10()
	if s := b.Stats(); s.Used != 0 || s.Peak != 60 {
		t.Errorf("used %d, peak %d; want 0 and 60", s.Used, s.Peak)
	}

	// Larger than the budget: cut to it, so it runs alone.
	big, err := b.Reserve(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := b.Reserve(cctx, 1)
		done <- err
	}()
	for b.Stats().Waited < 3 {
		runtime.Gosched() // Waited is counted under the lock before the waiter blocks
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Reserve: %v, want context.Canceled", err)
	}
	big()
	big() // a second call does nothing
	if s := b.Stats(); s.Used != 0 || len(b.waiters) != 0 {
		t.Errorf("used %d with %d waiters after every release, want 0 and 0", s.Used, len(b.waiters))
	}
	var nilBudget *MemBudget
	if rel, err := nilBudget.Reserve(ctx, 1<<40); err != nil {
		t.Error(err)
	} else {
		rel()
	}
}
