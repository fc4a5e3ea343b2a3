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
	c := New(Options{MaxBytes: 3 * (size + entryCost)})
	ctx := context.Background()
	for i := range 10 {
		if _, err := c.Get(ctx, fmt.Sprint(i), value(size, byte(i))); err != nil {
			t.Fatal(err)
		}
		if got, max := c.Stats().Bytes, int64(3*(size+entryCost)); got > max {
			t.Fatalf("after %d inserts: holds %d bytes, want at most %d", i+1, got, max)
		}
	}
	s := c.Stats()
	if got, want := s.Bytes, int64(3*(size+entryCost)); got != want {
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

// TestLoadSurvivesFirstWaiter: the reader that started a load leaves, and
// the load goes on for the reader still waiting.
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
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first waiter: got %v, want context.Canceled", err)
	}
	close(release)
	if got := string(<-second); got != "done" {
		t.Errorf("second waiter: got %q, want done", got)
	}
	if err := loadErr.Load(); err != nil {
		t.Errorf("the load was cancelled (%v) while a waiter remained", err)
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
