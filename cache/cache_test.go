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

func value(n int, b byte) Loader {
	return func(context.Context) ([]byte, error) {
		v := make([]byte, n)
		for i := range v {
			v[i] = b
		}
		return v, nil
	}
}

func TestBoundInBytes(t *testing.T) {
	const size = 1000
	c := New(Options{MaxBytes: 3 * (size + 1 + entryCost)})
	ctx := context.Background()
	for i := range 10 {
		if _, err := c.Get(ctx, fmt.Sprint(i), value(size, byte(i))); err != nil {
			t.Fatal(err)
		}
		if got, max := c.Stats().Bytes, int64(3*(size+1+entryCost)); got > max {
			t.Fatalf("after %d inserts: holds %d bytes, want at most %d", i+1, got, max)
		}
	}
	s := c.Stats()
	if got, want := s.Bytes, int64(3*(size+1+entryCost)); got != want {
		t.Errorf("got %d bytes held, want %d", got, want)
	}
	if got, want := s.Evictions, int64(7); got != want {
		t.Errorf("got %d evictions, want %d", got, want)
	}
	// The three most recent survive; the oldest do not.
	var loads atomic.Int64
	counting := func(context.Context) ([]byte, error) { loads.Add(1); return make([]byte, size), nil }
	for _, k := range []string{"7", "8", "9"} {
		if _, err := c.Get(ctx, k, counting); err != nil {
			t.Fatal(err)
		}
	}
	if got := loads.Load(); got != 0 {
		t.Errorf("recent keys were reloaded %d times, want 0", got)
	}
	if _, err := c.Get(ctx, "0", counting); err != nil || loads.Load() != 1 {
		t.Errorf("evicted key: got %d loads, want 1", loads.Load())
	}
}

func TestOversizedValueNotKept(t *testing.T) {
	c := New(Options{MaxBytes: 100})
	v, err := c.Get(context.Background(), "big", value(1000, 7))
	if err != nil || len(v) != 1000 || v[999] != 7 {
		t.Fatalf("got %d bytes, %v; want the value returned", len(v), err)
	}
	if got := c.Stats().Bytes; got != 0 {
		t.Errorf("holds %d bytes, want 0", got)
	}
}

// TestRemove: a removed value is loaded again at the next Get, and its
// bytes are no longer counted; other values stay.
func TestRemove(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	ctx := context.Background()
	var loads atomic.Int64
	counting := func(context.Context) ([]byte, error) { loads.Add(1); return make([]byte, 100), nil }
	for _, k := range []string{"a", "b", "p"} {
		if _, err := c.Get(ctx, k, counting); err != nil {
			t.Fatal(err)
		}
	}
	c.Remove("a")
	c.Remove("p")
	c.Remove("never")
	if got, want := c.Stats().Bytes, int64(100+1+entryCost); got != want {
		t.Errorf("after removing two of three values: %d bytes held, want %d", got, want)
	}
	for _, k := range []string{"a", "b", "p"} {
		if _, err := c.Get(ctx, k, counting); err != nil {
			t.Fatal(err)
		}
	}
	if got := loads.Load(); got != 5 {
		t.Errorf("loads: got %d, want 5 (a and p again, b kept)", got)
	}
}

func TestConcurrentLoadsShareOneFlight(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	var loads atomic.Int64
	release := make(chan struct{})
	load := func(context.Context) ([]byte, error) {
		loads.Add(1)
		<-release
		return []byte("chunk"), nil
	}
	const readers = 50
	var wg sync.WaitGroup
	results := make(chan string, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Get(context.Background(), "k", load)
			if err != nil {
				t.Error(err)
			}
			results <- string(v)
		}()
	}
	waitFor(t, func() bool { s := c.Stats(); return s.Misses+s.Shared == readers })
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "chunk" {
			t.Errorf("got %q, want chunk", r)
		}
	}
	if got := loads.Load(); got != 1 {
		t.Errorf("got %d loads, want 1", got)
	}
}

// TestLoadSurvivesFirstWaiter: the reader that runs a load inline is
// interrupted while another reader waits for the same key; the load is not
// cancelled, the other reader gets the value, and the first returns once
// the load it was running is done.
func TestLoadSurvivesFirstWaiter(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	started, release := make(chan struct{}), make(chan struct{})
	var loadErr atomic.Value
	load := func(ctx context.Context) ([]byte, error) {
		close(started)
		select {
		case <-release:
			return []byte("done"), nil
		case <-ctx.Done():
			loadErr.Store(ctx.Err())
			return nil, ctx.Err()
		}
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan error)
	go func() { _, err := c.Get(ctx1, "k", load); first <- err }()
	<-started
	second := make(chan []byte)
	go func() {
		v, err := c.Get(context.Background(), "k", load)
		if err != nil {
			t.Error(err)
		}
		second <- v
	}()
	waitFor(t, func() bool { return c.Stats().Shared == 1 })
	cancel1()
	close(release)
	if got := string(<-second); got != "done" {
		t.Errorf("second waiter: got %q, want done", got)
	}
	if err := <-first; err != nil {
		t.Errorf("first waiter, which finished the load: got %v, want nil", err)
	}
	if err := loadErr.Load(); err != nil {
		t.Errorf("the load was cancelled (%v) while a waiter remained", err)
	}
}

