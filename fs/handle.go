package fs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
	"github.com/volfs/volfs/internal/mem"
)

// Reader names who reads through a Handle, for read-ahead (readahead.go):
// Process is the reader whose run of chunks is followed, one read-ahead
// window per sequence however many threads it reads with; Thread is the
// thread of it that opened the handle, so that a pool of threads sharing
// out one directory is told apart from one thread jumping about. The
// front end that opened the handle says who they are: the FUSE adapter
// gives the calling process's thread group id and thread id, volfs serve
// one id per client for both.
type Reader struct {
	Process, Thread uint32
}

// Handle is a file of the tree opened by a front end: the FUSE adapter
// opens one per open(2), volfs serve one per HTTP or WebDAV request. Every
// read of a front end goes through a handle, so that both take one path:
// the same chunk store and caches, the read-ahead of the reader that
// opened it, the read timeout (Options.ReadTimeout), and the one error
// mapping (Tree.Errno). It is safe for concurrent use.
type Handle struct {
	t      *Tree
	f      File
	path   string
	reader Reader
	// obj reads a large verbatim chunk in ranged parts (chunkparts.go),
	// when the open chose to; nil otherwise.
	obj *objectFile
	// plain is set for a handle of a piece of a pass-through object
	// (OpenRange), which reads no window of parts (read, ReadPieces).
	plain bool
	// changed is the change a read of obj's chunk found (keepChange):
	// every later read's answer.
	changed atomic.Pointer[error]
	// pinned is obj's chunk as readPinned read it, held for the handle's
	// later reads: the chunk store keeps it too while it has room, and a
	// chunk larger than the store (or evicted) is not downloaded again
	// for each read.
	pinned atomic.Pointer[[]byte]
	// held is the chunk as the handle's first read through the chunk
	// store found it, and its version: every later read of the handle
	// reads these bytes, so that a handle reads one version of its
	// chunk however memory evicts and loads it meanwhile.
	held atomic.Pointer[heldChunk]
	// partsVersion is Version's name of the version obj's window is
	// pinned to, once a reply proved it.
	partsVersion atomic.Pointer[string]
	// rec is the record of the versions of the chunks a view's reads
	// read (chunkrecord.go): the handle's own, or one the front end
	// shares between the handles of a view (Record); nil for other files.
	rec     *ChunkRecord
	touched atomic.Bool // the first read has told the read-ahead (readers.touch)
	closed  atomic.Bool // Close has run
}

// Open opens f, found at path p (for log lines), for reader: an id that
// plays the part of the mount's process id for read-ahead, so that one
// client reading chunk files in key order has the next ones prefetched as
// a process reading them through the mount would. It is OpenAs with
// reader as both process and thread.
func (t *Tree) Open(ctx context.Context, f File, p string, reader uint32) (*Handle, error) {
	return t.OpenAs(ctx, f, p, Reader{Process: reader, Thread: reader})
}

// OpenAs opens f, found at path p (for log lines), for the reader r. It
// fails as a file's open should: a missing chunk with MissingError is not
// found; other failures of the chunk wait for the read of it.
func (t *Tree) OpenAs(ctx context.Context, f File, p string, r Reader) (*Handle, error) {
	return t.open(ctx, f, p, r, true)
}

// OpenRange is Open for a front end that will read no more of f than the
// n bytes at off (volfs serve's reply to a Range request, or to a HEAD
// with n 0). A large chunk is read in ranged parts (chunkparts.go) only
// by a handle that reads it whole: a handle for a piece of it loads it
// whole into memory, as any chunk, where the next pieces a client asks
// for are found. A window opened per piece would cost the origin a Stat
// per piece and parts past each piece's end, cancelled at its close.
//
// Likewise a pass-through object's handle for a piece of at most
// partsPieceMax bytes reads just that piece, in ranged reads of its own
// (objectFile.readPlain), rather than through the file's window of parts,
// which would run past the piece's end and be cancelled when the reply
// ends: 32 Range requests of 1 MiB pulled 78 MiB of a 32 MiB object. A
// source seen to ignore Range is read as before (its one stream), since
// each ranged read of it would read the object from its start.
func (t *Tree) OpenRange(ctx context.Context, f File, p string, reader uint32, off, n int64) (*Handle, error) {
	whole := off == 0 && n >= f.Size()
	h, err := t.open(ctx, f, p, Reader{Process: reader, Thread: reader}, whole)
	if _, isObject := f.(*objectFile); err == nil && isObject {
		h.plain = !whole && n <= partsPieceMax
	}
	return h, err
}

