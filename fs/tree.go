package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// getMeta is the keeping source's Get of a metadata object: kept on disk,
// and served from there while the origin is offline.
func (t *Tree) getMeta(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	return t.origin.Get(ctx, key, limit)
}

// getChunk is the keeping source's Get of a chunk object (or shard); a
// warm (Tree.warming) keeps the answer that one does not exist, for reads
// while the origin is offline.
func (t *Tree) getChunk(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	return t.origin.GetChunk(ctx, key, limit, t.warming.Load())
}

// TouchMetadata marks every metadata entry the tree has kept on disk as
// just used, so that the chunks a warm wrote after them do not push them
// out of the disk cache first (it evicts the least recently used).
func (t *Tree) TouchMetadata() { t.origin.Touch() }

// Missing says what a chunk that the source does not have reads as.
type Missing int

const (
	// MissingFill reads a missing chunk as the fill value at full size.
	MissingFill Missing = iota
	// MissingError makes opening a missing chunk fail with ENOENT.
	MissingError
)

// maxMetadataBytes bounds a metadata file, stored and decoded: the largest
// real precomputed info (thousands of scales) is a few MiB.
const maxMetadataBytes = 64 << 20

// DefaultCacheBytes is the decoded-chunk cache size when Options leaves it 0.
const DefaultCacheBytes = 512 << 20

// Options configures a Tree.
type Options struct {
	// CacheBytes bounds the decoded-chunk cache; 0 means DefaultCacheBytes.
	CacheBytes int64
	Missing    Missing
	// Formats pins the format of the source root to one of these
	// registered format names (decode.Formats), as a neuroglancer-style
	// URL prefix does ("zarr://" allows "zarr2" and "zarr3"); empty
	// detects it.
	Formats []string
	// MetadataTTL, when positive, is how long a directory's listing is
	// kept before the next lookup lists it again, so that objects added to
	// the source show without a remount; the kernel's entry and attribute
	// caches are bounded by it too. Zero keeps listings for the mount's
	// life. Volume metadata and chunks are never expired; with a TTL,
	// each volume's metadata object is checked once per TTL before a
	// chunk of it is loaded, and a change that decodes its chunks
	// otherwise refuses their loads (metawatch.go).
	MetadataTTL time.Duration
	Log         *slog.Logger // nil means slog.Default()

	// Workers is the size of the chunk store's pool of decoders (batches
	// and prefetches); 0 means GOMAXPROCS.
	Workers int
	// CPUSlots is how many prefetches decode at once (cache.Options);
	// 0 means GOMAXPROCS.
	CPUSlots int
	// ReadAhead caps the bytes one reader may have prefetched and not yet
	// read, and all readers together (see readers); 0 turns read-ahead
	// off.
	ReadAhead int64
	// Disk, when not nil, keeps decoded chunks across restarts: the
	// chunk store's first tier below memory (see Tree.loader). The tree
	// does not close it.
	Disk *cache.Disk
	// Tiers are the chunk store's tiers after Disk (a shared cache of a
	// fleet), asked in order before the origin. The tree does not close
	// them.
	Tiers []cache.Tier
	// ReadTimeout, when positive, bounds each read of the mount as a
	// whole, from the kernel's request to the reply, every fetch, retry,
	// back-off and decode included, and each chunk load alike: a read
	// still waiting then fails with ErrReadTimeout (EIO), which the FUSE
	// adapter remembers for a few seconds so that the kernel's re-read of
	// a failed read-ahead does not start over. Zero leaves reads bounded
	// by the fetcher's own attempts and deadlines only.
	ReadTimeout time.Duration
}

// Tree is the directory tree of one source. It is safe for concurrent use.
type Tree struct {
	src   fetcher.Fetcher
	local bool         // src reads local files: a fetch costs CPU, not waiting
	store *cache.Store // decoded chunks, and the pool that loads them
	// budget is the global cap of read-ahead, shared by every reader.
	budget  *cache.Budget
	readers readers
	loads   loadStats
	// origin is the keeping source around src: every request of the
	// tree to the origin goes through it, and it owns what is kept of
	// the origin (identities, metadata and listings on disk, absences)
	// and whether the origin is offline.
	origin *keep.Source
	// ids checks and makes the identity records of the tiers' entries.
	ids identities
	// vers knows the identity record of the chunks memory holds
	// (chunkversion.go).
	vers *chunkVersions
	// holds bounds the bytes open handles hold (handle.go).
	holds handleHolds
	// tiers are the chunk store's tiers below memory: Options.Disk,
	// then Options.Tiers.
	tiers []cache.Tier
	// memo holds shard and minishard indexes (decode.Source.Memo),
	// apart from chunks so that a scan of chunks cannot evict them.
	memo *cache.Cache
	// lists bounds the source listings kept.
	lists *listBudget
	opts  Options
	log   *slog.Logger
	root  Dir

	errs errorReport
	ome  omeImages
	// named lists the directories of consolidated groups on a source
	// that cannot list them.
	named consolidatedNames
	// warming is set while a warm runs: missing chunk objects are kept
	// on disk as such (getChunk).
	warming atomic.Bool
	// pass counts reads answered and backing files handed out
	// (passthrough.go).
	pass passStats
	// watches holds the metaWatch of each array whose metadata is
	// watched (*decode.Array to *metaWatch; metawatch.go).
	watches sync.Map
}

