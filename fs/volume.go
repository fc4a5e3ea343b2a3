package fs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sync/atomic"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
	"github.com/volfs/volfs/internal/mem"
)

// OrigSuffix names the original metadata file beside the rewritten one
// ("info.orig" beside "info").
const OrigSuffix = ".orig"

// errChunkMissing is what the load of a chunk that the source does not
// have returns, the same value for every chunk, so that the many a scan of
// a sparse volume keeps cost no memory each. The chunk file names the key
// where it reports one.
var errChunkMissing = fmt.Errorf("fs: chunk missing: %w", fetcher.ErrNotExist)

// errChunkMissingKept is errChunkMissing as a kept absence answered it
// while the origin is offline: it reads as missing, but is not kept by the
// chunk store (isStableMissing), so that the origin answers again once it
// is back.
var errChunkMissingKept = fmt.Errorf("fs: chunk missing: %w (%w)", fetcher.ErrNotExist, keep.ErrKept)

// volumeDir is a directory that holds a volume: its rewritten metadata, the
// original metadata, one key directory per array (or the chunk keys of an
// array that is the directory itself, as in zarr and N5), and everything
// else passed through from rest.
type volumeDir struct {
	t      *Tree
	vol    *decode.Volume
	arrays map[string]*keyDir // by Array.Name; "" is the directory itself
	rest   *sourceDir         // the same directory as the source shows it
	// meta holds the metadata files shown by name: vol's rewritten and
	// original, and those of other formats in the directory (openDir).
	meta map[string][]byte
	// hidden are names of the source's objects that are not shown:
	// metadata that does not describe the chunks served.
	hidden map[string]bool
}

func newVolumeDir(t *Tree, vol *decode.Volume, rest *sourceDir) *volumeDir {
	d := &volumeDir{t: t, vol: vol, arrays: make(map[string]*keyDir), rest: rest, hidden: map[string]bool{},
		meta: map[string][]byte{vol.MetaName: vol.Rewritten, vol.MetaName + OrigSuffix: vol.Original}}
	rest.ann.mu.Lock()
	rest.ann.done = true // a volume's info is not an annotation info
	rest.ann.mu.Unlock()
	for _, a := range vol.Arrays {
		d.arrays[a.Name] = &keyDir{t: t, a: a, node: a.KeyRoot(), key: a.Key, views: t.newViews(a)}
	}
	return d
}

func (d *volumeDir) IsDir() bool { return true }

func (d *volumeDir) Lookup(ctx context.Context, name string) (Node, error) {
	if b, ok := d.meta[name]; ok {
		return bytesFile(b), nil
	}
	if d.hidden[name] {
		return nil, fmt.Errorf("fs: %s: metadata that does not describe the chunks served: %w", path.Join(d.vol.Dir, name), fetcher.ErrNotExist)
	}
	if a, ok := d.arrays[name]; ok && name != "" {
		return a, nil
	}
	if dir, ok := d.objectViews()[name]; ok {
		return d.objectView(ctx, name, dir)
	}
	if self, ok := d.arrays[""]; ok {
		if n, err := self.Lookup(ctx, name); err == nil {
			return n, nil
		}
	}
	return d.rest.Lookup(ctx, name)
}

