package cache

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/volfs/volfs/cache/disk"
)

// Tiers
//
// Below memory the store walks its tiers (Options.Tiers) in order: the disk
// cache (--cache-dir), then any later one (a shared cache of a fleet), then
// the origin. A chunk's load, made by Store.Loader from a Chunk, asks each
// tier for the chunk's key; the first that answers with a value of the
// chunk's size whose identity record the chunk's Check accepts serves it,
// and the value is promoted to the tiers above it. When every tier misses,
// the chunk's Load fetches it from the origin and the value is written to
// every tier. Promotions and writes run behind the load (write-behind): the
// reader gets its bytes as soon as they are found or decoded, and at most
// TierWriters writes per tier run at once; a load that finds them all busy
// waits for one (back-pressure), so that the memory held by pending writes
// stays bounded by TierWriters values per tier.
//
// A tier knows nothing of the others, nor of the source: adding one is one
// type that satisfies Tier.

// Tier is one level of the chunk store between memory and the origin: the
// disk cache, a shared cache. It keeps values under keys, each with the
// identity record of what the value was made from.
//
// Implementations must be safe for concurrent use. A tier never fails a
// read: a fault of its own (a damaged entry, an engine down) is a miss, and
// the tier counts and logs it as it sees fit.
type Tier interface {
	// Name names the tier in metrics and logs ("disk", "redis").
	Name() string
	// Get returns the value kept under key and its identity record, if it
	// has one of exactly size bytes whose record check accepts (nil error).
	// check returns an error wrapping ErrStale when the entry was made
	// from something that has changed since: the tier should then drop
	// it. Get honours ctx. The value returned is not modified by anyone
	// afterwards.
	Get(ctx context.Context, key string, size int64, check func(ident []byte) error) (val, ident []byte, ok bool)
	// Put keeps val under key, made from what ident describes. It is
	// called behind loads (never on a reader's path), must not modify
	// val or ident, must not refer to val once it returns (its memory
	// may then be reused: recycle.go), and bounds its own time.
	Put(key string, ident, val []byte)
}

// repacker is a Tier that may keep an entry in another form than the one
// it writes now (the disk tier, once it keeps plain entries: Disk.KeepPlain):
// Repack reports whether the entry that key's Get just served is one, to
// be written again (Put) behind the load, counted as promoted.
type repacker interface {
	Repack(key string) bool
}

// Releaser is a Tier that holds something for a key from a miss until the
// Put that follows it (a fleet's lease on the key). When no Put follows,
// because the origin's load failed or its value is not to be kept, the
// store calls Release instead, behind the load.
type Releaser interface {
	Release(key string)
}

// Trust is how far a tier's entries are trusted beyond what their identity
// records say: whether one may be served while the origin cannot check it,
// and whether the time its record says it was verified at the origin
// counts. A Chunk's Check is told the trust of the tier it checks for.
type Trust int

const (
	// TrustRecord: any client of the tier could have written the entry
	// (a shared tier without a secret). Its record is checked at the
	// origin before it is served, and never served while the origin is
	// offline.
	TrustRecord Trust = iota
	// TrustOwn: the entry is this machine's own (the disk cache): checked
	// at the origin while it answers, served unchecked while offline.
	TrustOwn
	// TrustSigned: the entry was written by a holder of the fleet's
	// secret (a shared tier with --shared-cache-secret): as TrustOwn, and
	// the time its record says its identities were verified at the origin
	// may stand in for a check (fs: "Verified at").
	TrustSigned
)

// trustOf is the trust of t's entries: its own Trust method's (the disk
// tier's), else TrustSigned for a tier that signs its values (Signed, as
// a shared tier with a secret), else TrustRecord.
func trustOf(t Tier) Trust {
	switch t := t.(type) {
	case interface{ Trust() Trust }:
		return t.Trust()
	case interface{ Signed() bool }:
		if t.Signed() {
			return TrustSigned
		}
	}
	return TrustRecord
}

// ErrStale is what a Chunk's Check returns (wrapped) for an entry made from
// another version of the source: the tier that holds it drops it.
var ErrStale = disk.ErrStale

// TierWriters bounds the writes (promotions and origin loads kept) running
// behind loads, per tier: the values they hold are that many per tier.
const TierWriters = 2