// open opens f, in ranged parts when it is a chunk that qualifies and
// parts is set.
func (t *Tree) open(ctx context.Context, f File, p string, r Reader, parts bool) (*Handle, error) {
	if o, ok := f.(opener); ok {
		if err := o.open(ctx); err != nil {
			return nil, err
		}
	}
	h := &Handle{t: t, f: f, path: p, reader: r}
	if _, ok := f.(*viewFile); ok {
		h.rec = NewChunkRecord() // one version per chunk (chunkrecord.go)
	}
	if c, ok := f.(*chunkFile); ok && parts {
		h.obj = c.inParts(ctx) // held for h
	}
	if f, ok := h.f.(holder); ok && h.obj == nil {
		f.hold()
	}
	return h, nil
}

// holder returns what keeps work going for the handle: the window of a
// chunk read in parts, or the file itself.
func (h *Handle) holder() (holder, bool) {
	if h.obj != nil {
		return h.obj, true
	}
	f, ok := h.f.(holder)
	return f, ok
}

// Close tells the file that this handle will read no more: the ranged
// parts an object's window has in flight are cancelled when its last
// handle closes (parts.go). A front end closes every handle it opened
// (FUSE at RELEASE, serve when a reply ends); a second Close does
// nothing. Reads after Close still work, as reads without a window, and
// bytes a read returned must not be used after Close: a chunk the handle
// held is given back to the chunk store (heldChunk).
func (h *Handle) Close() {
	if !h.closed.CompareAndSwap(false, true) {
		return
	}
	if f, ok := h.holder(); ok {
		f.drop()
	}
	for {
		c := h.held.Load()
		if c == nil || c.closed {
			break
		}
		// The version stays known (Version); the bytes go back.
		if h.held.CompareAndSwap(c, &heldChunk{version: c.version, closed: true}) {
			c.drop(h.t)
			break
		}
	}
}

// Size is the file's size, from the metadata.
func (h *Handle) Size() int64 { return h.f.Size() }

// ReadAt reads len(p) bytes at off, or fewer at the end of the file, with
// File.ReadAt's contract, bounded by Options.ReadTimeout. An error of a
// read that timed out wraps ErrReadTimeout.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := h.Read(ctx, p, off)
	if len(b) > 0 && &b[0] != &p[0] {
		copy(p, b)
	}
	return len(b), err
}

// Read returns the bytes of the file at off, at most len(dest) of them
// and fewer only at the end of the file: in dest, or, for a file whose
// bytes the tree holds in memory (a cached chunk, rewritten metadata), in
// that memory without a copy, which the caller must not modify and may
// hand on until the file is read again (the FUSE adapter replies with it).
// It is bounded by Options.ReadTimeout as ReadAt is.
//
// The first read of a handle is its reader's touch of the file, which
// drives the read-ahead across chunk files; every read of a stitched view
// moves its reader's window along the view.
func (h *Handle) Read(ctx context.Context, dest []byte, off int64) ([]byte, error) {
	h.t.pass.reads.Add(1)
	rctx, cancel := h.t.readContext(ctx)
	defer cancel()
	b, err := h.read(rctx, dest, off)
	return b, h.t.readError(ctx, rctx, err)
}

