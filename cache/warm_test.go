package cache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// leaseTier is a mapTier that counts the leases a miss takes and the
// Releases and writes that end them, and whose Keep fails when full.
type leaseTier struct {
	*mapTier
	name            string
	taken, released atomic.Int64
	full            bool
}

func (l *leaseTier) Name() string { return l.name }

func (l *leaseTier) Get(ctx context.Context, key string, size int64, check func([]byte) error) ([]byte, []byte, bool) {
	v, id, ok := l.mapTier.Get(ctx, key, size, check)
	if !ok {
		l.taken.Add(1)
	}
	return v, id, ok
}

func (l *leaseTier) Release(string) { l.released.Add(1) }

var errTierFull = errors.New("full")

func (l *leaseTier) Keep(key string, ident, val []byte) error {
	l.released.Add(1)
	if l.full {
		return errTierFull
	}
	l.Put(key, ident, val)
	return nil
}

// TestStoreWarm walks a chunk through two tiers with Store.Warm: held by
// neither (loaded once, kept in both), by the lower only (copied up, no
// load), by both (nothing written), a dry run (nothing loaded or written,
// the leases released), a source without identity (kept nowhere,
// ErrNoIdentity), and a tier that refuses the write (NotKept names it).
// Every lease a miss takes is ended by a write or a Release.
func TestStoreWarm(t *testing.T) {
	val, ident := []byte("decoded!"), []byte("v1")
	for _, tc := range []struct {
		name               string
		upper, lower       bool // which tiers hold the chunk before
		dryRun, noIdent    bool
		lowerFull          bool
		wantServed         string
		wantLacked, loads  int
		wantNotKept        error
		wantUpper, wantLow bool // which hold it after
	}{
		{name: "cold", wantLacked: 2, loads: 1, wantUpper: true, wantLow: true},
		{name: "lower", lower: true, wantServed: "lower", wantLacked: 1, wantUpper: true, wantLow: true},
		{name: "upper", upper: true, wantServed: "upper", wantLacked: 1, wantUpper: true, wantLow: true},
		{name: "both", upper: true, lower: true, wantServed: "upper", wantUpper: true, wantLow: true},
		{name: "dry", dryRun: true, wantLacked: 2},
		{name: "dry-upper", dryRun: true, upper: true, wantServed: "upper", wantLacked: 1, wantUpper: true},
		{name: "no-identity", noIdent: true, wantLacked: 2, loads: 1, wantNotKept: ErrNoIdentity},
		{name: "lower-full", lowerFull: true, wantLacked: 2, loads: 1, wantNotKept: errTierFull, wantUpper: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &leaseTier{mapTier: newMapTier(), name: "upper"}
			low := &leaseTier{mapTier: newMapTier(), name: "lower", full: tc.lowerFull}
			if tc.upper {
				up.Put("k", ident, val)
			}
			if tc.lower {
				low.Put("k", ident, val)
			}
			s := NewStore(Options{MaxBytes: 1 << 20, Tiers: []Tier{up, low}})
			defer s.Close()
			var loads int
			w, err := s.Warm(context.Background(), Chunk{
				Key: "k", Size: int64(len(val)),
				Check: func(context.Context, []byte, Trust) error { return nil },
				Load: func(context.Context, *Load) ([]byte, []byte, error) {
					loads++
					if tc.noIdent {
						return val, nil, nil
					}
					return val, ident, nil
				},
			}, tc.dryRun)
			if err != nil {
				t.Fatal(err)
			}
			if w.Served != tc.wantServed || len(w.Lacked) != tc.wantLacked || loads != tc.loads {
				t.Errorf("served %q, lacked %v, %d loads; want %q, %d lacking, %d loads", w.Served, w.Lacked, loads, tc.wantServed, tc.wantLacked, tc.loads)
			}
			if !errors.Is(w.NotKept, tc.wantNotKept) || (tc.wantNotKept == nil) != (w.NotKept == nil) {
				t.Errorf("not kept: %v, want %v", w.NotKept, tc.wantNotKept)
			}
			for _, c := range []struct {
				tier *leaseTier
				want bool
			}{{up, tc.wantUpper}, {low, tc.wantLow}} {
				_, _, got := c.tier.mapTier.Get(context.Background(), "k", int64(len(val)), func([]byte) error { return nil })
				if got != c.want {
					t.Errorf("%s holds the chunk: %v, want %v", c.tier.name, got, c.want)
				}
				if c.tier.taken.Load() != c.tier.released.Load() {
					t.Errorf("%s: %d leases taken, %d ended", c.tier.name, c.tier.taken.Load(), c.tier.released.Load())
				}
			}
		})
	}
}
