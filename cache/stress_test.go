package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// TestStoreStress mixes Get, GetBatch and Prefetch from many goroutines on
// few keys, with contexts cancelled at random, and checks every answer
// against the key it was for, then the cache's books once all is done: no
// flight left behind, bytes within the bounds and equal to what is held.
func TestStoreStress(t *testing.T) {
	const keys = 40
	cost := int64(100 + entryCost)
	s := NewStore(Options{MaxBytes: 12 * cost, ProbationBytes: 4 * cost, Workers: 3, KeepError: keepMissing})
	valueOf := func(k string) []byte { return []byte(fmt.Sprintf("%-100s", k)) }
	loadFor := func(ks []string) func(int) Loader {
		return func(i int) Loader {
			return func(ctx context.Context) ([]byte, error) {
				runtime.Gosched()
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if ks[i] == "k7" {
					return nil, errMissing
				}
				if ks[i] == "k13" {
					return nil, errors.New("broken")
				}
				return valueOf(ks[i]), nil
			}
		}
	}
	check := func(k string, v []byte, err error) {
		switch {
		case errors.Is(err, context.Canceled):
		case k == "k7":
			if !errors.Is(err, errMissing) {
				t.Errorf("%s: got %v, want %v", k, err, errMissing)
			}
		case k == "k13":
			if err == nil {
				t.Errorf("%s: got no error", k)
			}
		case err != nil || string(v) != string(valueOf(k)):
			t.Errorf("%s: got %q, %v", k, v, err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 300 {
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(4) == 0 {
					go cancel()
				}
				ks := make([]string, 1+r.IntN(6))
				for i := range ks {
					ks[i] = fmt.Sprint("k", r.IntN(keys))
				}
				switch r.IntN(3) {
				case 0:
					v, err := s.Get(ctx, ks[0], loadFor(ks)(0))
					check(ks[0], v, err)
				case 1:
					res, err := s.getBatch(ctx, ks, loadFor(ks), 1+r.IntN(4))
					if err == nil {
						for i, k := range ks {
							check(k, res[i].Val, res[i].Err)
						}
					} else if !errors.Is(err, context.Canceled) && err.Error() != "broken" {
						t.Errorf("batch %v: got %v", ks, err)
					}
				case 2:
					s.Prefetch(ctx, ks, loadFor(ks))
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	s.Close()
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.flights); n != 0 {
		t.Errorf("%d flights left in the table", n)
	}
	var main, prob int64
	for _, k := range c.main.Keys() {
		e, _ := c.main.Peek(k)
		main += e.cost()
	}
	for _, k := range c.prob.Keys() {
		e, _ := c.prob.Peek(k)
		prob += e.cost()
	}
	if main != c.mainUsed || prob != c.probUsed {
		t.Errorf("books: main %d, probation %d; held: %d, %d", c.mainUsed, c.probUsed, main, prob)
	}
	if main+prob > 12*cost || prob > 4*cost {
		t.Errorf("holds %d bytes (%d probation), bounds %d (%d)", main+prob, prob, 12*cost, 4*cost)
	}
}
