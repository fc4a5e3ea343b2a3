package fs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher/keep"
	"github.com/volfs/volfs/internal/mem"
)

// The version of a chunk's bytes in memory
//
// The chunk store's memory holds a chunk's decoded bytes and nothing of
// where they came from; the tiers below it keep the identity record of
// the load (identity.go). chunkVersions keeps, beside memory, the record
// of each value it holds: the versions of the objects its load read, as
// the tiers' check or the origin load saw them (Tree.loader notes them),
// and when they were last known to be current. Two things use it:
//
//   - A value held longer than Options.MetadataTTL is checked before it is
//     served, as a disk entry is (Tree.current): the objects' identities
//     against what the keeping source knows (free within the TTL, else
//     one Stat per object); a value made from a version the source no
//     longer holds is dropped and the chunk loaded again. With a TTL of 0
//     the source is read as unchanging for the mount's life, and memory
//     is not checked.
//   - A Handle reads one version (Handle.Version) and the FUSE adapter
//     keeps the kernel's page cache of a chunk file across opens only
//     while the version its pages came from is current (Tree.Current).
//
// A value is known by its key and the address of its bytes, so that a
// record is never taken for another load's. The address is kept as a
// number, not a pointer, so that the table never keeps alive a value
// memory has let go; every value of a key enters memory through
// Tree.loader, which records it anew, so an address that a freed value
// had and a new one reuses is never taken for the old one's. A value whose load named no
// identity (an HTTP server without ETag), or whose record was pushed out
// of the table, has a version of its own that no other load shares, and
// is never checked.
//
// maxChunkVersions bounds the table: about 200 bytes each with a chunk
// key and a one-object record; a memory cache of more chunks than this
// (small chunks) finds the oldest without a record, as above.
const maxChunkVersions = 1 << 16

// missingVersion is the version of a chunk that the source does not have.
const missingVersion = "\x00missing"

// chunkVersion is what chunkVersions knows of one value.
type chunkVersion struct {
	data uintptr // the address of the value's bytes (mem.Addr)
	// version names the objects and identities the value was made
	// from ("r" and keep.EncodeFields, without the time of the
	// verification), or, with rec nil, this value alone (a NUL first).
	version string
	rec     []byte    // the identity record to check, nil for none
	checked time.Time // when its identities were last known current
}

// chunkVersions is the table; see "The version of a chunk's bytes in
// memory". Safe for concurrent use.
type chunkVersions struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[string, chunkVersion] // GUARDED_BY(mu); by memKey
	serial uint64                               // GUARDED_BY(mu)
}

func newChunkVersions() *chunkVersions {
	lru, _ := simplelru.NewLRU[string, chunkVersion](maxChunkVersions, nil)
	return &chunkVersions{lru: lru}
}

