package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/mem"
)

// recycler hands out values of one size that loads declare their own
// (Load.Own), and records each given back: filled with a poison byte and
// kept in a free list the next loads take from, as internal/mem's pool
// would, so that a value given back while a reader still holds it shows
// up as poisoned bytes.
type recycler struct {
	size int
	mu   sync.Mutex
	free [][]byte
	back map[string]int // given back, by key
}

func newRecycler(size int) *recycler { return &recycler{size: size, back: map[string]int{}} }

// chunk is the Chunk of key whose load fills a buffer with key's pattern
// and owns it; gate, when not nil, holds the load until it is closed.
func (r *recycler) chunk(key string, gate <-chan struct{}, tiers bool) Chunk {
	c := Chunk{
		Key:  key,
		Size: int64(r.size),
		Load: func(ctx context.Context, l *Load) ([]byte, []byte, error) {
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			r.mu.Lock()
			var b []byte
			if n := len(r.free); n > 0 {
				b, r.free = r.free[n-1], r.free[:n-1]
			} else {
				b = make([]byte, r.size)
			}
			r.mu.Unlock()
			fillPattern(b, key)
			l.Own(b, func() {
				for i := range b {
					b[i] = 0xdb
				}
				r.mu.Lock()
				r.back[key]++
				r.free = append(r.free, b)
				r.mu.Unlock()
			})
			return b, []byte("id"), nil
		},
	}
	if tiers {
		c.Check = func(context.Context, []byte, Trust) error { return nil }
	}
	return c
}

func (r *recycler) given(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.back[key]
}

func fillPattern(b []byte, key string) {
	for i := range b {
		b[i] = key[i%len(key)]
	}
}

func isPattern(b []byte, key string) bool {
	for i := range b {
		if b[i] != key[i%len(key)] {
			return false
		}
	}
	return true
}

// TestRecycleCounted: a value taken only with a count (Acquire) is given
// back once the cache has let it go and its last reader has released it,
// and not before; a value any reader took without a count (Get) never is.
func TestRecycleCounted(t *testing.T) {
	ctx := context.Background()
	const size = 1000
	r := newRecycler(size)
	s := NewStore(Options{MaxBytes: 2*size + 400}) // two values and their keys
	defer s.Close()
	acquire := func(key string) ([]byte, func()) {
		t.Helper()
		b, hold, _, err := s.Acquire(ctx, key, s.Loader(r.chunk(key, nil, false)))
		release := hold.Release
		if err != nil || !isPattern(b, key) {
			t.Fatalf("%s: %v, or not its bytes", key, err)
		}
		return b, release
	}
	a, releaseA := acquire("a")
	_, releaseA2 := acquire("a") // a hit: a second count
	for _, k := range []string{"b", "c", "d"} {
		_, rel := acquire(k)
		rel()
	}
	// a was evicted by b, c and d, and is held twice.
	if got := r.given("a"); got != 0 {
		t.Fatalf("a given back %d times while two readers hold it", got)
	}
	releaseA()
	releaseA() // a second call does nothing
	if got := r.given("a"); got != 0 || !isPattern(a, "a") {
		t.Fatalf("a given back %d times while one reader holds it", got)
	}
	releaseA2()
	if got := r.given("a"); got != 1 {
		t.Fatalf("a given back %d times once released and evicted, want 1", got)
	}
	if got := r.given("b"); got != 1 {
		t.Fatalf("b (evicted, released) given back %d times, want 1", got)
	}
	// e is read once without a count: it escapes for good.
	if _, err := s.Get(ctx, "e", s.Loader(r.chunk("e", nil, false))); err != nil {
		t.Fatal(err)
	}
	_, rel := acquire("e")
	rel()
	for _, k := range []string{"f", "g", "h"} {
		_, rel := acquire(k)
		rel()
	}
	if got := r.given("e"); got != 0 {
		t.Fatalf("e, read by Get, given back %d times", got)
	}
	if st := s.Cache().Stats(); st.Recycled < 5 {
		t.Fatalf("Stats.Recycled = %d, want at least 5 (a, b, c, d, f)", st.Recycled)
	}
}

// TestRecycleRetain: a second hold taken from a first (Hold.Retain, as a
// reply written from a handle's chunk takes) keeps the value after the
// first is released; none can be taken from a released hold.
func TestRecycleRetain(t *testing.T) {
	ctx := context.Background()
	const size = 1000
	r := newRecycler(size)
	s := NewStore(Options{MaxBytes: size + 200})
	defer s.Close()
	b, hold, _, err := s.Acquire(ctx, "a", s.Loader(r.chunk("a", nil, false)))
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := hold.Retain()
	if !ok {
		t.Fatal("no second hold on a value held")
	}
	hold.Release()
	s.Cache().Remove("a")
	if got := r.given("a"); got != 0 || !isPattern(b, "a") {
		t.Fatalf("given back %d times while a retained hold holds it", got)
	}
	if _, ok := hold.Retain(); ok {
		t.Fatal("a hold retained from a released one")
	}
	reply.Release()
	if got := r.given("a"); got != 1 {
		t.Fatalf("given back %d times once every hold was released, want 1", got)
	}
}