// List shows the metadata files and arrays (or, for an array that is the
// directory itself, its chunk keys) first, then whatever else the source
// lists in the directory. A source that cannot list shows only the former.
func (d *volumeDir) List(ctx context.Context) (Listing, error) {
	var own []fetcher.Entry
	taken := maps.Clone(d.hidden)
	for _, name := range slices.Sorted(maps.Keys(d.meta)) {
		own = append(own, fetcher.Entry{Name: name})
		taken[name] = true
	}
	for _, a := range d.vol.Arrays {
		if a.Name != "" {
			own = append(own, fetcher.Entry{Name: a.Name, IsDir: true})
			taken[a.Name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.objectViews())) {
		own = append(own, fetcher.Entry{Name: name, IsDir: true})
		taken[name] = true
	}
	self, hasSelf := d.arrays[""]
	if hasSelf {
		for _, e := range self.views.entries() {
			taken[e.Name] = true // the views win over an object of the same name
		}
	}
	rest, err := d.rest.List(ctx)
	if err != nil {
		return nil, err
	}
	var after []fetcher.Entry
	for i := range rest.Len() {
		name, isDir := rest.Entry(i)
		if taken[name] {
			continue
		}
		if hasSelf {
			if _, _, ok := self.a.KeyLookup(self.node, name); ok {
				continue // listed with the generated keys
			}
		}
		after = append(after, fetcher.Entry{Name: name, IsDir: isDir})
	}
	l := concatListing{entryListing(own)}
	if hasSelf {
		l = append(l, self.listing())
	}
	return append(l, entryListing(after)), nil
}

// keyDir is a directory of an array's chunk-key tree: the array's own
// directory, or one named by leading elements of nested keys ("c/1").
// It lists every key of the grid below it, computed from the metadata
// without touching the source.
type keyDir struct {
	t    *Tree
	a    *decode.Array
	node decode.KeyDir
	key  string // the directory's key, for error messages
	// views are the array's stitched views, shown in its root key
	// directory only; nil elsewhere and for an array without views.
	views *arrayViews
}

func (d *keyDir) IsDir() bool { return true }

func (d *keyDir) Lookup(_ context.Context, name string) (Node, error) {
	if n, ok := d.views.lookup(name); ok {
		return n, nil
	}
	sub, c, ok := d.a.KeyLookup(d.node, name)
	switch {
	case !ok:
		return nil, fmt.Errorf("fs: %s: not a chunk key of the grid: %w", path.Join(d.key, name), fetcher.ErrNotExist)
	case c == nil:
		return &keyDir{t: d.t, a: d.a, node: sub, key: path.Join(d.key, name)}, nil
	}
	key := d.a.ChunkKey(c)
	return &chunkFile{t: d.t, a: d.a, c: c, key: key, mkey: memKey(d.a, key), size: d.a.ChunkSize(c), dir: d, name: name}, nil
}

func (d *keyDir) List(context.Context) (Listing, error) { return d.listing(), nil }

// listing is the views, if any, then the chunk keys.
func (d *keyDir) listing() Listing {
	if d.views == nil {
		return keyListing{d.a, d.node}
	}
	return concatListing{entryListing(d.views.entries()), keyListing{d.a, d.node}}
}

// keyListing generates the entries of a key directory as they are read.
type keyListing struct {
	a    *decode.Array
	node decode.KeyDir
}

func (l keyListing) Len() int64                   { return l.a.KeyLen(l.node) }
func (l keyListing) Entry(i int64) (string, bool) { return l.a.KeyEntry(l.node, i) }

// concatListing lists its parts one after another.
type concatListing []Listing

func (l concatListing) Len() int64 {
	n := int64(0)
	for _, p := range l {
		n += p.Len()
	}
	return n
}

func (l concatListing) Entry(i int64) (string, bool) {
	for _, p := range l {
		if i < p.Len() {
			return p.Entry(i)
		}
		i -= p.Len()
	}
	panic("fs: listing index out of range")
}

// chunk returns the decoded bytes of the chunk through the chunk store. A
// chunk the source does not have is an error for which isMissing holds.
func (f *chunkFile) chunk(ctx context.Context) ([]byte, error) {
	return f.t.store.Get(ctx, f.mkey, f.loader())
}

// loader returns the chunk's load, made on first use.
func (f *chunkFile) loader() cache.Loader {
	if l := f.load.Load(); l != nil {
		return *l
	}
	l := f.t.loader(f.a, f.key, f.c)
	f.load.CompareAndSwap(nil, &l)
	return *f.load.Load()
}

// pinnedChunk returns the decoded bytes of the chunk as read from version
// id of its object, or an error wrapping fetcher.ErrChanged once the
// object is of another version or none (pinnedLoader).
func (f *chunkFile) pinnedChunk(ctx context.Context, id fetcher.Identity) ([]byte, error) {
	return f.t.store.Get(ctx, pinnedKey(f.mkey, id), f.t.pinnedLoader(f.a, f.key, f.c, id))
}

// loader returns the load of the chunk at c of a, whose key is key, through
// the chunk store's tiers (cache.Store.Loader): the tree supplies the
// chunk's name in the tiers (tierKey), its size, the check of an entry's
// identity record and the load from the origin. It runs on whichever
// goroutine the store gives it (the reader's, or a worker of the pool for
// batches and prefetches), under the read deadline.
//
// A tier's entry is served when it is of the chunk's size and made from
// the versions of the source objects that the source still holds
// (identities.check: compared with what this mount learnt within
// --metadata-ttl, else with one Stat per object); anything else falls
// through to the next tier and then to the origin. Every chunk loaded from
// the origin is kept in the tiers in decoded form, whatever its codec, with
// the identity record of the objects it read; a missing chunk is not, nor
// one whose objects the source does not identify (identities.record).
//
// A prefetch takes its CPU slot (cache.Load.CPU) for the part of its load
// that is bound by CPU: all of it from a local source (reading a file is a
// copy), and from a remote one everything after the bytes arrive (removing
// transport gzip, decoding), so that fetches overlap freely while decodes
// go one per core, nearest first.
func (t *Tree) loader(a *decode.Array, key string, c []int64) cache.Loader {
	return t.versioned(memKey(a, key), t.bounded(t.watched(a, t.store.Loader(t.tierChunk(a, key, c)))))
}

// bounded is load under the read deadline, on whichever goroutine runs it.
func (t *Tree) bounded(load cache.Loader) cache.Loader {
	return func(ctx context.Context) ([]byte, error) {
		lctx, cancel := t.readContext(ctx)
		defer cancel()
		b, err := load(lctx)
		return b, t.readError(ctx, lctx, err)
	}
}

// pinnedLoader returns the load of the chunk at c of a, whose key is key,
// from the version id of its object and from no other: loader's origin
// load (load) with the object pinned to id before it starts, each reply
// held to naming id (a reply that names no version proves nothing), and
// the object found missing or of another version an error wrapping
// fetcher.ErrChanged (ESTALE), at once, with no second attempt. It reads
// and fills no tier below memory. A handle whose window of ranged parts
// served bytes of id reads the rest of the chunk with it (Handle.readPinned),
// under pinnedKey in the chunk store's memory: handles pinned to one
// version share one load, and its bytes count against the memory budget
// as any chunk's.
func (t *Tree) pinnedLoader(a *decode.Array, key string, c []int64, id fetcher.Identity) cache.Loader {
	return t.bounded(t.watched(a, t.store.Loader(cache.Chunk{
		Size:     a.ChunkSize(c),
		CPUBound: t.local,
		Load: func(ctx context.Context, l *cache.Load) ([]byte, []byte, error) {
			b, _, err := t.load(ctx, l, a, key, c, id)
			return b, nil, err
		},
	})))
}

// pinnedKey names, in the chunk store's memory, the chunk whose memKey is
// mkey as read from version id of its object (pinnedLoader): never the
// name of a chunk, whose keys hold no NUL.
func pinnedKey(mkey string, id fetcher.Identity) string { return mkey + "\x00" + string(id) }

// tierChunk is the chunk at c of a, whose key is key, as the chunk store's
// tiers see it: what a read (loader) and a warm (warmChunk) both walk.
func (t *Tree) tierChunk(a *decode.Array, key string, c []int64) cache.Chunk {
	return cache.Chunk{
		Key:  t.tierKey(a, key),
		Size: a.ChunkSize(c),
		Check: func(ctx context.Context, rec []byte, trust cache.Trust) error {
			err := t.ids.check(ctx, rec, trust)
			if err == nil {
				noteIdent(ctx, rec) // the version served (chunkversion.go)
			}
			return err
		},
		CPUBound: t.local,
		Load: func(ctx context.Context, l *cache.Load) ([]byte, []byte, error) {
			b, rec, err := t.load(ctx, l, a, key, c, "")
			noteIdent(ctx, rec)
			return b, rec, err
		},
	}
}

// load loads the chunk at c of a from the origin: the body of loader's
// origin load. It returns the chunk's bytes and, when they can be kept
// in the tiers, the identity record of the objects it read.
//
// Every object the load reads is pinned to the first version it sees of
// it (treeSource.pin), memoised indexes included. A load that meets a
// second version (a shard rewritten between its index and its chunk, or
// an index memoised from a version the object no longer is) drops the
// memos it used and runs once more from the start; a second change
// answers ESTALE (an error wrapping fetcher.ErrChanged). A reader so gets
// the chunk of the old version, of the new one, or an error, never bytes
// that mix them.
//
// With pin known, the chunk's object is pinned to that version before
// the load starts, strictly (treeSource.strict): the load of pinnedLoader.
func (t *Tree) load(ctx context.Context, l *cache.Load, a *decode.Array, key string, c []int64, pin fetcher.Identity) ([]byte, []byte, error) {
	for attempt := 1; ; attempt++ {
		src := &treeSource{t: t, last: key, l: l, recipe: a.Recipe(), began: time.Now()}
		if pin.Known() {
			src.pinned = map[string]fetcher.Identity{key: pin}
			src.strict = key
		}
		b, rec, err := t.loadOnce(ctx, src, a, key, c)
		if !errors.Is(err, fetcher.ErrChanged) {
			return b, rec, err
		}
		for _, m := range src.memos {
			t.memo.Remove(m)
		}
		if attempt == 2 || pin.Known() {
			// A version pinned from outside is gone: a second attempt
			// would find the same.
			return nil, nil, err
		}
		t.log.Debug("an object changed while a chunk was loaded: loading it again", "chunk", key, "err", err)
	}
}

// loadOnce is one attempt of load, through src.
func (t *Tree) loadOnce(ctx context.Context, src *treeSource, a *decode.Array, key string, c []int64) ([]byte, []byte, error) {
	l := src.l
	// The clock starts here: a wait for the slot before it (a local
	// source's) is not part of the time, so it is not taken off it.
	waited := l.Waited()
	start := time.Now()
	stored, err := a.Fetch(ctx, src, c)
	if isMissing(err) && src.strict != "" {
		// The version pinned was there: gone now, the chunk changed.
		err = &errChanged{src.strict, src.pinned[src.strict], absent}
	}
	if err == nil {
		err = l.CPU(ctx)
	}
	var b []byte
	var recycle func()
	if err == nil {
		b, recycle, err = a.DecodeOwned(src, stored, c)
	}
	t.loads.observe(a.Encoding, time.Since(start)-(l.Waited()-waited), err)
	if isMissing(err) && errors.Is(err, keep.ErrKept) {
		return nil, nil, errChunkMissingKept
	}
	if isMissing(err) {
		// Kept by the cache for every hole of a sparse volume: one
		// shared error, not the fetcher's of each chunk.
		return nil, nil, errChunkMissing
	}
	if errors.Is(err, fetcher.ErrNotRegular) {
		// Not wrapped: the error must not read as ENOENT, but as EIO
		// with its line.
		return nil, nil, fmt.Errorf("%s/%s: %v", t.src, src.last, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s/%s: %w", t.src, src.last, err)
	}
	l.Own(b, recycle) // given back once the cache and its readers are done with it
	if len(t.tiers) == 0 && (!wantsIdent(ctx) || slices.ContainsFunc(src.seen, func(o seen) bool { return !o.ID.Known() })) {
		// No tier keeps it, and memory (chunkversion.go) needs no
		// record, or cannot have one: record's warning is the tiers'.
		return b, nil, nil
	}
	rec, ok := t.ids.record(src.seen, src.verified())
	if !ok {
		return b, nil, nil
	}
	return b, rec, nil
}

// tierKey names a chunk of a in the store's tiers below memory: the
// source (fetcher.CacheName: an s3:// source with its endpoint), the array's recipe (decode.Array.Recipe) and the chunk's key, so
// that one cache directory or shared engine can serve several sources,
// and an entry decoded under other metadata (a filter or codec edited
// between mounts) is never found.
func (t *Tree) tierKey(a *decode.Array, key string) string {
	return fetcher.CacheName(t.src) + "\x00" + a.Recipe() + "\x00" + key
}

// memKey names the chunk at key of a in the chunk store's memory: the
// array's recipe, then the key, so that a volume whose metadata changed
// during the mount never reads chunks decoded under the old one.
func memKey(a *decode.Array, key string) string { return a.Recipe() + "/" + key }

// treeSource is the decode.Source of one chunk load: the tree's fetcher,
// with transport gzip removed, and its memo cache. It records the identity
// of every object the load reads, memoised reads included, and pins each
// object to the first version it saw of it: a request for an object
// already seen carries that version as a precondition
// (fetcher.WithVersion), and a read or memo of another version fails with
// an error wrapping fetcher.ErrChanged. It is used by one goroutine.
type treeSource struct {
	t      *Tree
	seen   []seen                      // the objects read, with their identities
	pinned map[string]fetcher.Identity // the version each object is pinned to
	memos  []string                    // the memo keys used, to drop on a change
	last   string                      // the key of the object fetched last, for error messages
	l      *cache.Load                 // the load's CPU slot
	recipe string                      // the array's recipe, part of every memo key
	began  time.Time                   // when the load began
	asked  map[string]bool             // the objects this load asked the origin about
	// strict is the key of an object pinned before the load began (Tree.load
	// with a pin): a reply for it that names no version fails as a change,
	// since bytes of the pinned version were served before this load, and
	// its Get is a ranged read of its plain form (getStrict).
	strict string
}

// ask records that the load asked the origin about key itself (not a memo).
func (s *treeSource) ask(key string) {
	if s.asked == nil {
		s.asked = make(map[string]bool, 2)
	}
	s.asked[key] = true
}

// verified returns when every object the load read was verified at the
// origin: when the load began, if it asked the origin about each of them
// (a memoised index's object was verified when the memo was made, so a
// load that read one without asking the origin about its object again
// returns the zero time: its record carries no verification).
func (s *treeSource) verified() time.Time {
	for _, o := range s.seen {
		if !s.asked[o.Key] {
			return time.Time{}
		}
	}
	return s.began
}

// errChanged is the error of a load that saw two versions of one object.
type errChanged struct {
	key      string
	was, now fetcher.Identity
}

func (e *errChanged) Error() string {
	now := string(e.now)
	if !e.now.Known() {
		now = "a reply that names no version"
	}
	return fmt.Sprintf("fs: %s changed while a chunk was read from it (%s, then %s)", e.key, e.was, now)
}

func (e *errChanged) Unwrap() error { return fetcher.ErrChanged }

// pin returns ctx pinned to the version of key this load saw first, if
// it saw one.
func (s *treeSource) pin(ctx context.Context, key string) context.Context {
	if id, ok := s.pinned[key]; ok && id != absent {
		return fetcher.WithVersion(ctx, key, id)
	}
	return ctx
}

func (s *treeSource) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	if key == s.strict {
		return s.getStrict(ctx, key, limit)
	}
	obj, objKey, err := s.t.fetchBy(s.pin(ctx, key), key, limit, s.t.getChunk)
	s.last = objKey
	if err != nil {
		return nil, err
	}
	s.ask(objKey)
	if objKey != key {
		// Read from the ".gz" sibling: the plain key appearing would
		// change what the chunk reads.
		s.ask(key)
		err = s.saw(key, absent)
	}
	if err == nil {
		err = s.saw(objKey, obj.ID)
	}
	if err != nil {
		mem.Put(obj.Data)
		return nil, err
	}
	gz, err := decode.TransportGzip(obj.ContentEncoding, objKey)
	if err != nil {
		mem.Put(obj.Data)
		return nil, err
	}
	if !gz {
		return obj.Data, nil
	}
	// Removing transport gzip is decoding: a prefetch does it in its
	// slot. The object goes back to the pool either way, since Gunzip
	// decodes into a buffer of its own.
	defer mem.Put(obj.Data)
	if err := s.l.CPU(ctx); err != nil {
		return nil, err
	}
	return decode.Gunzip(obj.Data, 0, int(limit))
}

// getStrict is Get of the object pinned before the load began (strict):
// its plain form, read as the ranged replies that proved the version were
// (GetRange, which asks for no transport encoding). A server may name its
// gzip form's version another way, or not at all (nginx's gzip_static
// tags the .gz file; older nginx and Apache with DeflateAlterETag Remove
// drop the tag): such a reply would prove nothing, and an object that had
// not changed would read as ESTALE. Its ".gz" sibling is never read: the
// plain object was there.
func (s *treeSource) getStrict(ctx context.Context, key string, limit int64) ([]byte, error) {
	b, err := s.GetRange(ctx, key, 0, min(limit, math.MaxInt64-1)+1)
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than %d bytes: %w", key, limit, fetcher.ErrTooLarge)
	}
	if err != nil {
		return nil, err
	}
	if o, ok := s.t.src.(fetcher.OwnedRanger); !ok || !o.RangesOwned() {
		// Get's bytes are the load's to give back (Release); these
		// may be the source's own.
		c := mem.Get(len(b))
		copy(c, b)
		b = c
	}
	return b, nil
}