// New returns the tree of src. It reads the root's metadata, so that a
// source whose root is a volume with bad metadata is refused here, before
// anything is mounted.
func New(ctx context.Context, src fetcher.Fetcher, opts Options) (*Tree, error) {
	if opts.CacheBytes == 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	for _, f := range opts.Formats {
		if !slices.ContainsFunc(decode.Formats(), func(r decode.Format) bool { return r.Name == f }) {
			return nil, fmt.Errorf("fs: unknown format %q", f)
		}
	}
	_, local := src.(fetcher.Local)
	t := &Tree{src: src, local: local, opts: opts, log: opts.Log}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.errs.log = t.log
	if opts.Disk != nil {
		t.tiers = append(t.tiers, opts.Disk.Tier())
	}
	t.tiers = append(t.tiers, opts.Tiers...)
	kopts := keep.Options{TTL: opts.MetadataTTL, MaxKept: maxMetadataBytes, Log: t.log}
	if opts.Disk != nil {
		kopts.Store = opts.Disk
	}
	for _, tier := range opts.Tiers {
		// Only a fleet's signed tier shares the origin's answers: see
		// keep's "Answers shared by the fleet".
		signed, _ := tier.(interface{ Signed() bool })
		if f, ok := tier.(keep.Fleet); ok && signed != nil && signed.Signed() {
			kopts.Fleet = f
			break
		}
	}
	t.origin = keep.New(src, kopts)
	t.store = cache.NewStore(cache.Options{
		MaxBytes: opts.CacheBytes,
		// A missing chunk is a stable answer: keep it, so that every read
		// of a hole does not cost a round trip.
		KeepError: isStableMissing,
		Workers:   opts.Workers,
		CPUSlots:  opts.CPUSlots,
		Tiers:     t.tiers,
	})
	t.budget = cache.NewBudget(opts.ReadAhead).DrawFrom(t.store.MemBudget())
	t.readers.init(t)
	t.ids.init(t)
	t.vers = newChunkVersions()
	t.holds.max = max(opts.CacheBytes, minHandleHolds)
	t.memo = cache.New(cache.Options{MaxBytes: max(opts.CacheBytes/8, 8<<20), KeepError: isStableMissing})
	t.lists = newListBudget(max(opts.CacheBytes/8, 8<<20))
	root, err := t.openDir(ctx, "", true)
	if err != nil {
		t.store.Close()
		return nil, err
	}
	if _, isVol := root.(*volumeDir); len(opts.Formats) > 0 && !isVol {
		t.store.Close()
		return nil, fmt.Errorf("fs: %s: no %s metadata at the root", src, strings.Join(opts.Formats, " or "))
	}
	if dir, ok := root.(*sourceDir); ok {
		if _, _, err := dir.list(ctx); errors.Is(err, fetcher.ErrNotSupported) {
			t.log.Warn("the source cannot be listed and has no volume metadata at its root: its root shows empty, and volumes show only when named (ls MOUNT/NAME)", "source", src.String())
		}
	}
	t.root = root
	return t, nil
}

// isMissing reports whether err means that a chunk does not exist, so that
// it reads as the fill value. A local chunk that is there but is not a
// regular file (fetcher.ErrNotRegular: a FIFO, a device such as /dev/zero)
// is no hole: it fails (loadOnce).
func isMissing(err error) bool {
	if errors.Is(err, fetcher.ErrNotRegular) {
		return false
	}
	return errors.Is(err, fetcher.ErrNotExist) || errors.Is(err, decode.ErrMissing)
}

// isStableMissing reports whether err is a missing chunk as the origin
// answered it, to be kept by the memory caches: not one that a kept
// absence answered while the origin is offline (keep.ErrKept), which the
// origin's return must be able to undo.
func isStableMissing(err error) bool {
	return isMissing(err) && !errors.Is(err, keep.ErrKept)
}

// Close stops the chunk store's workers and any read-ahead, and waits for
// the writes to the tiers still running. Call it after the mount is gone
// and the last read has returned.
func (t *Tree) Close() {
	t.readers.stopAll()
	t.store.Close()
}

// Options returns the options the tree was made with, Log filled in.
func (t *Tree) Options() Options {
	o := t.opts
	o.Log = t.log
	return o
}

