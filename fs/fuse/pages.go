package fuse

import (
	"context"
	"fmt"
	"sync"

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
// open keeps the pages only while that version is current
// (fs.Tree.Current: memory holds it, or its objects' identities are
// current, free within --metadata-ttl); else it opens without
// FOPEN_KEEP_CACHE, and the kernel drops the inode's pages at the open.
// A read of a handle whose version is not the one the pages hold fails
// with ESTALE (one log line naming the file), so that it never adds pages
// of another version: a handle open across a rewrite once a new open
// dropped its version's pages, and a handle that found a new version in
// the moment between its open's check and its first read. The next open
// finds the pages' version gone and drops them.
type pages struct {
	mu      sync.Mutex
	version string // GUARDED_BY(mu); of the pages the kernel may hold
	has     bool   // GUARDED_BY(mu); the kernel may hold pages (version is set)
	drops   int    // GUARDED_BY(mu); the opens that dropped the pages
	// opened is, for each handle open, drops at its open.
	opened map[*fs.Handle]int // GUARDED_BY(mu)
}

// open reports whether the open of h, a handle of f, may keep the pages
// the kernel holds, and forgets them when it may not (the open then
// drops them).
func (p *pages) open(ctx context.Context, t tree, f fs.File, h *fs.Handle) bool {
	p.mu.Lock()
	v, has := p.version, p.has
	p.mu.Unlock()
	keep := !has || t.Current(ctx, f, v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !keep {
		p.has = false
		p.drops++
	}
	if p.opened == nil {
		p.opened = make(map[*fs.Handle]int)
	}
	p.opened[h] = p.drops
	return keep
}

// close forgets h, which is closed.
func (p *pages) close(h *fs.Handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.opened, h)
}

// read reports whether the bytes of a read of h about to be answered may
// join the kernel's pages: an error wrapping fetcher.ErrChanged (ESTALE)
// when they are of another version than the pages, or when h was opened
// before an open dropped the pages (its version may be the one dropped).
func (p *pages) read(h *fs.Handle, path string) error {
	v, ok := h.Version()
	if !ok {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	drops, known := p.opened[h]
	switch {
	case p.has && p.version == v:
		return nil
	case p.has, known && drops < p.drops:
		return fmt.Errorf("fuse: %s: the chunk was rewritten while this handle read it, or since the kernel cached it: open it again to read the new version: %w", path, fetcher.ErrChanged)
	}
	p.version, p.has = v, true
	return nil
}
