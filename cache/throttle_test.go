package cache

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// TestThrottle checks Load.CPU's contract: prefetches hold at most
// Options.CPUSlots slots at once, a demand load never waits for one, a prefetch
// waiting for a slot goes on as soon as a reader waits for it, and the
// end of the load's context ends the wait.
func TestThrottle(t *testing.T) {
	for _, slots := range []int{0, 1, 3} { // 0: GOMAXPROCS
		t.Run(fmt.Sprint("slots", slots), func(t *testing.T) { testThrottle(t, slots) })
	}
}

func testThrottle(t *testing.T, slots int) {
	procs := slots
	if procs == 0 {
		procs = runtime.GOMAXPROCS(0)
	}
	s := NewStore(Options{MaxBytes: 1 << 30, Workers: procs + 4, CPUSlots: slots})
	defer s.Close()

	// Outside a flight of the store it does not wait.
	if _, err := s.Loader(Chunk{Load: func(ctx context.Context, l *Load) ([]byte, []byte, error) {
		return nil, nil, l.CPU(ctx)
	}})(context.Background()); err != nil {
		t.Fatal(err)
	}

	// procs+2 prefetches that each hold their slot until told.
	var holding, peak atomic.Int32
	var going sync.Map // keys whose load got past CPU
	hold := make(chan struct{})
	var unhold sync.Once
	// Deferred after s.Close, so it runs first: a failing test ends
	// instead of waiting for loads that hold their slots.
	defer unhold.Do(func() { close(hold) })
	throttled := func(key string) Loader {
		return s.Loader(Chunk{Key: key, Load: func(ctx context.Context, l *Load) ([]byte, []byte, error) {
			if err := l.CPU(ctx); err != nil {
				return nil, nil, err
			}
			going.Store(key, true)
			n := holding.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-hold
			holding.Add(-1)
			return []byte("p"), nil, nil
		}})
	}
	keys := make([]string, procs+2)
	for i := range keys {
		keys[i] = fmt.Sprint("p", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := s.Prefetch(ctx, keys, func(i int) Loader { return throttled(keys[i]) }); n != len(keys) {
		t.Fatalf("Prefetch started %d loads, want %d", n, len(keys))
	}
	waitFor(t, func() bool { return holding.Load() == int32(procs) })
	testenv.WaitBlocked(t, throttleFunc, 2) // the other two wait for a slot
	if got := peak.Load(); got != int32(procs) {
		t.Fatalf("%d prefetches held a slot at once, want %d", got, procs)
	}

	// A demand load goes ahead with every slot taken.
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(context.Background(), "demand", s.Loader(Chunk{Key: "demand", Load: func(ctx context.Context, l *Load) ([]byte, []byte, error) {
			return []byte("d"), nil, l.CPU(ctx)
		}}))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a demand load waited for a throttle slot")
	}

	// A reader joining a waiting prefetch lets it go on without a slot.
	// Workers take queued prefetches in no fixed order: join one that
	// has no slot.
	var waiting string
	for _, k := range keys {
		if _, ok := going.Load(k); !ok {
			waiting = k
		}
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := s.Get(context.Background(), waiting, throttled(waiting))
		got <- b
	}()
	waitFor(t, func() bool { return holding.Load() > int32(procs) })
	unhold.Do(func() { close(hold) })
	if b := <-got; string(b) != "p" {
		t.Fatalf("the joined prefetch returned %q", b)
	}
}

// throttleFunc is Load.CPU as a stack trace names it.
const throttleFunc = "github.com/volfs/volfs/cache.(*Load).CPU"

// TestThrottleCancel checks that a prefetch waiting for a slot gives up
// when its prefetch is cancelled: its load gets context.Canceled, without
// a slot, while the slots stay held.
func TestThrottleCancel(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	s := NewStore(Options{MaxBytes: 1 << 30, Workers: procs + 1})
	defer s.Close()
	hold := make(chan struct{})
	defer close(hold)
	errs := make(chan error, procs+1)
	var holding atomic.Int32
	load := s.Loader(Chunk{Load: func(ctx context.Context, l *Load) ([]byte, []byte, error) {
		if err := l.CPU(ctx); err != nil {
			errs <- err
			return nil, nil, err
		}
		holding.Add(1)
		<-hold
		return nil, nil, nil
	}})
	keys := make([]string, procs)
	for i := range keys {
		keys[i] = fmt.Sprint("held", i)
	}
	s.Prefetch(context.Background(), keys, func(int) Loader { return load })
	waitFor(t, func() bool { return holding.Load() == int32(procs) })
	ctx, cancel := context.WithCancel(context.Background())
	s.Prefetch(ctx, []string{"waiting"}, func(int) Loader { return load })
	testenv.WaitBlocked(t, throttleFunc, 1)
	cancel()
	select {
	case err := <-errs:
		if err != context.Canceled {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a cancelled prefetch kept waiting for a slot")
	}
	if got := holding.Load(); got != int32(procs) {
		t.Errorf("%d loads hold a slot, want %d", got, procs)
	}
	if got := s.throttled.Load(); got != int64(procs) {
		t.Errorf("%d slots taken, want %d: the cancelled prefetch took one", got, procs)
	}
}