// TestRecycleFlightWaiters: the readers that wait for one load count it
// as they took it: all counted, it is given back after the last release
// once evicted; one Get among them keeps it from ever being given back;
// a counted reader that leaves before the load ends is not counted, and
// one that leaves as it ends drops its count.
func TestRecycleFlightWaiters(t *testing.T) {
	ctx := context.Background()
	const size = 1000
	for _, tc := range []struct {
		name      string
		withGet   bool
		cancelOne bool
		want      int
	}{
		{"counted", false, false, 1},
		{"one Get", true, false, 0},
		{"one leaves", false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecycler(size)
			s := NewStore(Options{MaxBytes: size + 200})
			defer s.Close()
			gate := make(chan struct{})
			c := r.chunk("a", gate, false)
			var wg sync.WaitGroup
			releases := make(chan func(), 4)
			for range 3 {
				wg.Go(func() {
					b, hold, _, err := s.Acquire(ctx, "a", s.Loader(c))
					rel := hold.Release
					if err != nil || !isPattern(b, "a") {
						t.Errorf("a: %v, or not its bytes", err)
					}
					releases <- rel
				})
			}
			if tc.withGet {
				wg.Go(func() {
					if _, err := s.Get(ctx, "a", s.Loader(c)); err != nil {
						t.Error(err)
					}
				})
			}
			if tc.cancelOne {
				// Once a reader runs the load (a reader that ran it
				// itself could not leave before it ends).
				waitFor(t, func() bool {
					s.c.mu.Lock()
					defer s.c.mu.Unlock()
					f := s.c.flights["a"]
					return f != nil && f.claimed.Load() && f.counted == 3
				})
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, hold, _, err := s.Acquire(cctx, "a", s.Loader(c))
					rel := hold.Release
					if err == nil {
						t.Error("a cancelled reader got the value")
					}
					rel()
				}()
				waitFor(t, func() bool {
					s.c.mu.Lock()
					defer s.c.mu.Unlock()
					f := s.c.flights["a"]
					return f != nil && f.counted == 4
				})
				cancel()
				<-done
			}
			waitFor(t, func() bool {
				s.c.mu.Lock()
				defer s.c.mu.Unlock()
				f := s.c.flights["a"]
				return f != nil && f.waiters >= 3
			})
			close(gate)
			wg.Wait()
			close(releases)
			s.Cache().Remove("a")
			if got := r.given("a"); got != 0 {
				t.Fatalf("given back %d times while three readers hold it", got)
			}
			for rel := range releases {
				rel()
			}
			if got := r.given("a"); got != tc.want {
				t.Fatalf("given back %d times, want %d", got, tc.want)
			}
		})
	}
}

// gatedTier is a tier whose Put waits for its gate, keeping what it
// was given to check it once let go.
type gatedTier struct {
	gate chan struct{}
	got  chan bool // whether Put's value was still the chunk when let go
	key  string
}

func (b *gatedTier) Name() string { return "blocking" }
func (b *gatedTier) Get(context.Context, string, int64, func([]byte) error) ([]byte, []byte, bool) {
	return nil, nil, false
}
func (b *gatedTier) Put(_ string, _, val []byte) {
	<-b.gate
	b.got <- isPattern(val, b.key)
}

// TestRecycleTierWrite: a value written to a tier behind its load is not
// given back until the write returns, though every reader released it
// and the cache let it go; a value too large to keep is given back once
// its reader releases it.
func TestRecycleTierWrite(t *testing.T) {
	ctx := context.Background()
	const size = 1000
	r := newRecycler(size)
	bt := &gatedTier{gate: make(chan struct{}), got: make(chan bool, 1), key: "a"}
	s := NewStore(Options{MaxBytes: size + 200, Tiers: []Tier{bt}})
	defer s.Close() // waits for the write: after the gate opens
	var open sync.Once
	openGate := func() { open.Do(func() { close(bt.gate) }) }
	defer openGate()
	_, hold, _, err := s.Acquire(ctx, "a", s.Loader(r.chunk("a", nil, true)))
	rel := hold.Release
	if err != nil {
		t.Fatal(err)
	}
	rel()
	s.Cache().Remove("a")
	if got := r.given("a"); got != 0 {
		t.Fatalf("given back %d times while a tier writes it", got)
	}
	openGate()
	if !<-bt.got {
		t.Fatal("the tier's write read poisoned bytes")
	}
	waitFor(t, func() bool { return r.given("a") == 1 })

	big := newRecycler(4 * size) // larger than the cache: never kept
	b, hold, _, err := s.Acquire(ctx, "big", s.Loader(big.chunk("big", nil, false)))
	rel = hold.Release
	if err != nil || !isPattern(b, "big") {
		t.Fatalf("big: %v, or not its bytes", err)
	}
	if got := big.given("big"); got != 0 {
		t.Fatalf("a value not kept given back %d times while its reader holds it", got)
	}
	rel()
	if got := big.given("big"); got != 1 {
		t.Fatalf("a value not kept given back %d times once released, want 1", got)
	}
}

