package fuse

import (
	"context"
	"fmt"
	"sync"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// The kernel's pages of a chunk file
//
// Files are opened with FOPEN_KEEP_CACHE, so the kernel's page cache of a
// file outlives its handles: a later open reads what it holds from there
// and asks volfs for the rest. A chunk file's inode is numbered by its
// place in the grid (inode.go), not by version, so when its object is
// rewritten during a mount (seen within --metadata-ttl; at any time once
// memory has dropped the chunk and a load reads the source again) the
// cached pages of the old version would sit beside pages the new version
// fills: a read of no version (docs/CONSISTENCY.md).
//
// pages keeps, per chunk file's inode, the version its cached pages came
// from (fs.Handle.Version: every read of a handle is of one version). An
// open keeps them only while that version is current (fs.Tree.Current:
// memory holds it, or its objects' identities are current, free within
// --metadata-ttl). When it is not, the open drops them: it opens without
// FOPEN_KEEP_CACHE, and the kernel drops the inode's pages at the open.
//
// But the kernel reads every handle of an inode, and every mapping of it,
// through its one page cache, so pages of the new version would reach a
// handle still open on the old (a reader paused across the rewrite, or a
// mapping). While such a handle is open, the new version gets a kernel
// inode of its own, as gcsfuse gives each generation of an object one:
// the open fails with ESTALE and moves the file to its next generation
// (generations), the kernel's open path retries a stale open once with
// the name looked up again (LOOKUP_REVAL), and that lookup answers a node
// of the new generation: a new node ID, so a new kernel inode with an
// empty page cache, which the new open reads the new version into. The
// old handle reads on the old inode, the old version from its pages or
// from the bytes it holds. (Reading past the page cache with
// FOPEN_DIRECT_IO instead, as volfs did, still mixed: the kernel maps a
// direct-I/O file privately through the same page cache, and refuses to
// map it shared.)
//
// A read of a handle whose version is not the one the pages hold (it met
// a change in the moment between its open's check and its first read)
// fails with ESTALE, one log line naming the file, rather than add pages
// of another version; the next open drops them, or moves the file to its
// next generation while a handle reads through them.
type pages struct {
	mu      sync.Mutex
	version string // GUARDED_BY(mu); of the pages the kernel may hold
	has     bool   // GUARDED_BY(mu); the kernel may hold pages (version is set)
	// stale is set when a read found the chunk of another version
	// than the pages: the next open drops them whatever the tree says.
	stale bool // GUARDED_BY(mu)
	// opened holds the handles open, each with whether it reads past
	// the page cache (openPast).
	opened map[*fs.Handle]bool // GUARDED_BY(mu)
	// rec is, for a stitched view, the versions of the chunks its pages
	// may hold, which every handle's reads check and add to
	// (fs.ChunkRecord): a view is of one version per chunk, not one
	// version. nil before the first open, and for other files.
	rec *fs.ChunkRecord // GUARDED_BY(mu)
}

// open returns the open flags of h, a handle of f opened with flags:
// flags, or without FOPEN_KEEP_CACHE when the pages must be dropped. It
// returns false, and does not take h, when the pages are of a version no
// longer current and a handle reads through them: the open must fail
// with ESTALE, and the file move to its next generation (see pages), or,
// when it has moved already, read past them (openPast).
func (p *pages) open(ctx context.Context, t tree, f fs.File, h *fs.Handle, flags uint32) (uint32, bool) {
	if fs.IsView(f) {
		return p.openView(ctx, t, h, flags)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	current := true
	for try := 0; ; try++ {
		v, has := p.version, p.has
		if !has {
			break
		}
		p.mu.Unlock()
		current = t.Current(ctx, f, v)
		p.mu.Lock()
		if p.has == has && p.version == v {
			break
		}
		// Another handle's read changed them meanwhile: ask of what
		// they are now, a few times; then keep only no pages.
		if try == 2 {
			current = !p.has
			break
		}
	}
	switch current = current && !p.stale; {
	case current:
	case p.cachedOpen():
		return 0, false
	default:
		p.has, p.stale = false, false
		flags &^= fuse.FOPEN_KEEP_CACHE
	}
	p.add(h, false)
	return flags, true
}

// openPast returns the open flags of h, a handle opened with flags that
// reads past the pages (FOPEN_DIRECT_IO), keeping them for the handles
// that read through them: the way of an open that open refused once the
// file has moved to a later generation, which came by a way the kernel
// cannot look up again (a bind mount of the file itself, /proc/PID/fd),
// so that a retry would land on this node again. A mapping of it still
// reads through the pages (see pages): the one case left of a mix.
func (p *pages) openPast(h *fs.Handle, flags uint32) uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(h, true)
	return flags | fuse.FOPEN_DIRECT_IO
}

// add notes h open, reading past the pages when direct.
//
// REQUIRES: p.mu held.
func (p *pages) add(h *fs.Handle, direct bool) {
	if p.opened == nil {
		p.opened = make(map[*fs.Handle]bool)
	}
	p.opened[h] = direct
}

// cachedOpen reports whether a handle that reads through the page cache
// is open.
//
// REQUIRES: p.mu held.
func (p *pages) cachedOpen() bool {
	for _, direct := range p.opened {
		if !direct {
			return true
		}
	}
	return false
}

// openView is open for a stitched view, whose pages are of the versions
// of its chunks that p.rec holds: they are kept while every one is
// current (fs.Tree.RecordCurrent), else dropped, or, while a handle reads
// through them, the open fails (see open). h reads through the record of
// the pages it opens on.
func (p *pages) openView(ctx context.Context, t tree, h *fs.Handle, flags uint32) (uint32, bool) {
	p.mu.Lock()
	rec := p.rec
	p.mu.Unlock()
	current := rec == nil || t.RecordCurrent(ctx, rec)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rec != rec {
		// Another open dropped them meanwhile: its record is new.
		current = true
	}
	switch {
	case current:
	case p.cachedOpen():
		return 0, false
	default:
		p.rec = nil
		flags &^= fuse.FOPEN_KEEP_CACHE
	}
	if p.rec == nil {
		p.rec = fs.NewChunkRecord()
	}
	h.Record(p.rec)
	p.add(h, false)
	return flags, true
}

// close forgets h, which is closed.
func (p *pages) close(h *fs.Handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.opened, h)
	if len(p.opened) == 0 {
		p.opened = nil // most inodes are opened once: no map kept for each
	}
}

