package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/cache/disk"
)

// mapTier is a Tier in memory, standing for any later tier (a shared
// cache) beside the real disk cache.
type mapTier struct {
	mu      sync.Mutex
	entries map[string][2][]byte // GUARDED_BY(mu); key -> ident, val
	puts    atomic.Int64
}

func newMapTier() *mapTier { return &mapTier{entries: make(map[string][2][]byte)} }

func (m *mapTier) Name() string { return "map" }

func (m *mapTier) Get(_ context.Context, key string, size int64, check func([]byte) error) ([]byte, []byte, bool) {
	m.mu.Lock()
	e, ok := m.entries[key]
	m.mu.Unlock()
	if !ok || int64(len(e[1])) != size {
		return nil, nil, false
	}
	if err := check(e[0]); err != nil {
		if errors.Is(err, ErrStale) {
			m.mu.Lock()
			delete(m.entries, key)
			m.mu.Unlock()
		}
		return nil, nil, false
	}
	return e[1], e[0], true
}

func (m *mapTier) Put(key string, ident, val []byte) {
	m.puts.Add(1)
	m.mu.Lock()
	m.entries[key] = [2][]byte{bytes.Clone(ident), bytes.Clone(val)}
	m.mu.Unlock()
}

// TestTiers walks a store of two tiers, the real disk cache then a map,
// through each path of Store.Loader: every tier missing (the origin's
// value is kept in both), a hit in the lower tier (promoted to the disk,
// the origin untouched), a stale entry (dropped, the origin asked), an
// entry of the wrong size, and a load whose source cannot identify what
// it read (kept in memory only). Each case starts from a new store, so
// that memory answers nothing.
func TestTiers(t *testing.T) {
	d, err := disk.Open(disk.Options{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	shared := newMapTier()
	val := bytes.Repeat([]byte("chunk"), 100)
	current := "v1" // the identity the source holds now
	var origin atomic.Int64
	chunk := func(key string, size int64, ident string) Chunk {
		return Chunk{
			Key:  key,
			Size: size,
			Check: func(_ context.Context, rec []byte, _ Trust) error {
				if string(rec) != current {
					return fmt.Errorf("made from %q, the source holds %q: %w", rec, current, ErrStale)
				}
				return nil
			},
			Load: func(context.Context, *Load) ([]byte, []byte, error) {
				origin.Add(1)
				if ident == "" {
					return val, nil, nil
				}
				return val, []byte(ident), nil
			},
		}
	}
	// get reads key through a new store (closed before it returns, so
	// that its writes behind are done) and returns the tiers' counters.
	get := func(c Chunk) []TierStats {
		t.Helper()
		s := NewStore(Options{MaxBytes: 1 << 20, Tiers: []Tier{DiskTier(d), shared}})
		defer s.Close()
		b, err := s.Get(context.Background(), c.Key, s.Loader(c))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, val) {
			t.Fatalf("%s: got %d bytes, not the chunk", c.Key, len(b))
		}
		s.Close()
		return s.TierStats()
	}
	size := int64(len(val))
	for _, tc := range []struct {
		name        string
		setup       func()
		chunk       Chunk
		wantOrigin  int64
		wantHits    [2]int64
		wantWrites  [2]int64 // promoted + kept, by tier
		wantOnDisk  bool
		wantInShare bool
	}{
		{"all miss", nil, chunk("a", size, "v1"), 1, [2]int64{0, 0}, [2]int64{1, 1}, true, true},
		{"memory, then disk", nil, chunk("a", size, "v1"), 0, [2]int64{1, 0}, [2]int64{0, 0}, true, true},
		{"shared promoted", func() { shared.Put("b", []byte("v1"), val) }, chunk("b", size, "v1"), 0, [2]int64{0, 1}, [2]int64{1, 0}, true, true},
		{"stale everywhere", func() { current = "v2" }, chunk("b", size, "v2"), 1, [2]int64{0, 0}, [2]int64{1, 1}, true, true},
		{"wrong size", nil, chunk("b", size+1, "v2"), 1, [2]int64{0, 0}, [2]int64{1, 1}, true, true},
		{"unidentified", nil, chunk("c", size, ""), 1, [2]int64{0, 0}, [2]int64{0, 0}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			before := origin.Load()
			st := get(tc.chunk)
			if got := origin.Load() - before; got != tc.wantOrigin {
				t.Errorf("origin loads: got %d, want %d", got, tc.wantOrigin)
			}
			for i := range st {
				if st[i].Hits != tc.wantHits[i] {
					t.Errorf("%s hits: got %d, want %d", st[i].Name, st[i].Hits, tc.wantHits[i])
				}
				if w := st[i].Promoted + st[i].Kept; w != tc.wantWrites[i] {
					t.Errorf("%s writes: got %d, want %d", st[i].Name, w, tc.wantWrites[i])
				}
			}
			_, _, onDisk := DiskTier(d).Get(context.Background(), tc.chunk.Key, size, func([]byte) error { return nil })
			if onDisk != tc.wantOnDisk {
				t.Errorf("on disk: got %v, want %v", onDisk, tc.wantOnDisk)
			}
			_, _, inShared := shared.Get(context.Background(), tc.chunk.Key, size, func([]byte) error { return nil })
			if inShared != tc.wantInShare {
				t.Errorf("in the shared tier: got %v, want %v", inShared, tc.wantInShare)
			}
		})
	}
}

// TestTierWritesBounded checks that at most TierWriters writes run behind
// loads per tier: a load that finds them all busy waits (and is counted),
// and Close waits for the writes.
func TestTierWritesBounded(t *testing.T) {
	bt := &blockingTier{release: make(chan struct{}), running: make(chan struct{}, 16)}
	s := NewStore(Options{MaxBytes: 1 << 20, Tiers: []Tier{bt}})
	ctx := context.Background()
	load := func(key string) Loader {
		return s.Loader(Chunk{Key: key, Size: 1, Check: func(context.Context, []byte, Trust) error { return nil },
			Load: func(context.Context, *Load) ([]byte, []byte, error) { return []byte{1}, []byte("id"), nil }})
	}
	for i := range TierWriters {
		if _, err := s.Get(ctx, fmt.Sprint(i), load(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for range TierWriters {
		<-bt.running
	}
	third := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "third", load("third"))
		third <- err
	}()
	waitFor(t, func() bool { return s.TierStats()[0].Waits == 1 })
	select {
	case <-third:
		t.Fatal("a load went on with every writer of the tier busy")
	default:
	}
	close(bt.release)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := bt.puts.Load(); got != TierWriters+1 {
		t.Errorf("puts done at Close: got %d, want %d", got, TierWriters+1)
	}
}

// blockingTier misses every Get and holds every Put until release closes.
type blockingTier struct {
	release chan struct{}
	running chan struct{}
	puts    atomic.Int64
}

func (*blockingTier) Name() string { return "blocking" }
func (*blockingTier) Get(context.Context, string, int64, func([]byte) error) ([]byte, []byte, bool) {
	return nil, nil, false
}
func (b *blockingTier) Put(string, []byte, []byte) {
	b.running <- struct{}{}
	<-b.release
	b.puts.Add(1)
}