// TestRecyclePrefetched: a prefetched value nobody read is given back
// when probation evicts it.
func TestRecyclePrefetched(t *testing.T) {
	const size = 1000
	r := newRecycler(size)
	s := NewStore(Options{MaxBytes: 8 * size, ProbationBytes: size + 200})
	defer s.Close()
	keys := []string{"p1", "p2"}
	for _, k := range keys {
		s.Prefetch(context.Background(), []string{k}, func(int) Loader { return s.Loader(r.chunk(k, nil, false)) })
		waitFor(t, func() bool {
			s.c.mu.Lock()
			defer s.c.mu.Unlock()
			return s.c.prob.Contains(k)
		})
	}
	waitFor(t, func() bool { return r.given("p1") == 1 })
	if got := r.given("p2"); got != 0 {
		t.Fatalf("p2, kept in probation, given back %d times", got)
	}
}

// TestRecycleNotDeclared: a load that returns other memory than it
// declared its own has nothing given back.
func TestRecycleNotDeclared(t *testing.T) {
	var back atomic.Int64
	s := NewStore(Options{MaxBytes: 100})
	defer s.Close()
	c := Chunk{Key: "x", Size: 10, Load: func(_ context.Context, l *Load) ([]byte, []byte, error) {
		b := make([]byte, 20)
		l.Own(b, func() { back.Add(1) })
		return b[:10], nil, nil // another slice of it: not what Own named
	}}
	_, hold, _, err := s.Acquire(context.Background(), "x", s.Loader(c))
	rel := hold.Release
	if err != nil {
		t.Fatal(err)
	}
	rel()
	s.Cache().Remove("x")
	if back.Load() != 0 {
		t.Fatal("a value other than the one declared was given back")
	}
}

// TestRecycleStress: readers acquire random keys of a cache that holds a
// few at a time, some with Get, while values are evicted and given back
// into a free list that later loads reuse; every reader checks its bytes
// while it holds them. A count wrong by one shows as another key's bytes
// or poison.
func TestRecycleStress(t *testing.T) {
	const size = 4096
	r := newRecycler(size)
	s := NewStore(Options{MaxBytes: 4 * (size + 200), Workers: 2})
	defer s.Close()
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%02d", i)
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for time.Now().Before(deadline) {
				k := keys[rng.IntN(len(keys))]
				if rng.IntN(50) == 0 {
					b, err := s.Get(context.Background(), k, s.Loader(r.chunk(k, nil, false)))
					if err != nil || !isPattern(b, k) {
						bad.Add(1)
					}
					continue
				}
				if rng.IntN(10) == 0 {
					pk := keys[rng.IntN(len(keys))]
					s.Prefetch(context.Background(), []string{pk}, func(int) Loader {
						return s.Loader(r.chunk(pk, nil, false))
					})
				}
				b, hold, _, err := s.Acquire(context.Background(), k, s.Loader(r.chunk(k, nil, false)))
				rel := hold.Release
				if err != nil {
					bad.Add(1)
					continue
				}
				for range 3 {
					if !isPattern(b, k) {
						bad.Add(1)
					}
				}
				rel()
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reads saw bytes that were not their key's", n)
	}
	st := s.Cache().Stats()
	if st.Recycled == 0 {
		t.Fatalf("nothing given back in %d evictions", st.Evictions)
	}
	t.Logf("%d evictions, %d given back", st.Evictions, st.Recycled)
}

// BenchmarkRecycle reads 16 keys in turn through a cache that holds 4,
// each load writing a 1 MiB value into a buffer of internal/mem's pool
// (as a decoder does), taken with a count and released (counted: evicted
// values go back to the pool) or with Get (uncounted: every load's buffer
// is fresh memory, and the evicted ones the collector's).
//
//	go test -run '^$' -bench Recycle -count 5 ./cache
func BenchmarkRecycle(b *testing.B) {
	const size = 1 << 20
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	for _, counted := range []bool{true, false} {
		name := map[bool]string{true: "counted", false: "uncounted"}[counted]
		b.Run(name, func(b *testing.B) {
			s := NewStore(Options{MaxBytes: 4*size + 4096})
			defer s.Close()
			keys := make([]string, 16)
			loaders := make([]Loader, len(keys))
			for i := range keys {
				keys[i] = fmt.Sprint("k", i)
				loaders[i] = s.Loader(Chunk{Key: keys[i], Size: size, Load: func(_ context.Context, l *Load) ([]byte, []byte, error) {
					v := mem.Get(size)
					copy(v, src)
					l.Own(v, func() { mem.Put(v) })
					return v, nil, nil
				}})
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := i % len(keys)
				if counted {
					_, hold, _, err := s.Acquire(context.Background(), keys[k], loaders[k])
					rel := hold.Release
					if err != nil {
						b.Fatal(err)
					}
					rel()
				} else if _, err := s.Get(context.Background(), keys[k], loaders[k]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