// Release gives b, which Get returned and nobody refers to any more, back
// to the pool that fetchers read objects into.
func (s *treeSource) Release(b []byte) { mem.Put(b) }

func (s *treeSource) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.last = key
	b, id, err := s.t.origin.GetRange(s.pin(ctx, key), key, off, n)
	if err != nil {
		return nil, err
	}
	s.ask(key)
	if err := s.saw(key, id); err != nil {
		return nil, err
	}
	return b, nil
}

// Stat reads the size of the object at key (a shard whose index sits at
// its end), and records the version it saw.
func (s *treeSource) Stat(ctx context.Context, key string) (int64, error) {
	s.last = key
	n, id, err := s.t.origin.Stat(ctx, key)
	if err == nil {
		s.ask(key)
		err = s.saw(key, id)
	}
	return n, err
}

// saw records that the load read the version id of the object at key,
// and tells the tree's identities. It fails with an *errChanged when the
// load saw another version of the object before.
func (s *treeSource) saw(key string, id fetcher.Identity) error {
	if err := s.pinTo(key, id); err != nil || !id.Known() {
		return err
	}
	s.t.ids.learn(key, id)
	return nil
}

// pinTo is saw without telling the tree's identities: for an identity the
// load did not read now but replays from a memo's record, which may be
// older than one the tree has learnt since (that one must stand, so that
// what was made from the old version is found stale).
func (s *treeSource) pinTo(key string, id fetcher.Identity) error {
	if !id.Known() && key == s.strict {
		return &errChanged{key, s.pinned[key], id}
	}
	if !id.Known() {
		s.seen = append(s.seen, seen{Key: key, ID: id})
		return nil
	}
	if was, ok := s.pinned[key]; ok && was != id {
		return &errChanged{key, was, id}
	}
	if s.pinned == nil {
		s.pinned = make(map[string]fetcher.Identity, 2)
	}
	s.pinned[key] = id
	s.seen = append(s.seen, seen{Key: key, ID: id})
	return nil
}