// ReadPieces is Read for a front end that writes a reply from several
// pieces of memory at once (the FUSE adapter, with writev): the bytes at
// off are pieces, in order, which may be memory the tree lends without a
// copy (a window of ranged parts, parts.go), held until release is
// called; the caller must call a non-nil release once it has written
// them, and must not modify them. release is nil when nothing is held
// beyond the handle itself (a chunk the handle holds: until Close).
func (h *Handle) ReadPieces(ctx context.Context, dest []byte, off int64) (pieces [][]byte, release func(), err error) {
	l, ok := h.f.(lender)
	ok = ok && !h.plain // read: ranged reads of the piece's own
	if o := h.parts(); o != nil && h.changed.Load() == nil {
		l, ok = o, true
		h.touchParts()
	}
	if !ok {
		b, err := h.Read(ctx, dest, off)
		if c := h.held.Load(); err == nil && c != nil && !c.light && mem.Overlap(b, c.b) {
			if reply, ok := c.hold.Retain(); ok {
				return [][]byte{b}, reply.Release, nil
			}
		}
		return [][]byte{b}, nil, err
	}
	h.t.pass.reads.Add(1)
	rctx, cancel := h.t.readContext(ctx)
	defer cancel()
	pieces, release, err = l.lend(rctx, dest, off)
	err = h.keepChange(err)
	if h.obj != nil && h.windowEnded(err) {
		b, err := h.read(rctx, dest, off) // the other way now (read)
		return [][]byte{b}, nil, h.t.readError(ctx, rctx, err)
	}
	return pieces, release, h.t.readError(ctx, rctx, err)
}

func (h *Handle) read(ctx context.Context, dest []byte, off int64) ([]byte, error) {
	if h.obj != nil {
		if err := h.changed.Load(); err != nil {
			return nil, *err
		}
	}
	if o := h.parts(); o != nil {
		h.touchParts()
		k, err := o.ReadAt(ctx, dest, off)
		if !h.windowEnded(err) {
			return dest[:k], h.keepChange(err)
		}
	}
	if h.obj != nil && h.obj.parts.provedVersion() {
		return h.readPinned(ctx, dest, off)
	}
	// Through the chunk store, as every later read (parts).
	switch f := h.f.(type) {
	case *objectFile:
		if h.plain && !h.t.ignoresRange() {
			k, err := f.readPlain(ctx, dest, off)
			return dest[:k], err
		}
	case *chunkFile:
		return h.chunkSlice(ctx, f, dest, off)
	case slicer:
		return f.slice(ctx, off, int64(len(dest)))
	case *viewFile:
		k, err := f.readAt(withRecord(ctx, h.rec), dest, off, h.reader)
		return dest[:k], err
	}
	k, err := h.f.ReadAt(ctx, dest, off)
	return dest[:k], err
}

// heldChunk is a chunk's decoded bytes held by a Handle (nil for a
// missing chunk, read as its fill), their version (Handle.Version), and
// the chunk store's hold on them (cache.Store.Acquire), which Close
// releases. A reply written from b takes a hold of its own
// (cache.Hold.Retain, in ReadPieces): the kernel sends RELEASE only once
// it has every reply, but the goroutine that wrote one may still be
// returning.
type heldChunk struct {
	b       []byte
	version string
	hold    *cache.Hold
	closed  bool // Close released b, and left the version
	light   bool // the version alone: b is nil, and no bytes are taken from the handles' budget
}

// drop gives back what c holds: its hold on the chunk store's value, and
// its bytes of the handles' budget.
func (c *heldChunk) drop(t *Tree) {
	c.hold.Release()
	if !c.light {
		t.holds.give(int64(len(c.b)))
	}
}

// handleHolds is the budget of the bytes that open handles hold
// (heldChunk): a handle holds the chunk its first read found so that it
// reads one version whatever memory evicts meanwhile, which would let a
// program that keeps many chunk files open, each read a little, hold far
// more than the memory cache (1000 open files of 4 MiB chunks: 4 GiB). A
// handle whose chunk does not fit holds its version only and reads the
// chunk as the store has it, ESTALE if it is of another version (readLight).
// The budget is the memory cache's size, at least minHandleHolds: held
// chunks are mostly the ones the cache holds too, so the process holds at
// most twice the cache; the floor lets a handle hold a chunk larger than a
// small cache, which memory cannot keep and would load again per read.
type handleHolds struct {
	max  int64
	used atomic.Int64
}

// minHandleHolds is the least budget of the bytes open handles hold.
const minHandleHolds = 256 << 20

// take takes n bytes of the budget, and reports whether they fitted.
func (b *handleHolds) take(n int64) bool {
	if b.used.Add(n) > b.max && n > 0 {
		b.used.Add(-n)
		return false
	}
	return true
}

