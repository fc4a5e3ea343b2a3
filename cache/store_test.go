package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errMissing = errors.New("missing")

func keepMissing(err error) bool { return errors.Is(err, errMissing) }

// blockWorkers occupies every worker of s with a load that runs until the
// returned func is called.
func blockWorkers(t *testing.T, s *Store, n int) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var running sync.WaitGroup
	running.Add(n)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("block", i)
	}
	s.Prefetch(context.Background(), keys, func(int) Loader {
		return func(context.Context) ([]byte, error) { running.Done(); <-ch; return nil, nil }
	})
	running.Wait()
	return func() { close(ch) }
}

func TestGetBatch(t *testing.T) {
	for _, gate := range []int{1, 100} { // every batch pooled; every batch inline
		t.Run(fmt.Sprint("gate", gate), func(t *testing.T) {
			s := NewStore(Options{MaxBytes: 1 << 20, Workers: 2, KeepError: keepMissing})
			defer s.Close()
			ctx := context.Background()
			var loads atomic.Int64
			loadFor := func(keys []string) func(int) Loader {
				return func(i int) Loader {
					return func(context.Context) ([]byte, error) {
						loads.Add(1)
						if keys[i] == "hole" {
							return nil, errMissing
						}
						return []byte("v" + keys[i]), nil
					}
				}
			}
			if _, err := s.Get(ctx, "a", loadFor([]string{"a"})(0)); err != nil {
				t.Fatal(err)
			}
			keys := []string{"a", "b", "hole", "c", "b", "d"}
			res, err := s.getBatch(ctx, keys, loadFor(keys), gate)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				want := "v" + k
				if k == "hole" {
					if !errors.Is(res[i].Err, errMissing) || res[i].Val != nil {
						t.Errorf("%s: got %q, %v; want nil, %v", k, res[i].Val, res[i].Err, errMissing)
					}
					continue
				}
				if string(res[i].Val) != want || res[i].Err != nil {
					t.Errorf("%s: got %q, %v; want %q, nil", k, res[i].Val, res[i].Err, want)
				}
			}
			if got := loads.Load(); got != 5 {
				t.Errorf("got %d loads, want 5 (a once, then b, hole, c, d)", got)
			}
			inline, pooled := s.batchesInline.Load(), s.batchesPooled.Load()
			if (gate == 1) != (pooled == 1) || inline+pooled != 1 {
				t.Errorf("gate %d: got %d inline and %d pooled batches", gate, inline, pooled)
			}
		})
	}
}

// TestGetBatchFirstError: a failing load ends the batch at once, while the
// other loads are still running, and cancels the loads only it waited for.
func TestGetBatchFirstError(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 4})
	defer s.Close()
	errBroken := errors.New("broken")
	var started, cancelled sync.WaitGroup
	started.Add(3)
	cancelled.Add(3)
	keys := []string{"slow1", "slow2", "slow3", "bad"}
	loadFor := func(i int) Loader {
		return func(ctx context.Context) ([]byte, error) {
			if keys[i] == "bad" {
				// Fail once the others run: a load still queued when
				// the batch fails is dropped unrun, not cancelled.
				started.Wait()
				return nil, errBroken
			}
			started.Done()
			<-ctx.Done() // never finishes on its own: only the cancel ends it
			cancelled.Done()
			return nil, ctx.Err()
		}
	}
	_, err := s.getBatch(context.Background(), keys, loadFor, 1)
	if !errors.Is(err, errBroken) {
		t.Errorf("got %v, want %v", err, errBroken)
	}
	cancelled.Wait() // hangs (and the test times out) if the rest is not cancelled
}

// TestGetBatchCancel: the end of the caller's context ends a pooled batch.
func TestGetBatchCancel(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 2})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var started sync.WaitGroup
	started.Add(2)
	loadFor := func(int) Loader {
		return func(ctx context.Context) ([]byte, error) { started.Done(); <-ctx.Done(); return nil, ctx.Err() }
	}
	done := make(chan error)
	go func() { _, err := s.getBatch(ctx, []string{"x", "y"}, loadFor, 1); done <- err }()
	started.Wait()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestInlineNeedsNoWorker: a single chunk and a batch below the gate load