// Memo keeps, with each value, the identity record of the objects its
// load read, and records them in every load that uses the value: a chunk
// read with a memoised shard index is made from the index's version too,
// and a memo made from another version of an object than the load reads
// fails it (saw), so that load drops it. Each stored value is the
// record's length (4 bytes), the record, then the value, which Memo
// returns. The memo key is the array's recipe, then key: an index is
// parsed as the metadata says.
func (s *treeSource) Memo(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error) {
	key = s.recipe + "/" + key
	s.memos = append(s.memos, key)
	stored, err := s.t.memo.Get(ctx, key, func(ctx context.Context) ([]byte, error) {
		mark := len(s.seen)
		b, err := load(ctx)
		if err != nil {
			return nil, err
		}
		rec := keep.EncodeFields(s.seen[mark:])
		stored := make([]byte, 4, 4+len(rec)+len(b))
		binary.LittleEndian.PutUint32(stored, uint32(len(rec)))
		return append(append(stored, rec...), b...), nil
	})
	if err != nil {
		return nil, err
	}
	if len(stored) < 4 || uint64(len(stored)-4) < uint64(binary.LittleEndian.Uint32(stored)) {
		return nil, fmt.Errorf("fs: memo %s: malformed", key)
	}
	n := 4 + int(binary.LittleEndian.Uint32(stored))
	objs, ok := keep.DecodeFields(stored[4:n])
	if !ok {
		return nil, fmt.Errorf("fs: memo %s: malformed identity record", key)
	}
	for _, o := range objs {
		if err := s.pinTo(o.Key, o.ID); err != nil {
			return nil, err
		}
	}
	return stored[n:], nil
}