// Chunk is what the store needs to load a chunk through its tiers: how to
// name it in them, what a served entry must be, and how to load it from
// the origin.
type Chunk struct {
	// Key names the chunk in every tier; it must tell apart the chunks
	// of every source that shares a tier (fs: the source, NUL, the key).
	Key string
	// Size is the chunk's decoded size: an entry of another size is a
	// miss.
	Size int64
	// Check accepts (nil) the identity record of an entry before it is
	// served, given the trust of the tier that holds it: an error wrapping ErrStale for an entry made from another
	// version of the source, another error when the source cannot tell
	// (the entry is then kept, and not served). A nil Check keeps the
	// chunk out of the tiers: it is loaded from the origin and kept in
	// memory only.
	Check func(ctx context.Context, ident []byte, trust Trust) error
	// Load loads the chunk from the origin, calling l.CPU before the part
	// of its work that is bound by CPU. It returns the value and the
	// identity record of what it read; a nil record keeps the value in
	// memory only (the source cannot identify what was read).
	Load func(ctx context.Context, l *Load) (val, ident []byte, err error)
	// CPUBound says the whole load, tier lookups included, is bound by
	// CPU (a local source: reading a file is a copy): a prefetch takes
	// its CPU slot before it starts.
	CPUBound bool
}

// Load is one chunk load's handle on the store's CPU slots. It is used by
// the goroutine running the load.
type Load struct {
	s       *Store
	wanted  chan struct{} // closed once a reader waits for the load; nil outside a flight
	release func()        // gives the slot back, once taken
	waited  time.Duration
	own     *owned // what Own declared
}

