package fs

import (
	"context"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// Reading a large chunk in ranged parts
//
// A chunk is read whole: one request, decoded, kept in memory for every
// reader of it (volume.go). A large chunk stored verbatim at a remote
// source (decode.Array.Verbatim: its stored bytes are its decoded bytes,
// proven from the metadata) gains nothing from that and pays for it: a
// 64 MiB chunk is one stream at one connection's rate, and 64 MiB held in
// memory at once. Such a chunk, opened while no copy of it is in memory or
// on its way there, is read as the pass-through object it is: through a
// window of ranged parts (parts.go), many in flight, pinned to one version.
//
// It is read so only when every rule of the chunk path would give the same
// bytes:
//
//   - the array stores its chunks verbatim, and the chunk is at least
//     partsChunkMin bytes;
//   - the source is remote, and not seen to ignore Range: at the open,
//     or by a read since (the first part of a window finds it out), after
//     which the handle reads through the chunk store (Handle.parts), or,
//     once a reply has proved the version, reads the chunk whole pinned
//     to it (Handle.readPinned);
//   - the store has no tier after memory (a disk cache or a fleet): those
//     are filled by whole loads, and a user who asked for one expects a
//     chunk read once to be kept;
//   - the chunk is neither in memory nor being loaded (cache.Cache.Holds):
//     then the whole load is the faster read, or already paid for (with
//     --missing error the open loads it whole to tell a missing chunk, so
//     it is never read in parts);
//   - a Stat of the chunk's own key (not its transport-encoded twin) finds
//     an object of exactly the chunk's decoded size, with a version the
//     source names (fetcher.Identity): every part is pinned to it, so the
//     object read is the one whose size was checked, and a chunk rewritten
//     while it is read fails the read (ESTALE), never mixes versions. A
//     reply that names no version (a server with an ETag on HEAD and
//     none on GET) proves nothing, and one of another version before any
//     reply has named the pinned one (HEAD and GET disagree, or a
//     rewrite since the open) shows nothing of the version opened was
//     served: its read, and every later read of the window's handles,
//     takes the chunk path (Handle.parts, errUnproven);
//   - that object is not stored with a transport encoding
//     (fetcher.EncodingStater: S3 and GCS show a gzip-encoded object's
//     compressed bytes to Stat and GetRange, which the chunk path
//     gunzips), whatever its size.
//
// Anything else (a missing chunk, which reads as the fill value; a stored
// size that differs, which is a corrupt chunk and reads as EIO; an object
// whose versions the source does not name) is read whole, as before. The
// read-ahead across chunk files goes on as for any chunk: the first read
// of a handle is its reader's touch, so the next chunks are loaded whole
// into memory while this one streams in.
//
// The window belongs to the chunk file (the node), as an object's does,
// and serves one handle at a time: an open that finds it held by another
// handle loads the chunk whole, as before, into memory where every later
// reader finds it. Readers of one chunk at different places (workers each
// reading a slice of it) would take turns breaking a shared window, each
// break cancelling parts in flight: 8 readers of a 64 MiB chunk cost the
// origin 646 MiB. An open that finds another version starts a new window,
// leaving older handles on theirs.
const partsChunkMin = 16 << 20

// partsStatWait bounds the Stat that decides whether a chunk is read in
// parts: an origin that leaves HEAD unanswered (GET still works) would
// otherwise hold every open of a large chunk for the read timeout or the
// fetcher's retries, and a Stat not answered by then reads it whole. An
// object store answers one in tens of milliseconds.
const partsStatWait = 2 * time.Second

// inParts returns the object file through which a handle opened now reads
// the chunk f in ranged parts, held for that handle (objectFile.drop lets
// go of it), or nil when it is read whole through the chunk store (the
// rules above). It costs one Stat when f is a candidate.
func (f *chunkFile) inParts(ctx context.Context) *objectFile {
	t := f.t
	if f.size < partsChunkMin || !f.a.Verbatim() || t.local || len(t.tiers) > 0 {
		return nil
	}
	if t.ignoresRange() {
		return nil
	}
	if t.store != nil && t.store.Cache().Holds(f.mkey) {
		return nil
	}
	rctx, cancel := t.readContext(ctx)
	defer cancel()
	if t.checkMeta(rctx, f.a) != nil {
		return nil // the chunk store refuses it (metawatch.go)
	}
	sctx, cancelStat := context.WithTimeout(rctx, partsStatWait)
	defer cancelStat()
	size, id, enc, err := statEncoding(sctx, t.src, f.key)
	if err == nil {
		// The origin's answer, learnt as every request of the tree's
		// is: the version the window reads is then the one Tree.Version
		// names (serve's ETag of the reply).
		t.ids.learn(f.key, id)
	}
	if err != nil || size != f.size || !id.Known() || enc != "" {
		return nil
	}
	for {
		o := f.parts.Load()
		if o != nil && o.parts.version() == id {
			if !o.parts.holdIdle() {
				return nil // another handle reads in it
			}
			return o
		}
		n := &objectFile{t: t, key: f.key, size: size}
		n.parts.id, n.parts.named, n.parts.handles = id, true, 1
		if f.parts.CompareAndSwap(o, n) {
			t.pass.chunkParts.Add(1)
			return n
		}
	}
}

// statEncoding is src's StatEncoding (fetcher.EncodingStater), or its
// Stat, whose objects then have no encoding that Stat does not decode.
func statEncoding(ctx context.Context, src fetcher.Fetcher, key string) (int64, fetcher.Identity, string, error) {
	if es, ok := src.(fetcher.EncodingStater); ok {
		return es.StatEncoding(ctx, key)
	}
	size, id, err := src.Stat(ctx, key)
	return size, id, "", err
}