// chunkFile is one chunk key of a grid, shown decoded.
type chunkFile struct {
	t    *Tree
	a    *decode.Array
	c    []int64
	key  string // the chunk's key, made once rather than at every read
	mkey string // its name in the chunk store's memory (memKey)
	size int64
	dir  *keyDir // the key directory that holds it, for read-ahead
	name string  // its name in dir
	// load fetches and decodes the chunk (loader): made at the first read
	// rather than at lookup, which a listing's READDIRPLUS or serve's
	// PROPFIND does for every entry (three quarters of a lookup's
	// allocations were the loader's), and kept, so that a read served
	// from memory allocates nothing for it.
	load atomic.Pointer[cache.Loader]
	// parts is the window of ranged parts a large verbatim chunk was last
	// opened in (chunkparts.go), or nil.
	parts atomic.Pointer[objectFile]
}

func (f *chunkFile) IsDir() bool { return false }
func (f *chunkFile) Size() int64 { return f.size }

// open reports a missing chunk as not found when the tree is set to.
func (f *chunkFile) open(ctx context.Context) error {
	if f.t.opts.Missing != MissingError {
		return nil
	}
	_, err := f.chunk(ctx)
	if err != nil && !isMissing(err) {
		return nil // other failures surface at read, for that byte range
	}
	if err != nil {
		return fmt.Errorf("fs: %s: %w", f.key, fetcher.ErrNotExist)
	}
	return nil
}