// give gives back n bytes that take took.
func (b *handleHolds) give(n int64) { b.used.Add(-n) }

// chunkSlice returns the n bytes at off of f, the handle's chunk, from
// the version its first read found (held; Tree.current: a value held in
// memory longer than --metadata-ttl is checked first). The first read
// is the reader's touch of the file, which drives the read-ahead.
//
// The handle holds its chunk with a count, so that the chunk store does
// not reuse its memory (cache's "Values given back for reuse") before
// Close; a read after Close reads the chunk uncounted (chunkFile.slice).
func (h *Handle) chunkSlice(ctx context.Context, f *chunkFile, dest []byte, off int64) ([]byte, error) {
	n := int64(len(dest))
	c := h.held.Load()
	if c != nil && c.closed || c == nil && h.closed.Load() {
		return f.slice(ctx, off, n)
	}
	if c == nil {
		b, v, hit, hold, err := f.current(ctx)
		if h.touched.CompareAndSwap(false, true) {
			f.t.readers.touch(f, h.reader, !hit)
		}
		if err != nil && !(isMissing(err) && f.t.opts.Missing == MissingFill) {
			// Failed loads are not kept: the next read loads again.
			return nil, err
		}
		held := &heldChunk{b: b, version: v, hold: hold}
		if !f.t.holds.take(int64(len(b))) {
			// Over the handles' budget: the version alone.
			held = &heldChunk{version: v, light: true, hold: &cache.Hold{}}
			defer hold.Release() // after the copy below
			if off < f.size && v != missingVersion {
				k := copy(dest, b[off:min(off+n, f.size)])
				if h.held.CompareAndSwap(nil, held) {
					return dest[:k], nil
				}
				// Another read of the handle held a version first:
				// answer as it does, below.
			}
		}
		if !h.held.CompareAndSwap(nil, held) {
			held.drop(f.t) // another read of the handle held it first
		}
		if c = h.held.Load(); c.closed {
			return f.slice(ctx, off, n) // closed meanwhile
		}
	}
	if off >= f.size {
		return nil, nil
	}
	n = min(n, f.size-off)
	if c.version == missingVersion {
		return f.fill(ctx, off, n)
	}
	if c.light {
		return h.readLight(ctx, f, c, dest[:n], off)
	}
	return c.b[off : off+n], nil
}

// readLight serves a read of a handle that holds its chunk's version but
// not its bytes (over the handles' budget, handleHolds): the chunk as the
// store has it now, copied into dest, when it is of the version held, and
// ESTALE (an error wrapping fetcher.ErrChanged) when it is not, so that
// the handle never reads two versions.
func (h *Handle) readLight(ctx context.Context, f *chunkFile, c *heldChunk, dest []byte, off int64) ([]byte, error) {
	b, v, _, hold, err := f.current(ctx)
	defer hold.Release()
	if err != nil && !isMissing(err) {
		return nil, err
	}
	if v != c.version {
		return nil, fmt.Errorf("fs: %s: the chunk was rewritten since this file was opened (a new open reads the new version): %w", h.path, fetcher.ErrChanged)
	}
	return dest[:copy(dest, b[off:])], nil
}

// Version names the version of the chunk the handle reads, once a read
// has found it: equal for two handles exactly when they read the same
// bytes (the identities of the objects the chunk was loaded from, when
// the source names them). false before the first read, and for a handle
// that is not of a chunk. A handle that reads its chunk in ranged parts
// (chunkparts.go) reads the one version of its object the window is
// pinned to, named as a whole load of that version names it, once a
// reply proved it: before, the FUSE adapter kept the kernel's pages of
// such a chunk across a rewrite without a version (fs/fuse's pages), and
// an open after it read the old version's cached pages beside the new
// version's.
func (h *Handle) Version() (string, bool) {
	if c := h.held.Load(); c != nil {
		return c.version, true
	}
	if v := h.partsVersion.Load(); v != nil {
		return *v, true
	}
	if h.obj != nil && h.obj.parts.proved() {
		// Named once: the FUSE adapter asks at every read.
		v := "r" + string(keep.EncodeFields([]keep.Field{{Key: h.obj.key, ID: h.obj.parts.version()}}))
		h.partsVersion.CompareAndSwap(nil, &v)
		return v, true
	}
	return "", false
}

