package fuse

import (
	"context"
	"fmt"
	"sync"

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
// But the kernel reads every handle of an inode through its one page
// cache, so pages of the new version would reach a handle still open on
// the old (a reader paused across the rewrite); while such a handle is
// open, the new open instead reads past the page cache (FOPEN_DIRECT_IO,
// keeping the pages): the old handle reads the old version from the
// pages or from the bytes it holds, the new one the new version, each
// whole. A read of a handle through the page cache whose version is not
// the one the pages hold (it met a change in the moment between its
// open's check and its first read) fails with ESTALE, one log line naming
// the file, rather than add pages of another version; the next open
// drops them (or reads past them while a handle reads through them).
type pages struct {
	mu      sync.Mutex
	version string // GUARDED_BY(mu); of the pages the kernel may hold
	has     bool   // GUARDED_BY(mu); the kernel may hold pages (version is set)
	// stale is set when a read found the chunk of another version
	// than the pages: the next open drops them whatever the tree says.
	stale bool // GUARDED_BY(mu)
	// opened holds the handles open, each with whether it reads past
	// the page cache.
	opened map[*fs.Handle]bool // GUARDED_BY(mu)
}

// open returns the open flags of h, a handle of f opened with flags:
// flags, or without FOPEN_KEEP_CACHE when the pages must be dropped, or
// with FOPEN_DIRECT_IO when they must be read past (see pages).
func (p *pages) open(ctx context.Context, t tree, f fs.File, h *fs.Handle, flags uint32) uint32 {
	p.mu.Lock()
	v, has := p.version, p.has
	p.mu.Unlock()
	current := !has || t.Current(ctx, f, v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.has != has || p.version != v {
		// Another handle changed them meanwhile: keep only no pages.
		current = !p.has
	}
	current = current && !p.stale
	if p.opened == nil {
		p.opened = make(map[*fs.Handle]bool)
	}
	direct := false
	switch {
	case current:
	case !p.cachedOpen():
		p.has, p.stale = false, false
		flags &^= fuse.FOPEN_KEEP_CACHE
	default:
		direct = true
		flags |= fuse.FOPEN_DIRECT_IO
	}
	p.opened[h] = direct
	return flags
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