func (f *chunkFile) slice(ctx context.Context, off, n int64) ([]byte, error) {
	if off >= f.size {
		return nil, nil
	}
	n = min(n, f.size-off)
	b, err := f.chunk(ctx)
	if isMissing(err) && f.t.opts.Missing == MissingFill {
		return f.fill(ctx, off, n)
	}
	if err != nil {
		return nil, err
	}
	return b[off : off+n], nil
}

// fill returns n bytes at off of the chunk as it reads when missing. A
// non-zero fill is made once per chunk extent and kept in the memo cache.
func (f *chunkFile) fill(ctx context.Context, off, n int64) ([]byte, error) {
	if f.a.FillIsZero() && f.a.HeaderSize(f.c) == 0 {
		return zeros(n), nil
	}
	key := fmt.Sprintf("%s#fill%v#%s", f.a.Key, f.a.Extent(f.c), f.a.Recipe())
	b, err := f.t.memo.Get(ctx, key, func(context.Context) ([]byte, error) { return f.a.FillChunk(f.c), nil })
	if err != nil {
		return nil, err
	}
	return b[off : off+n], nil
}

func (f *chunkFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := f.slice(ctx, off, int64(len(p)))
	return copy(p, b), err
}

// zeroBlock backs reads of missing chunks without an allocation per read
// of up to 1 MiB, the largest read the FUSE adapter lets the kernel send;
// a larger read (volfs serve's) allocates.
var zeroBlock = make([]byte, 1<<20)

// zeros returns n zero bytes that must not be modified.
func zeros(n int64) []byte {
	if n <= int64(len(zeroBlock)) {
		return zeroBlock[:n]
	}
	return make([]byte, n)
}