// Root returns the root directory.
func (t *Tree) Root() Dir { return t.root }

// Source returns the fetcher the tree reads.
func (t *Tree) Source() fetcher.Fetcher { return t.src }

// Resolve walks the slash-separated path p from the root.
func (t *Tree) Resolve(ctx context.Context, p string) (Node, error) {
	var n Node = t.root
	for _, name := range strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/") {
		if name == "" {
			continue
		}
		d, ok := n.(Dir)
		if !ok {
			return nil, fmt.Errorf("fs: %s: not a directory: %w", p, fetcher.ErrNotExist)
		}
		var err error
		if n, err = d.Lookup(ctx, name); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// openDir returns the directory at key: a volume directory when it holds
// volume metadata of a registered format, a source directory otherwise.
// When the source can list, only the metadata names that the directory's
// listing holds are fetched, so probing a directory of chunks costs one
// listing and no GET. Bad metadata is an error when strict (the root), and
// otherwise logged, the directory then passing through as it is so that
// nothing in it is lost.
//
// A directory may hold metadata of several formats (converters write
// both ".zarray" and "zarr.json"). The first format in probe order that
// describes arrays is served; failing that, the first that only rewrites
// (a consolidated ".zmetadata", a Zarr v3 group's consolidated metadata).
// Every other metadata file found is then shown rewritten when it
// describes the same chunk files in the same decoded layout (or only
// rewrites), and hidden behind its ".orig" name otherwise, with a log
// line: no metadata file in the mount describes bytes it does not serve.
func (t *Tree) openDir(ctx context.Context, key string, strict bool) (Dir, error) {
	src := &sourceDir{t: t, key: key}
	_, byName, err := src.list(ctx)
	listed := err == nil
	if err != nil && !errors.Is(err, fetcher.ErrNotSupported) {
		return nil, err
	}
	var found []foundMeta
	for _, f := range decode.Formats() {
		if len(t.opts.Formats) > 0 && key == "" && !slices.Contains(t.opts.Formats, f.Name) {
			continue
		}
		if listed {
			_, plain := byName[f.Meta]
			_, gz := byName[f.Meta+".gz"]
			if !plain && !gz {
				continue
			}
		}
		obj, objKey, err := t.fetchMeta(ctx, path.Join(key, f.Meta), maxMetadataBytes)
		switch {
		case errors.Is(err, fetcher.ErrNotExist):
			continue
		case errors.Is(err, fetcher.ErrTooLarge) && !strict:
			// Metadata past the cap is no volume's.
			found = append(found, foundMeta{name: f.Meta, err: err})
			continue
		case err != nil:
			return nil, err
		}
		m := foundMeta{name: f.Meta, key: objKey, id: obj.ID, parse: f.Parse}
		if m.data, err = untransport(obj, objKey, 1<<20, maxMetadataBytes); err != nil {
			m.err = fmt.Errorf("fs: %s/%s: %w", t.src, objKey, err)
		} else {
			m.vol, m.err = f.Parse(key, m.data)
		}
		if m.vol != nil || m.err != nil {
			found = append(found, m)
		}
	}
	primary := -1
	for i, m := range found {
		if m.err == nil && len(m.vol.Arrays) > 0 {
			primary = i
			break
		}
	}
	if primary < 0 {
		primary = slices.IndexFunc(found, func(m foundMeta) bool { return m.err == nil })
	}
	if primary < 0 {
		if len(found) == 0 {
			return src, nil
		}
		err := found[0].err
		// Metadata volfs cannot decode passes through, even at the root
		// unless a format was pinned; metadata that is wrong refuses a
		// mount of it.
		if strict && (!errors.Is(err, decode.ErrUnsupported) || len(t.opts.Formats) > 0) {
			return nil, err
		}
		t.log.Warn("not shown as a volume: its objects pass through undecoded", "dir", "/"+key, "err", err)
		src.refused = err
		return src, nil
	}
	vol := found[primary].vol
	if !listed {
		for _, m := range found {
			if m.err == nil && m.vol.MetaName == ".zmetadata" && t.named.add(key, m.data) {
				src.listNamed()
			}
		}
	}
	for _, sk := range vol.Skipped {
		t.log.Warn("array not decoded: its objects pass through undecoded", "array", "/"+path.Join(key, sk.Name), "err", sk.Err)
	}
	t.applyOME(ctx, key, vol)
	for _, a := range vol.Arrays {
		if biggest := a.ChunkSize(make([]int64, len(a.Grid))); biggest > t.opts.CacheBytes/4 {
			t.log.Warn("chunks are large for the cache: each read of an evicted chunk fetches and decodes it again; raise --cache-size",
				"array", "/"+a.Key, "chunk_bytes", biggest, "cache_bytes", t.opts.CacheBytes)
		}
	}
	d := newVolumeDir(t, vol, src)
	t.watchMeta(vol, found[primary].name, found[primary].key, found[primary].id, found[primary].parse)
	for i, m := range found {
		if i == primary {
			continue
		}
		if m.err == nil && (len(m.vol.Arrays) == 0 || sameChunks(vol, m.vol)) {
			d.meta[m.name] = m.vol.Rewritten
			d.meta[m.name+OrigSuffix] = m.vol.Original
			continue
		}
		why := "it describes other chunk files, or another decoded layout"
		if m.err != nil {
			why = m.err.Error()
		}
		t.log.Warn("metadata hidden behind its .orig name: it does not describe the chunks served",
			"file", "/"+path.Join(key, m.name), "served", vol.MetaName, "why", why)
		d.hidden[m.name] = true
		d.hidden[m.name+".gz"] = true
		if m.data != nil {
			d.meta[m.name+OrigSuffix] = m.data
		}
	}
	return d, nil
}

// foundMeta is a metadata file found in a directory: its volume, or why
// it is not one.
type foundMeta struct {
	name string
	data []byte // as stored, transport gzip removed; nil when not read
	// key is the object read (the name, or its ".gz" sibling), id its
	// version, parse the format's parser: what metawatch.go watches.
	key   string
	id    fetcher.Identity
	parse func(dir string, meta []byte) (*decode.Volume, error)
	vol   *decode.Volume
	err   error
}

// sameChunks reports whether two volumes of one directory describe the
// same arrays: the same chunk files, decoded to the same bytes.
func sameChunks(a, b *decode.Volume) bool {
	return len(a.Arrays) == len(b.Arrays) && len(a.Skipped) == 0 && len(b.Skipped) == 0 &&
		slices.EqualFunc(a.Arrays, b.Arrays, decode.SameChunks)
}

// fetchBy gets the object at key through get (a fetcher's Get), or when
// there is none its ".gz" sibling (CloudVolume's convention for gzip on
// disk), refusing objects of more than limit stored bytes. The plain
// object always wins when both exist, as an HTTP client asking for key
// would get it, so a file's bytes never depend on which form an earlier
// read found. Metadata goes through getMeta (fetchMeta), chunk objects
// through getChunk.
func (t *Tree) fetchBy(ctx context.Context, key string, limit int64, get func(context.Context, string, int64) (fetcher.Object, error)) (fetcher.Object, string, error) {
	forms := storedForms(key)
	obj, err := get(ctx, forms[0], limit)
	if !errors.Is(err, fetcher.ErrNotExist) {
		return obj, forms[0], err
	}
	obj, err2 := get(ctx, forms[1], limit)
	if err2 != nil {
		if errors.Is(err2, fetcher.ErrNotExist) {
			return obj, forms[0], err // report the plain key as missing
		}
		return obj, forms[1], err2
	}
	return obj, forms[1], nil
}

// storedForms are the objects that may hold key's bytes, in the order
// they win: the plain object whenever it exists, else its ".gz" sibling.
// fetchBy reads by it and Tree.Version names versions by it, so that the
// version of a file is that of the object its bytes come from.
func storedForms(key string) [2]string {
	return [2]string{key, key + ".gz"}
}

// fetchMeta is fetchBy of a metadata object, kept on disk for an origin
// that cannot be reached (getMeta).
func (t *Tree) fetchMeta(ctx context.Context, key string, limit int64) (fetcher.Object, string, error) {
	return t.fetchBy(ctx, key, limit, t.getMeta)
}

// untransport removes the transport gzip of an object fetched from key, if
// any, allowing at most limit decoded bytes. want sizes the first
// allocation; 0 takes it from the gzip trailer.
func untransport(obj fetcher.Object, key string, want, limit int) ([]byte, error) {
	gz, err := decode.TransportGzip(obj.ContentEncoding, key)
	if err != nil || !gz {
		return obj.Data, err
	}
	return decode.Gunzip(obj.Data, want, limit)
}

// Volumes returns the volumes found by walking the tree from the root, at
// most depth directories deep, in listing order.
func (t *Tree) Volumes(ctx context.Context, depth int) ([]*decode.Volume, error) {
	var vols []*decode.Volume
	err := t.Walk(ctx, depth, func(_ string, v *decode.Volume, _ error) {
		if v != nil && len(v.Arrays) > 0 {
			vols = append(vols, v)
		}
	})
	return vols, err
}

// Walk is WalkBounded of at most MaxWalkEntries entries, without the
// account of what it skipped.
func (t *Tree) Walk(ctx context.Context, depth int, fn func(dir string, vol *decode.Volume, refused error)) error {
	_, err := t.WalkBounded(ctx, depth, MaxWalkEntries, fn)
	return err
}