// on the caller's goroutine, so they complete while every worker is busy.
func TestInlineNeedsNoWorker(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	release := blockWorkers(t, s, 1)
	defer release()
	v, err := s.Get(context.Background(), "one", func(context.Context) ([]byte, error) { return []byte("1"), nil })
	if err != nil || string(v) != "1" {
		t.Errorf("Get: got %q, %v", v, err)
	}
	keys := make([]string, BatchInline-1)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	res, err := s.GetBatch(context.Background(), keys, func(i int) Loader {
		return func(context.Context) ([]byte, error) { return []byte(keys[i]), nil }
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if string(r.Val) != keys[i] {
			t.Errorf("batch %d: got %q, want %q", i, r.Val, keys[i])
		}
	}
}

// TestDemandBeforePrefetch: with the only worker busy, queued demand loads
// run before prefetches queued earlier.
func TestDemandBeforePrefetch(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	release := blockWorkers(t, s, 1)
	var mu sync.Mutex
	var order []string
	record := func(keys []string) func(int) Loader {
		return func(i int) Loader {
			return func(context.Context) ([]byte, error) {
				mu.Lock()
				order = append(order, keys[i])
				mu.Unlock()
				return []byte(keys[i]), nil
			}
		}
	}
	pre := []string{"p1", "p2", "p3"}
	if n := s.Prefetch(context.Background(), pre, record(pre)); n != 3 {
		t.Fatalf("issued %d prefetches, want 3", n)
	}
	demand := []string{"d1", "d2"}
	done := make(chan error)
	go func() { _, err := s.getBatch(context.Background(), demand, record(demand), 1); done <- err }()
	waitFor(t, func() bool { return len(s.demand) == 2 })
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Close() // waits for the worker; the prefetches ran or were failed
	mu.Lock()
	defer mu.Unlock()
	if len(order) < 2 || order[0] != "d1" || order[1] != "d2" {
		t.Errorf("got load order %v, want d1 d2 first", order)
	}
}

// TestReaderTakesQueuedPrefetch: a reader who needs a chunk whose prefetch
// is still queued loads it at once instead of waiting behind the queue,
// and the prefetch counts as used.
func TestReaderTakesQueuedPrefetch(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	release := blockWorkers(t, s, 1)
	defer release()
	var loads atomic.Int64
	load := func(int) Loader {
		return func(context.Context) ([]byte, error) { loads.Add(1); return []byte("p"), nil }
	}
	s.Prefetch(context.Background(), []string{"p"}, load)
	v, err := s.Get(context.Background(), "p", load(0))
	if err != nil || string(v) != "p" {
		t.Fatalf("got %q, %v", v, err)
	}
	st := s.Cache().Stats()
	if loads.Load() != 1 || st.PrefetchIssued != 2 || st.PrefetchUsed != 1 {
		t.Errorf("got %d loads, %d issued, %d used; want 1, 2 (with the blocker), 1", loads.Load(), st.PrefetchIssued, st.PrefetchUsed)
	}
}

// TestPrefetchCancel: ending a prefetch's context cancels its loads that
// no reader joined; a later reader loads afresh.
func TestPrefetchCancel(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	release := blockWorkers(t, s, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var loads atomic.Int64
	load := func(int) Loader {
		return func(context.Context) ([]byte, error) { loads.Add(1); return []byte("v"), nil }
	}
	s.Prefetch(ctx, []string{"a", "b"}, load)
	cancel()
	waitFor(t, func() bool { return s.Cache().Stats().PrefetchWasted == 2 })
	release()
	if v, err := s.Get(context.Background(), "a", load(0)); err != nil || string(v) != "v" {
		t.Errorf("got %q, %v", v, err)
	}
	s.Close()
	if got := loads.Load(); got != 1 {
		t.Errorf("got %d loads, want 1 (the cancelled prefetches never ran)", got)
	}
}

// TestPrefetchLandsInProbation: a prefetched value is in memory for the
// next reader, without a load.
func TestPrefetchLandsInProbation(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	var loads atomic.Int64
	load := func(int) Loader {
		return func(context.Context) ([]byte, error) { loads.Add(1); return []byte("v"), nil }
	}
	s.Prefetch(context.Background(), []string{"a"}, load)
	waitFor(t, func() bool { return s.Cache().Stats().ProbationBytes > 0 })
	if v, err := s.Get(context.Background(), "a", load(0)); err != nil || string(v) != "v" || loads.Load() != 1 {
		t.Errorf("got %q, %v after %d loads; want v from memory after 1", v, err, loads.Load())
	}
	if st := s.Cache().Stats(); st.PrefetchUsed != 1 || st.ProbationBytes != 0 {
		t.Errorf("got %d used, %d probation bytes; want 1, 0", st.PrefetchUsed, st.ProbationBytes)
	}
}

// TestPrefetchDoesNotPin: a finished prefetch under a context that lives on
// (a file handle's) must not keep its value reachable.
func TestPrefetchDoesNotPin(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 10, Workers: 1}) // too small to keep the value
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	freed := make(chan struct{})
	load := func(int) Loader {
		return func(context.Context) ([]byte, error) {
			v := make([]byte, 1<<20)
			runtime.SetFinalizer(&v[0], func(*byte) { close(freed) })
			return v, nil
		}
	}
	s.Prefetch(ctx, []string{"big"}, load)
	waitFor(t, func() bool { return s.Cache().Stats().PrefetchWasted == 1 }) // done, not kept
	for range 100 {
		runtime.GC()
		select {
		case <-freed:
			return
		case <-time.After(time.Millisecond): // the finalizer runs on its own goroutine
		}
	}
	t.Fatal("the prefetched value is still reachable after it finished")
}