// CPU bounds the CPU that read-ahead takes. A load calls it before the
// part of its work that is bound by CPU (decoding; for a local source,
// reading too): a load that no reader waits for, a prefetch, then waits
// for one of Options.CPUSlots slots (the cores), so that prefetches decode
// nearest first (the order they were queued in), one per core, instead of
// all the workers' loads sharing the cores and finishing late together,
// each holding its buffers. A load a reader waits for is never held back,
// nor is a prefetch once a reader comes to wait for it. The slot is held
// until the load returns; calls after the first that took it do nothing.
// CPU returns ctx's error if it ends first.
//
// W1 through a mount measured it (docs/PERFORMANCE.md, "Throttle"): 7 to
// 25% less time and 25 MiB less peak memory than letting --workers loads
// decode at once on 2 cores.
func (l *Load) CPU(ctx context.Context) error {
	if l.release != nil || l.wanted == nil {
		return nil
	}
	start := time.Now()
	defer func() { l.waited += time.Since(start) }()
	select {
	case <-l.wanted:
		return nil
	default:
	}
	select {
	case l.s.cpu <- struct{}{}:
		l.s.throttled.Add(1)
		l.release = func() { <-l.s.cpu }
		return nil
	case <-l.wanted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waited returns the time the load spent waiting in CPU.
func (l *Load) Waited() time.Duration { return l.waited }

func (l *Load) done() {
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

// wantedKey keys, in a load's context, the channel closed once a reader
// waits for the load: how Loader's loads learn whether to throttle.
type wantedKey struct{}

// TierStats counts what one tier did for the store.
type TierStats struct {
	Name string
	// Hits and Misses count lookups of the tier.
	Hits, Misses int64
	// Promoted counts values written to the tier that a lower tier
	// served; Kept, values the origin loaded.
	Promoted, Kept int64
	// Waits counts loads that waited for a free writer of the tier.
	Waits int64
}

// tier is a Tier with the store's bookkeeping of it.
type tier struct {
	Tier
	trust                        Trust         // trustOf(Tier)
	slots                        chan struct{} // TierWriters
	hits, misses, promoted, kept atomic.Int64
	waits                        atomic.Int64
}

// Loader returns the load of c through the store's tiers: each tier in
// order, then c.Load; see "Tiers" above. Use it as the Loader of Get,
// GetBatch and Prefetch.
func (s *Store) Loader(c Chunk) Loader {
	return func(ctx context.Context) ([]byte, error) {
		wanted, _ := ctx.Value(wantedKey{}).(chan struct{})
		l := &Load{s: s, wanted: wanted}
		defer l.done()
		if c.CPUBound {
			if err := l.CPU(ctx); err != nil {
				return nil, err
			}
		}
		tiers := s.tiers
		if c.Check == nil {
			tiers = nil
		}
		for i, t := range tiers {
			check := func(ident []byte) error { return c.Check(ctx, ident, t.trust) }
			val, ident, ok := t.Get(ctx, c.Key, c.Size, check)
			if !ok {
				t.misses.Add(1)
				continue
			}
			t.hits.Add(1)
			for _, up := range tiers[:i] {
				s.writeBehind(up, c.Key, ident, val, &up.promoted)
			}
			if r, ok := t.Tier.(repacker); ok && r.Repack(c.Key) {
				s.writeBehind(t, c.Key, ident, val, &t.promoted)
			}
			return val, nil
		}
		val, ident, err := c.Load(ctx, l)
		var own *owned
		if err == nil {
			own = l.owned(val)
		}
		if err != nil || ident == nil {
			s.release(tiers, c.Key)
			s.c.declare(ctx, own)
			return val, err
		}
		for _, t := range tiers {
			s.writeBehindOwned(t, c.Key, ident, val, &t.kept, own)
		}
		s.c.declare(ctx, own)
		return val, nil
	}
}

// writeBehind puts val into t on a goroutine of its own, once one of t's
// writers is free; Close waits for it.
func (s *Store) writeBehind(t *tier, key string, ident, val []byte, count *atomic.Int64) {
	s.writeBehindOwned(t, key, ident, val, count, nil)
}

// writeBehindOwned is writeBehind of a value the load owns (own, or nil):
// the write holds a reference on it until Put returns (recycle.go).
func (s *Store) writeBehindOwned(t *tier, key string, ident, val []byte, count *atomic.Int64, own *owned) {
	select {
	case t.slots <- struct{}{}:
	default:
		t.waits.Add(1)
		t.slots <- struct{}{}
	}
	count.Add(1)
	s.writes.Add(1)
	s.c.ref(own)
	go func() {
		defer s.writes.Done()
		defer func() { <-t.slots }()
		defer s.c.unref(own)
		t.Put(key, ident, val)
	}()
}

// release calls Release, on a goroutine of its own that Close waits for,
// of the tiers that are Releasers.
func (s *Store) release(tiers []*tier, key string) {
	for _, t := range tiers {
		if r, ok := t.Tier.(Releaser); ok {
			s.writes.Add(1)
			go func() {
				defer s.writes.Done()
				r.Release(key)
			}()
		}
	}
}

// TierStats returns the counters of each tier, in order.
func (s *Store) TierStats() []TierStats {
	out := make([]TierStats, len(s.tiers))
	for i, t := range s.tiers {
		out[i] = TierStats{
			Name: t.Name(), Hits: t.hits.Load(), Misses: t.misses.Load(),
			Promoted: t.promoted.Load(), Kept: t.kept.Load(), Waits: t.waits.Load(),
		}
	}
	return out
}

// DiskTier returns the disk cache c as a tier. Values are kept
// zstd-compressed (disk.Cache.PutCompressed): reading one back is several
// times faster than decoding gzip, jpeg or png (BenchmarkDiskHit), and for
// a sharded chunk it also skips the shard and minishard indexes. A failed
// write is counted by the disk cache and otherwise ignored. The tier is a
// prometheus.Collector of the disk cache's counters (disk.NewCollector),
// as the shared tier is of its own, so that whoever holds the tiers
// collects them without knowing which tier is which.
func DiskTier(c *disk.Cache) Tier { return diskTier{c, disk.NewCollector(c), new(atomic.Bool)} }

// Disk is a disk cache as the layers above the store hold it: the cache
// itself, for the values that are not chunks (the metadata, listings and
// absences a keeping source keeps, a warm's hold on what it keeps), and
// its chunk tier (Tier). It lets the tree use a disk cache without
// importing the tier's package.
type Disk struct {
	*disk.Cache
	tier Tier
}

// NewDisk returns c as a Disk; nil for a nil c.
func NewDisk(c *disk.Cache) *Disk {
	if c == nil {
		return nil
	}
	return &Disk{Cache: c, tier: DiskTier(c)}
}

// Tier returns the disk cache as the chunk store's tier (DiskTier).
func (d *Disk) Tier() Tier { return d.tier }

// KeepPlain makes the chunk tier keep chunks from now on as plain entries
// (disk.Cache.PutPlain), whose bytes the kernel can read in volfs's place
// (FUSE passthrough, OpenPlain), rather than zstd-compressed: an entry
// found compressed is written again as plain behind the load that hit it.
// Plain entries take the decoded size on disk: the mount asks for them
// only when it passes them through.
func (d *Disk) KeepPlain() { d.tier.(diskTier).plain.Store(true) }

type diskTier struct {
	c *disk.Cache
	*disk.Collector
	plain *atomic.Bool // KeepPlain was called
}

func (diskTier) Name() string { return "disk" }

// Trust is TrustOwn: the disk cache is this machine's.
func (diskTier) Trust() Trust { return TrustOwn }

func (d diskTier) Get(_ context.Context, key string, size int64, check func([]byte) error) ([]byte, []byte, bool) {
	var ident []byte
	val, ok := d.c.Get(key, size, func(id []byte) error {
		if err := check(id); err != nil {
			return err
		}
		ident = id
		return nil
	})
	return val, ident, ok
}

func (d diskTier) Put(key string, ident, val []byte) {
	if d.plain.Load() {
		_ = d.c.PutPlain(key, ident, val)
		return
	}
	_ = d.c.PutCompressed(key, ident, val)
}

// Repack reports whether the entry of key is compressed while the tier
// keeps plain ones (KeepPlain).
func (d diskTier) Repack(key string) bool { return d.plain.Load() && !d.c.Plain(key) }