// loaded records that val, the value of mkey, was made from the objects
// of the identity record rec (nil: unknown), current now. held is the
// value memory holds for mkey as the load ends, if any: when the table's
// record is held's, val is a load that memory will not keep (a flight
// abandoned and redone: the cache keeps the value it holds), and the
// record stays held's. Before, such a load's record replaced the one of
// the value memory kept, which then had none: never checked past the TTL.
func (v *chunkVersions) loaded(mkey string, val, rec, held []byte) {
	if len(val) == 0 {
		return
	}
	cv := chunkVersion{data: mem.Addr(val), rec: rec, checked: time.Now()}
	if objs, ok := keep.DecodeFields(rec); ok && len(objs) > 0 {
		if objs[len(objs)-1].Key == verifiedKey {
			objs = objs[:len(objs)-1]
		}
		if len(objs) > 0 {
			cv.version = "r" + string(keep.EncodeFields(objs))
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.lru.Peek(mkey); ok && len(held) > 0 && old.data == mem.Addr(held) && old.data != cv.data {
		return
	}
	if cv.version == "" {
		cv.rec = nil
		cv.version = v.unique()
	}
	v.lru.Add(mkey, cv)
}

// unique returns a version no other value has.
//
// REQUIRES: v.mu held.
func (v *chunkVersions) unique() string {
	v.serial++
	return "\x00#" + strconv.FormatUint(v.serial, 10)
}

// of returns what is known of val, the value of mkey: its record when
// one was noted for these bytes, else a version of its own, noted for it
// unless the table's record is of held, the value memory holds for mkey
// (val is then a load memory did not keep: see loaded).
func (v *chunkVersions) of(mkey string, val, held []byte) chunkVersion {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.lru.Get(mkey)
	if ok && len(val) > 0 && old.data == mem.Addr(val) {
		return old
	}
	cv := chunkVersion{version: v.unique(), checked: time.Now()}
	if len(val) > 0 && !(ok && len(held) > 0 && old.data == mem.Addr(held)) {
		cv.data = mem.Addr(val)
		v.lru.Add(mkey, cv)
	}
	return cv
}

// versionOf is chunkVersions.of of val, the value of mkey, with what
// memory holds for mkey now.
func (t *Tree) versionOf(mkey string, val []byte) chunkVersion {
	held, _, _ := t.store.Cache().Peek(mkey)
	return t.vers.of(mkey, val, held)
}

// checkedNow records that val's identities were found current now.
func (v *chunkVersions) checkedNow(mkey string, val []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cv, ok := v.lru.Peek(mkey); ok && cv.data == mem.Addr(val) {
		cv.checked = time.Now()
		v.lru.Add(mkey, cv)
	}
}

// identSlot carries the identity record of a load (Tree.loader) from the
// tiers' check or the origin load, which see it, to the Loader that
// returns the value, which does not.
type identSlot struct {
	mu  sync.Mutex
	rec []byte
}

type identSlotKey struct{}

// noteIdent notes rec as the record of the load running under ctx, if
// any slot waits for it.
func noteIdent(ctx context.Context, rec []byte) {
	if s, ok := ctx.Value(identSlotKey{}).(*identSlot); ok {
		s.mu.Lock()
		s.rec = rec
		s.mu.Unlock()
	}
}

// wantsIdent reports whether a load under ctx has its identity record
// noted (versioned).
func wantsIdent(ctx context.Context) bool {
	_, ok := ctx.Value(identSlotKey{}).(*identSlot)
	return ok
}

// versioned is load, the load of the chunk whose memKey is mkey, with the
// identity record of each value it returns noted in t.vers.
func (t *Tree) versioned(mkey string, load cache.Loader) cache.Loader {
	return func(ctx context.Context) ([]byte, error) {
		s := new(identSlot)
		b, err := load(context.WithValue(ctx, identSlotKey{}, s))
		if err == nil {
			s.mu.Lock()
			rec := s.rec
			s.mu.Unlock()
			held, _, _ := t.store.Cache().Peek(mkey)
			t.vers.loaded(mkey, b, rec, held)
		}
		return b, err
	}
}

// stale reports whether cv, of a value held in memory, must be checked
// before it is served and was found made from a version the source no
// longer holds (see "The version of a chunk's bytes in memory"). An
// origin that cannot tell is taken as "not stale": memory serves what it
// holds, as it did before any check.
func (t *Tree) stale(ctx context.Context, mkey string, val []byte, cv chunkVersion) bool {
	ttl := t.opts.MetadataTTL
	if ttl <= 0 || cv.rec == nil || time.Since(cv.checked) < ttl {
		return false
	}
	err := t.ids.check(ctx, cv.rec, cache.TrustOwn)
	if err == nil {
		t.vers.checkedNow(mkey, val)
	}
	return errors.Is(err, cache.ErrStale)
}

// current returns the chunk's decoded bytes and their version: from
// memory when it holds a value that is current (stale), else loaded
// again. They are taken with a count (cache.Store.Acquire): hold, never
// nil, must be released once the caller no longer refers to them (on
// error it holds nothing). hit reports whether the first look found the
// chunk in memory, for read-ahead.
func (f *chunkFile) current(ctx context.Context) (b []byte, version string, hit bool, hold *cache.Hold, err error) {
	b, hold, hit, err = f.t.store.Acquire(ctx, f.mkey, f.loader())
	if err == nil {
		cv := f.t.versionOf(f.mkey, b)
		if !f.t.stale(ctx, f.mkey, b, cv) {
			return b, cv.version, hit, hold, nil
		}
		hold.Release()
		f.t.store.Cache().Remove(f.mkey)
		b, hold, _, err = f.t.store.Acquire(ctx, f.mkey, f.loader())
	}
	switch {
	case isMissing(err):
		return nil, missingVersion, hit, hold, err
	case err != nil:
		return nil, "", hit, hold, err
	}
	return b, f.t.versionOf(f.mkey, b).version, hit, hold, nil
}

// Current reports whether a handle of f opened now would read version v
// of it (Handle.Version), as far as the tree can tell without loading
// it: what memory holds for the chunk, and, with nothing there, whether
// the objects v was made from are current (free within
// Options.MetadataTTL, else one Stat each). The FUSE adapter keeps the
// kernel's cached pages of a chunk file across an open only when they
// came from a version that is current. With a TTL of 0, a version memory
// does not hold (an identity, or missing) is taken as current without
// asking the origin. A file
// that is not a chunk has no version: always true.
func (t *Tree) Current(ctx context.Context, f File, v string) bool {
	c, ok := f.(*chunkFile)
	if !ok {
		return true
	}
	return t.currentKey(ctx, c.mkey, v)
}

// currentKey is Current of the chunk whose memKey is mkey.
func (t *Tree) currentKey(ctx context.Context, mkey, v string) bool {
	val, ok, err := t.store.Cache().Peek(mkey)
	switch {
	case ok && err != nil:
		return v == missingVersion && isMissing(err)
	case ok:
		cv := t.vers.of(mkey, val, val)
		return cv.version == v && !t.stale(ctx, mkey, val, cv)
	case t.opts.MetadataTTL <= 0 && (v == missingVersion || strings.HasPrefix(v, "r")):
		// The source reads as unchanging for the mount's life: no
		// Stat for an identity the keeping source has let go, nor for
		// a chunk found missing. A load that finds another version
		// fails the read (fs/fuse's pages, ChunkRecord).
		return true
	case !strings.HasPrefix(v, "r"):
		// A chunk missing, or a version no load can make again.
		return false
	}
	return t.ids.check(ctx, []byte(v[1:]), cache.TrustOwn) == nil
}
