package cache

import (
	"context"
	"runtime"
	"testing"
)

// TestTryReserve: TryReserve grants what fits now and refuses, without
// waiting, what does not fit or would pass a waiter.
func TestTryReserve(t *testing.T) {
	b := NewMemBudget(100)
	r70, ok := b.TryReserve(70)
	if !ok {
		t.Fatal("70 of an empty 100 refused")
	}
	if _, ok := b.TryReserve(40); ok {
		t.Error("40 granted beside 70 of 100")
	}
	r30, ok := b.TryReserve(30)
	if !ok {
		t.Error("30 refused beside 70 of 100")
	}
	r30()
	// A waiter for 50 queues; a try for 10, which fits, must not pass it.
	done := make(chan struct{})
	go func() {
		rel, err := b.Reserve(context.Background(), 50)
		if err != nil {
			t.Error(err)
		}
		rel()
		close(done)
	}()
	for b.Stats().Waited < 1 {
		runtime.Gosched()
	}
	if _, ok := b.TryReserve(10); ok {
		t.Error("10 granted past a waiting 50")
	}
	r70()
	<-done
	if s := b.Stats(); s.Used != 0 {
		t.Errorf("used %d after every release, want 0", s.Used)
	}
}

// TestBudgetDrawFrom: read-ahead that draws from a MemBudget stops
// growing when the MemBudget is spent, whatever its own cap, and gives
// the bytes back when its positions are released.
func TestBudgetDrawFrom(t *testing.T) {
	tests := []struct {
		name    string
		memUsed int64 // reserved by a view before the reader starts
	}{
		{"room", 0},
		{"spent", 100},
		{"partly", 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := NewMemBudget(100)
			if tc.memUsed > 0 {
				rel, _ := mem.TryReserve(tc.memUsed)
				defer rel()
			}
			bud := NewBudget(1000).DrawFrom(mem)
			tr := NewTracker(TrackerConfig{Len: 100, ChunkBytes: 10, MaxBytes: 1000, Budget: bud})
			n := 0
			for p := int64(0); p < 8; p++ {
				n += len(tr.Touch(p, true).Prefetch)
				held := bud.Stats().Bytes
				if held > 100-tc.memUsed {
					t.Errorf("step %d: read-ahead holds %d bytes beside %d of a budget of 100", p, held, tc.memUsed)
				}
				if got, want := mem.Stats().Used, tc.memUsed+held; got != want {
					t.Errorf("step %d: MemBudget used %d, want %d (view) + %d (read-ahead)", p, got, tc.memUsed, held)
				}
			}
			if room := tc.memUsed < 100; (n > 0) != room {
				t.Errorf("prefetched %d positions with room %v", n, room)
			}
			tr.Stop()
			if got := mem.Stats().Used; got != tc.memUsed {
				t.Errorf("after Stop: MemBudget used %d, want %d", got, tc.memUsed)
			}
		})
	}
}
