package fs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// The versions of a view's chunks
//
// A stitched view is many chunks, each its own object with versions of
// its own, so a view cannot be of one version as a chunk file is; what it
// can be is of one version per chunk: the bytes of one chunk's region are
// of one version of that chunk, never part old and part new. A reader's
// reads of a view are many, and the FUSE adapter keeps the view's pages
// in the kernel across opens (FOPEN_KEEP_CACHE), so the bytes one reader
// sees of a chunk's region may come from loads made far apart: memory may
// have let the chunk go and loaded a rewritten version meanwhile (or, past
// Options.MetadataTTL, found it rewritten), and the kernel may have kept
// some pages of the region and dropped others.
//
// A ChunkRecord is the versions of the chunks read through it. Every
// handle of a view reads through one, its own (so that volfs serve's and
// a direct-I/O mount's reads are of one version per chunk too), and the
// FUSE adapter gives every handle of a view that reads through its page cache
// the record of those pages (Handle.Record), and a read that finds a
// chunk of another version than the record holds fails with ESTALE, one
// log line naming the view, rather than put the new version's bytes
// beside the old's; the record is then stale, and the next open drops the
// pages (or gives the view a kernel inode of its own while a handle reads
// through them: fs/fuse's pages). An open keeps the pages only while
// every version the record holds is current (Tree.RecordCurrent).
//
// A chunk whose loads name no identity (an HTTP server without ETag) has
// no version two loads share, so it is not recorded: volfs cannot tell
// its versions apart. maxRecorded bounds a record: a view of more chunks
// than that records the first, and its pages are dropped at each open.
const maxRecorded = 1 << 16

// ChunkRecord is the versions of the chunks read through it; see "The
// versions of a view's chunks". The zero value is not usable: use
// NewChunkRecord. Safe for concurrent use.
type ChunkRecord struct {
	mu    sync.Mutex
	m     map[string]string // GUARDED_BY(mu); version by memKey
	stale bool              // GUARDED_BY(mu); a read found another version
	full  bool              // GUARDED_BY(mu); a chunk was not recorded for room
}

// NewChunkRecord returns an empty record.
func NewChunkRecord() *ChunkRecord { return &ChunkRecord{m: make(map[string]string)} }

// Stale reports whether a read through r found a chunk of another version
// than r holds.
func (r *ChunkRecord) Stale() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stale
}

// note records that a read found version v of the chunk mkey, key for
// log lines, and fails with an error wrapping fetcher.ErrChanged when r
// holds another version of it.
func (r *ChunkRecord) note(mkey, key, v string) error {
	if !recordable(v) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.m[mkey]
	switch {
	case ok && old != v:
		r.stale = true
		return fmt.Errorf("fs: chunk %s was rewritten since this view read it (open the view again to read the new version): %w", key, fetcher.ErrChanged)
	case ok:
	case len(r.m) >= maxRecorded:
		r.full = true
	default:
		r.m[mkey] = v
	}
	return nil
}

// recordable reports whether v names a version two loads can share: an
// identity record, or missing.
func recordable(v string) bool { return strings.HasPrefix(v, "r") || v == missingVersion }

type recordKey struct{}

// withRecord returns ctx carrying r for Tree.chunks (nil: ctx).
func withRecord(ctx context.Context, r *ChunkRecord) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, recordKey{}, r)
}

// recordOf returns the record ctx carries, or nil.
func recordOf(ctx context.Context) *ChunkRecord {
	r, _ := ctx.Value(recordKey{}).(*ChunkRecord)
	return r
}

// Record makes every later read of h note the versions of the chunks it
// reads in r, and fail with ESTALE when r holds another version of one
// (see "The versions of a view's chunks"), in place of the record of its
// own that a view's handle is opened with, so that the handles that read
// through one page cache read one version of each chunk between them.
// Only a stitched view's reads read chunks through a record; other files
// ignore it. Call it before the handle's first read.
func (h *Handle) Record(r *ChunkRecord) { h.rec = r }

// IsView reports whether f is a stitched view, whose handles read through
// a ChunkRecord (Handle.Record).
func IsView(f File) bool {
	_, ok := f.(*viewFile)
	return ok
}

// RecordCurrent reports whether a view read now would find every chunk r
// holds at the version r holds, as far as the tree can tell without I/O
// beyond Current's (Tree.Current, asked of each chunk): false when r is
// stale or was full, and when more than maxRecordAsks of its chunks
// would ask the source. The FUSE adapter keeps a view's pages across an open
// only when it reports true.
func (t *Tree) RecordCurrent(ctx context.Context, r *ChunkRecord) bool {
	r.mu.Lock()
	if r.stale || r.full {
		r.mu.Unlock()
		return false
	}
	m := make(map[string]string, len(r.m))
	for k, v := range r.m {
		m[k] = v
	}
	r.mu.Unlock()
	asks := 0
	for mkey, v := range m {
		if t.mayAsk(mkey) {
			if asks++; asks > maxRecordAsks {
				return false
			}
		}
		if !t.currentKey(ctx, mkey, v) {
			return false
		}
	}
	return true
}

// maxRecordAsks bounds the chunks whose check may ask the source
// (Tree.mayAsk) at one open of a view: past it the view's pages are
// dropped rather than its open wait for a Stat per chunk (10000 chunks at
// 30 ms each would be 5 minutes); reading them again costs no more than
// the view's first read.
const maxRecordAsks = 64

// mayAsk reports whether currentKey of the chunk mkey may ask the source:
// past Options.MetadataTTL, a chunk memory does not hold, or holds
// unchecked for longer than the TTL.
func (t *Tree) mayAsk(mkey string) bool {
	ttl := t.opts.MetadataTTL
	if ttl <= 0 {
		return false
	}
	val, ok, err := t.store.Cache().Peek(mkey)
	switch {
	case !ok:
		return true
	case err != nil:
		return false // a kept error: Current asks nothing
	}
	cv := t.vers.of(mkey, val, val)
	return cv.rec != nil && time.Since(cv.checked) >= ttl
}
