package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Warming
//
// Store.Warm is the tier walk of a warm (`volfs warm`): the tiers of a
// read (Store.Loader), in the same order, with the same bookkeeping (hits,
// misses, promotions, values kept, a fleet's lease taken on a miss and
// released by the write that follows it or by Release), to another end: a
// read stops at the first tier that holds the chunk, a warm leaves the
// chunk in every tier. It asks every tier; the first that holds the chunk
// serves it (else the origin does), and the value is written to each tier
// that lacked it, above or below the one that served it. The writes take
// the tiers' writer slots as a read's do, but the warm waits for them,
// through Keeper where a tier implements it, so that it can report the
// chunks a tier did not keep and why. The memory tier is left out: it is
// the warming process's own, and a warm visits each chunk once.

// Keeper is a Tier whose writes say whether they kept the value: Keep is
// Put that returns why not (a full disk cache, a value above an engine's
// limit, an engine down). Store.Warm prefers it to Put.
type Keeper interface {
	Keep(key string, ident, val []byte) error
}

// ErrNoIdentity is the reason a chunk loaded from the origin is kept in no
// tier: the source did not identify the objects it was made from (no
// ETag, generation or modification time), so no kept copy could ever be
// checked against the source.
var ErrNoIdentity = errors.New("cache: the source does not identify the chunk's objects (no ETag, generation or modification time), so no tier keeps it")

// Warmed is what Store.Warm did with one chunk.
type Warmed struct {
	// Served names the tier that served the chunk; "" when the origin
	// did, or nothing did (a dry run, a failed load).
	Served string
	// Lacked names the tiers that did not hold the chunk, in order: a
	// warm wrote it to each (see NotKept), a dry run would.
	Lacked []string
	// NotKept is nil when every tier holds the chunk after the warm;
	// otherwise it says, per tier, why one does not (it wraps
	// ErrNoIdentity, disk.ErrFull, or a tier's own error).
	NotKept error
}

// Warm walks c through every tier and, unless dryRun, leaves it in each;
// see "Warming". It returns the load's error when no tier held the chunk
// and the origin's load failed (a stable one, such as not found,
// included: the chunk is then kept nowhere). A dry run loads and writes
// nothing.
func (s *Store) Warm(ctx context.Context, c Chunk, dryRun bool) (Warmed, error) {
	var w Warmed
	wanted, _ := ctx.Value(wantedKey{}).(chan struct{})
	l := &Load{s: s, wanted: wanted}
	defer l.done()
	tiers := s.tiers
	if c.Check == nil {
		tiers = nil
	}
	var (
		val, ident []byte
		lacked     []*tier
	)
	for _, t := range tiers {
		check := func(id []byte) error { return c.Check(ctx, id, t.trust) }
		v, id, ok := t.Get(ctx, c.Key, c.Size, check)
		if !ok {
			t.misses.Add(1)
			lacked = append(lacked, t)
			w.Lacked = append(w.Lacked, t.Name())
			continue
		}
		t.hits.Add(1)
		if val == nil {
			val, ident, w.Served = v, id, t.Name()
		}
	}
	if len(lacked) == 0 && c.Check != nil {
		return w, nil
	}
	if dryRun {
		s.releaseNow(lacked, c.Key)
		return w, nil
	}
	count := func(t *tier) *atomic.Int64 { return &t.promoted }
	if val == nil {
		var err error
		val, ident, err = c.Load(ctx, l)
		if err != nil {
			s.releaseNow(lacked, c.Key)
			return w, err
		}
		if ident == nil || c.Check == nil {
			s.releaseNow(lacked, c.Key)
			w.NotKept = ErrNoIdentity
			return w, nil
		}
		count = func(t *tier) *atomic.Int64 { return &t.kept }
	}
	var errs []error
	for _, t := range lacked {
		if err := s.keep(t, c.Key, ident, val, count(t)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.Name(), err))
		}
	}
	w.NotKept = errors.Join(errs...)
	return w, nil
}

// keep writes val into t as writeBehind does, one of t's writers at
// most, but on the calling goroutine, and returns the tier's error when
// it is a Keeper.
func (s *Store) keep(t *tier, key string, ident, val []byte, count *atomic.Int64) error {
	select {
	case t.slots <- struct{}{}:
	default:
		t.waits.Add(1)
		t.slots <- struct{}{}
	}
	defer func() { <-t.slots }()
	count.Add(1)
	if k, ok := t.Tier.(Keeper); ok {
		if err := k.Keep(key, ident, val); err != nil {
			count.Add(-1)
			return err
		}
		return nil
	}
	t.Put(key, ident, val)
	return nil
}

// releaseNow calls Release of the tiers that are Releasers, on the calling
// goroutine.
func (s *Store) releaseNow(tiers []*tier, key string) {
	for _, t := range tiers {
		if r, ok := t.Tier.(Releaser); ok {
			r.Release(key)
		}
	}
}

func (d diskTier) Keep(key string, ident, val []byte) error {
	return d.c.PutCompressed(key, ident, val)
}