// TestWaiterLeavesAtOnce: a reader waiting for a load that another
// goroutine runs stops waiting as soon as its context ends.
func TestWaiterLeavesAtOnce(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	started, release := make(chan struct{}), make(chan struct{})
	load := func(ctx context.Context) ([]byte, error) {
		close(started)
		<-release
		return []byte("done"), nil
	}
	go c.Get(context.Background(), "k", load)
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := c.Get(ctx, "k", load); done <- err }()
	waitFor(t, func() bool { return c.Stats().Shared == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	close(release)
}

// TestLateReaderStartsFreshLoad is the regression test of a review
// finding: once the last waiter of a load has left and the load was
// cancelled, a reader who comes next must not join the dying flight and
// get its cancellation error, but start a load of its own.
func TestLateReaderStartsFreshLoad(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	started := make(chan struct{})
	stuck := make(chan struct{}) // the first load ignores its cancel until released
	var loads atomic.Int64
	load := func(ctx context.Context) ([]byte, error) {
		if loads.Add(1) == 1 {
			close(started)
			<-stuck
			return nil, fmt.Errorf("load: %w", ctx.Err())
		}
		return []byte("fresh"), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() { _, err := c.Get(ctx, "k", load); first <- err }()
	<-started
	cancel()
	waitFor(t, func() bool { return c.Stats().Abandoned == 1 })
	v, err := c.Get(context.Background(), "k", load)
	if err != nil || string(v) != "fresh" {
		t.Errorf("late reader: got %q, %v; want fresh, nil", v, err)
	}
	close(stuck)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first reader: got %v, want context.Canceled", err)
	}
	if got := loads.Load(); got != 2 {
		t.Errorf("got %d loads, want 2", got)
	}
	// The late value stays; the cancelled load's error is not kept.
	if v, err := c.Get(context.Background(), "k", load); err != nil || string(v) != "fresh" || loads.Load() != 2 {
		t.Errorf("after both: got %q, %v, %d loads; want fresh from memory", v, err, loads.Load())
	}
}

// TestChargesCapacity is the regression test of a review finding: a value
// is charged for its capacity, which is the memory it pins, not its length.
func TestChargesCapacity(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	_, err := c.Get(context.Background(), "k", func(context.Context) ([]byte, error) {
		return make([]byte, 10, 4096), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Stats().Bytes, int64(4096+1+entryCost); got != want {
		t.Errorf("got %d bytes charged, want %d (cap + entry cost)", got, want)
	}
}

// TestProbation: prefetched values never push read ones below
// MaxBytes-ProbationBytes, a read promotes a prefetched value, and
// prefetched values are bounded on their own.
func TestProbation(t *testing.T) {
	const size = 1000
	cost := int64(size + len("hot1") + entryCost) // every key is 4 bytes
	c := New(Options{MaxBytes: 5 * cost, ProbationBytes: 2 * cost})
	ctx := context.Background()
	var loads atomic.Int64
	counting := func(context.Context) ([]byte, error) { loads.Add(1); return make([]byte, size), nil }
	prefetch := func(key string) {
		t.Helper()
		f := c.lookupPrefetch(key, counting)
		if f == nil {
			t.Fatalf("prefetch %s: already held", key)
		}
		f.claimed.Store(true)
		c.execute(f)
	}
	for _, k := range []string{"hot1", "hot2", "hot3"} {
		if _, err := c.Get(ctx, k, counting); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"pre1", "pre2", "pre3", "pre4"} {
		prefetch(k)
	}
	s := c.Stats()
	if s.Bytes > 5*cost || s.ProbationBytes != 2*cost {
		t.Errorf("got %d bytes (%d probation), want at most %d with %d probation", s.Bytes, s.ProbationBytes, 5*cost, 2*cost)
	}
	loads.Store(0)
	for _, k := range []string{"hot1", "hot2", "hot3", "pre4"} {
		if _, err := c.Get(ctx, k, counting); err != nil {
			t.Fatal(err)
		}
	}
	if got := loads.Load(); got != 0 {
		t.Errorf("hot keys and the last prefetch: %d loads, want 0", got)
	}
	s = c.Stats()
	if s.ProbationBytes != cost || s.PrefetchUsed != 1 || s.PrefetchWasted != 2 {
		t.Errorf("got probation %d, used %d, wasted %d; want %d (pre3), 1, 2", s.ProbationBytes, s.PrefetchUsed, s.PrefetchWasted, cost)
	}
	// pre4 was promoted: it now counts as read, and a fifth read value
	// evicts the least recent read value, hot1.
	if _, err := c.Get(ctx, "hot5", counting); err != nil {
		t.Fatal(err)
	}
	loads.Store(0)
	for _, k := range []string{"pre4", "hot3", "hot2"} {
		c.Get(ctx, k, counting)
	}
	if got := loads.Load(); got != 0 {
		t.Errorf("recent keys: %d loads, want 0", got)
	}
	c.Get(ctx, "hot1", counting)
	if got := loads.Load(); got != 1 {
		t.Errorf("least recent key: %d loads, want 1 (evicted)", got)
	}
}

// TestProbationStreaming: a reader that reads keys in order over eight
// times the cache, prefetching the next two after each read, loads each key
// once: no prefetch is evicted before the reader reaches it.
func TestProbationStreaming(t *testing.T) {
	const size, n = 1000, 64
	cost := int64(size + len("k000") + entryCost)
	c := New(Options{MaxBytes: 8 * cost, ProbationBytes: 2 * cost})
	ctx := context.Background()
	var loads atomic.Int64
	counting := func(context.Context) ([]byte, error) { loads.Add(1); return make([]byte, size), nil }
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }
	for i := 0; i < n; i++ {
		if _, err := c.Get(ctx, key(i), counting); err != nil {
			t.Fatal(err)
		}
		for _, j := range []int{i + 1, i + 2} {
			if f := c.lookupPrefetch(key(j), counting); f != nil {
				f.claimed.Store(true)
				c.execute(f)
			}
		}
	}
	s := c.Stats()
	if got := loads.Load(); got != n+2 || s.PrefetchWasted != 0 || s.PrefetchUsed != n-1 {
		t.Errorf("%d loads, %d prefetches used, %d wasted; want %d (two past the end), %d, 0", got, s.PrefetchUsed, s.PrefetchWasted, n+2, n-1)
	}
	if s.Bytes > 8*cost || s.ProbationBytes > 2*cost {
		t.Errorf("holds %d bytes (%d probation), bounds %d (%d)", s.Bytes, s.ProbationBytes, 8*cost, 2*cost)
	}
}

// TestLoadCancelledWhenAllLeave: once no one waits, the load's context ends.
func TestLoadCancelledWhenAllLeave(t *testing.T) {
	c := New(Options{MaxBytes: 1 << 20})
	cancelled := make(chan struct{})
	load := func(ctx context.Context) ([]byte, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := c.Get(ctx, "k", load); done <- err }()
	waitFor(t, func() bool { return c.Stats().Misses == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	<-cancelled // hangs (and the test times out) if the load is never cancelled
}

func TestErrors(t *testing.T) {
	errMissing := errors.New("missing")
	c := New(Options{MaxBytes: 1 << 20, KeepError: func(err error) bool { return errors.Is(err, errMissing) }})
	ctx := context.Background()
	var loads atomic.Int64
	failing := func(err error) Loader {
		return func(context.Context) ([]byte, error) { loads.Add(1); return nil, err }
	}
	for range 3 {
		if _, err := c.Get(ctx, "missing", failing(errMissing)); !errors.Is(err, errMissing) {
			t.Fatalf("got %v, want %v", err, errMissing)
		}
	}
	if got := loads.Load(); got != 1 {
		t.Errorf("kept error: got %d loads, want 1", got)
	}
	loads.Store(0)
	for range 3 {
		if _, err := c.Get(ctx, "broken", failing(errors.New("corrupt"))); err == nil {
			t.Fatal("got nil error, want corrupt")
		}
	}
	if got := loads.Load(); got != 3 {
		t.Errorf("transient error: got %d loads, want 3 (not kept)", got)
	}
	_, err := c.Get(ctx, "panics", func(context.Context) ([]byte, error) { panic("decoder bug") })
	if err == nil {
		t.Error("a panicking load returned no error")
	}
}

// waitFor polls cond: it synchronises the test with goroutines it cannot
// otherwise observe. Bounded so that a bug fails instead of hanging.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 100000 {
		if cond() {
			return
		}
		runtime.Gosched()
		time.Sleep(10 * time.Microsecond)
	}
	t.Fatal("condition never became true")
}