// parts returns the window in which the handle reads its chunk in parts,
// or nil when it reads through the chunk store: when the open chose to,
// or once the source has been seen to ignore Range (found out by a read
// of this window, or of another): each part would then read the object
// from its start, and one starting beyond fetcher.MaxRangeSkip is
// refused, so the chunk is loaded whole as any chunk of such a source
// (or read whole pinned to the window's version once a reply proved it:
// readPinned); or once a reply of the window did not show it was of the version the
// window is pinned to (errUnproven) before any reply had.
func (h *Handle) parts() *objectFile {
	if h.obj == nil {
		return nil
	}
	if h.obj.parts.fallBack(h.t.ignoresRange()) {
		return nil
	}
	return h.obj
}

// windowEnded reports whether err, of a read of a chunk's window, ends
// the window for the handle, which then reads the chunk the other way
// (parts): a reply did not prove the version opened (errUnproven), or the
// read found the source ignores Range (a reply with the whole object,
// refused past fetcher.MaxRangeSkip).
func (h *Handle) windowEnded(err error) bool {
	return errors.Is(err, errUnproven) || errors.Is(err, fetcher.ErrNotSupported) && h.t.ignoresRange()
}

// readPinned serves a read of a chunk whose window served bytes of the
// version it is pinned to (a reply proved it) before the source was seen
// to ignore Range, which ends the window (parts): the chunk store's load
// of the chunk is pinned to nothing, and a chunk rewritten in that moment
// would show the new version's bytes after the old's. So the handle reads
// the chunk whole through the store pinned to the window's version
// (chunkFile.pinnedChunk: a reply of another version, or one that names
// none, or the object gone, is ErrChanged), shared with every handle
// pinned to it and kept in memory as any chunk, and held by the handle
// for its later reads. A change it finds is every later read's answer
// (keepChange).
func (h *Handle) readPinned(ctx context.Context, dest []byte, off int64) ([]byte, error) {
	o := h.obj
	if off >= o.size {
		return nil, nil
	}
	p := h.pinned.Load()
	if p == nil {
		b, err := h.f.(*chunkFile).pinnedChunk(ctx, o.parts.version())
		if err == nil && int64(len(b)) != o.size {
			err = fmt.Errorf("fs: %s: %d bytes read whole, the file has %d: %w", o.key, len(b), o.size, fetcher.ErrChanged)
		}
		if err != nil {
			return nil, h.keepChange(o.explain(err))
		}
		h.pinned.CompareAndSwap(nil, &b)
		p = h.pinned.Load()
	}
	b := *p // o.size bytes, and off < o.size
	return b[off:min(off+int64(len(dest)), o.size)], nil
}

// keepChange returns err, which a read of a chunk read in parts found,
// and keeps it as every later read's answer when it is a change (ErrChanged):
// the version the handle's window proved is gone, and a read that asked
// again would download the object to find the same.
func (h *Handle) keepChange(err error) error {
	if h.obj != nil && errors.Is(err, fetcher.ErrChanged) {
		h.changed.CompareAndSwap(nil, &err)
	}
	return err
}

// touchParts is the first read's touch of a chunk read in parts: the
// reader waited for it (it was not in memory), and the read-ahead loads
// the next chunks whole while this one streams in.
func (h *Handle) touchParts() {
	if h.touched.CompareAndSwap(false, true) {
		h.t.readers.touch(h.f.(*chunkFile), h.reader, true)
	}
}

// Errno is the one mapping from an error of a Lookup, List, Open or read
// to what the kernel would be told: ENOENT for not found, EACCES for a
// refusal, EINTR for a request cancelled by its caller (ctx), EIO for the
// rest, which it logs once per path (op and p name the request). Every
// front end maps its errors through it, so that they agree with each
// other.
func (t *Tree) Errno(ctx context.Context, err error, op, p string) syscall.Errno {
	return t.errs.errno(ctx, err, op, p)
}