// read reports whether the bytes of a read of h about to be answered may
// join the kernel's pages: an error wrapping fetcher.ErrChanged (ESTALE)
// when they are of another version than the pages.
func (p *pages) read(h *fs.Handle, path string) error {
	v, ok := h.Version()
	if !ok {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	direct, known := p.opened[h]
	switch {
	case !known || direct || p.has && p.version == v:
		return nil
	case p.has:
		p.stale = true
		return fmt.Errorf("fuse: %s: the chunk was rewritten since the kernel cached it: open it again to read the new version: %w", path, fetcher.ErrChanged)
	}
	p.version, p.has = v, true
	return nil
}

// generations numbers the generations of chunk files moved on while a
// handle still read their old pages (see pages). A file is looked up
// with its inode number and its generation here (go-fuse's
// StableAttr.Gen, the entry's generation to the kernel), so each
// generation is a node of its own, with a node ID and a kernel inode of
// its own; the inode number stays the file's. A file is kept here while a
// node of an earlier generation lives; once go-fuse has let them all go,
// it is looked up at generation 0 again, which a node of a later
// generation still open does not mind: the kernel takes the new node ID
// as another inode. Generations are numbered from one counter for the
// mount, so that no move ever answers a node of a generation still open.
// Safe for concurrent use.
type generations struct {
	mu   sync.Mutex
	m    map[uint64]*generation // GUARDED_BY(mu); by inode number
	last uint64                 // GUARDED_BY(mu); the last generation handed out
}

// generation is the newest generation of a file moved on, and its nodes
// of earlier generations that go-fuse has not let go.
type generation struct {
	gen uint64
	old map[*fileInode]struct{}
}

// of returns the generation a lookup of the file numbered ino answers.
func (g *generations) of(ino uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.m[ino]; e != nil {
		return e.gen
	}
	return 0
}

// move moves the file of node n, of identity id, to a generation past
// n's, so that the next lookup of its name answers another node.
func (g *generations) move(id gofs.StableAttr, n *fileInode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = make(map[uint64]*generation)
	}
	e := g.m[id.Ino]
	if e == nil {
		e = &generation{old: make(map[*fileInode]struct{})}
		g.m[id.Ino] = e
	}
	if e.gen <= id.Gen {
		// Numbered from one counter for the mount, never by n's plus
		// one: once a file's entry is gone (its old nodes forgotten), a
		// node of generation 1 may still be open while the file is looked
		// up at 0 again, and moving that one on must not answer the other.
		g.last++
		e.gen = max(g.last, id.Gen+1)
		g.last = e.gen
	}
	e.old[n] = struct{}{}
}

// moved reports whether the file of the node of identity id has moved
// past its generation: a lookup of its name answers another node.
func (g *generations) moved(id gofs.StableAttr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.m[id.Ino]
	return e != nil && e.gen > id.Gen
}

// forget forgets node n, of inode number ino, which go-fuse has let go.
func (g *generations) forget(ino uint64, n *fileInode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.m[ino]
	if e == nil {
		return
	}
	delete(e.old, n)
	if len(e.old) == 0 {
		delete(g.m, ino)
	}
}
