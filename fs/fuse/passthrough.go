package fuse

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// FUSE passthrough (kernel 6.9 and later, CAP_SYS_ADMIN): a chunk whose
// decoded bytes sit whole in a file is opened with that file as its
// backing file, and the kernel reads it with no request to volfs. Two
// kinds of file qualify: a verbatim chunk's own file in a local source
// (fs.Tree.Backing; asked for with --passthrough), and the data file of a
// chunk's plain entry in the disk cache (fs.Tree.DiskBacking; on whenever
// there is a disk cache and the kernel allows it). go-fuse registers the
// descriptor that the handle's PassthroughFd returns (once per inode while
// any handle of it is open) and turns passthrough off for the mount at the
// first refusal; every handle keeps the tree's Handle, so a refused one is
// served as before.
//
// The kernel backs an inode by one file at a time, and refuses an open
// that would mix modes: one without passthrough while a handle with it is
// open (EINVAL), one with it while a handle without is open (ETXTBSY).
// Whether a chunk has a backing file changes while mounted (a disk entry
// is written behind the first read), so each inode counts its handles by
// mode (modes) and an open follows the handles already open.

// backer is what passthrough asks of the tree: *fs.Tree's Backing and
// DiskBacking.
type backer interface {
	Backing(ctx context.Context, f fs.File) (*os.File, error)
	DiskBacking(ctx context.Context, f fs.File) (*os.File, error)
}

// passHandle is a Handle that may pass through, with the file backing it,
// or nil when it has none (it then rides on the inode's backing file if
// one is registered, else is served through the tree).
type passHandle struct {
	*fs.Handle
	file  *os.File
	modes *modes
	// cached is set when PassthroughFd declined: the kernel serves the
	// handle through volfs.
	cached bool
}

// PassthroughFd gives go-fuse the backing file's descriptor to register.
// go-fuse asks only when no handle of the inode is registered: it declines
// when the handle has no file or a handle without passthrough is open.
func (h *passHandle) PassthroughFd() (int, bool) {
	h.modes.mu.Lock()
	defer h.modes.mu.Unlock()
	if h.file == nil || h.modes.cached > 0 {
		h.modes.pass--
		h.modes.cached++
		h.cached = true
		return 0, false
	}
	return int(h.file.Fd()), true
}

// cachedHandle is a Handle served through volfs, counted in its inode's
// modes.
type cachedHandle struct {
	*fs.Handle
	modes *modes
}

// modes counts the open handles of one inode by mode: served through volfs
// (cached: plain Handles, and passHandles whose PassthroughFd declined),
// or passed through (the other passHandles). The counts drop at go-fuse's
// Release, after the kernel's own, so they err towards handles still open.
type modes struct {
	mu           sync.Mutex
	cached, pass int // GUARDED_BY(mu)
}

// passthrough decides once per mount whether opens may pass through.
type passthrough struct {
	local, disk bool   // verbatim local chunks; plain disk cache entries
	min         int64  // the smallest file that passes through (PassthroughMinSize)
	reason      string // why neither, when neither
}

// probePassthrough finds whether the mount served by srv can pass files
// through, and logs the outcome once. Local chunks pass through only when
// asked for (Passthrough), for a local source without cache tiers (a disk
// or shared cache is filled by reads); disk cache entries whenever there
// is a disk cache (Options.Disk), unless DiskPassthrough is off, and then
// the disk cache keeps chunks plain (cache.Disk.KeepPlain). Neither with
// DirectIO, and neither unless the kernel registers a backing file (it
// needs CAP_SYS_ADMIN and CONFIG_FUSE_PASSTHROUGH), tried on the volfs
// binary itself and unregistered at once.
//
// Disk entries pass through by default where local files do not: the
// cache writes each data file once, under a name only its user can write
// in a directory of mode 0700, and renames it into place, so nothing
// rewrites one in place while the kernel reads it.
func probePassthrough(srv *fuse.Server, t tree, opts MountOptions) *passthrough {
	p := &passthrough{min: max(opts.PassthroughMinSize, 0)}
	_, isBacker := t.(backer)
	_, local := t.Source().(*fetcher.File)
	disk := t.Options().Disk
	wantLocal := opts.Passthrough && isBacker && local && disk == nil && len(t.Options().Tiers) == 0
	wantDisk := disk != nil && isBacker && !opts.NoDiskPassthrough
	switch {
	case opts.DirectIO && (opts.Passthrough || wantDisk):
		p.reason = "--direct-io"
	case wantLocal || wantDisk:
		if p.reason = tryBacking(srv); p.reason == "" {
			p.local, p.disk = wantLocal, wantDisk
		}
	case opts.Passthrough && (!isBacker || !local):
		p.reason = "the source is not local"
	case opts.Passthrough:
		// A cache tier keeps what is read, for a later mount or for an
		// origin that cannot be reached: reads must reach volfs to fill it.
		p.reason = "a shared cache is set (--shared-cache) and is filled by reads"
	case disk != nil:
		p.reason = "--no-disk-passthrough"
	default:
		p.reason = "not asked for (--passthrough), and no disk cache (--cache-dir)"
	}
	log := t.Options().Log
	floor := ""
	if p.min > 0 {
		floor = fmt.Sprintf(", those of at least %d bytes (--passthrough-min-size; smaller ones are served by volfs)", p.min)
	}
	if p.local {
		log.Info("passthrough: on: the kernel reads verbatim local chunks from their files" + floor)
	}
	if p.disk {
		disk.KeepPlain()
		log.Info("passthrough: on: the kernel reads chunks kept in the disk cache from their data files (kept uncompressed)" + floor)
	}
	if !p.local && !p.disk {
		log.Info("passthrough: off: " + p.reason)
	}
	return p
}

// tryBacking registers and unregisters a backing file, returning why the
// kernel refused, or "".
func tryBacking(srv *fuse.Server) string {
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Sprintf("no file to try: %v", err)
	}
	defer exe.Close()
	id, errno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(exe.Fd())})
	switch {
	case errno == syscall.EPERM:
		return "the kernel refuses (needs CAP_SYS_ADMIN: run as root)"
	case errno != 0:
		return fmt.Sprintf("the kernel refuses (%v: needs Linux 6.9 and later with CONFIG_FUSE_PASSTHROUGH)", errno)
	}
	srv.UnregisterBackingFd(id)
	return ""
}

// open returns h as the handle of an open of f, whose inode's handles m
// counts: with its backing file when the mount passes f through, the tree
// has one and no handle of the inode is open without passthrough; as it
// is when one is.
func (p *passthrough) open(ctx context.Context, t tree, f fs.File, h *fs.Handle, m *modes) any {
	if p == nil || !p.local && !p.disk || f.Size() < p.min {
		return h
	}
	m.mu.Lock()
	cached := m.cached > 0
	m.mu.Unlock()
	var b *os.File
	if !cached {
		// Refusals are served through the tree, which reports a failure
		// of the source (a refused link, a corrupt chunk) with its own
		// log line.
		if p.disk {
			b, _ = t.(backer).DiskBacking(ctx, f)
		}
		if b == nil && p.local {
			b, _ = t.(backer).Backing(ctx, f)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cached > 0 {
		if b != nil {
			b.Close()
		}
		m.cached++
		return &cachedHandle{Handle: h, modes: m}
	}
	// With no file, the handle rides on a backing file registered for
	// the inode by a handle open now, or declines (PassthroughFd).
	m.pass++
	return &passHandle{Handle: h, file: b, modes: m}
}

// handleOf returns the tree's Handle inside the handle that Open returned.
func handleOf(fh any) (*fs.Handle, bool) {
	switch h := fh.(type) {
	case *fs.Handle:
		return h, true
	case *passHandle:
		return h.Handle, true
	case *cachedHandle:
		return h.Handle, true
	}
	return nil, false
}

// release closes the tree's handle inside fh (fs.Handle.Close), closes the
// backing file of a handle that has one, and takes a counted handle off
// its inode's modes. The kernel holds its own reference to a registered
// file, so the bytes stay readable through the mount until its last
// handle closes.
func release(fh any) {
	if h, ok := handleOf(fh); ok {
		h.Close()
	}
	switch h := fh.(type) {
	case *passHandle:
		if h.file != nil {
			h.file.Close()
		}
		h.modes.mu.Lock()
		if h.cached {
			h.modes.cached--
		} else {
			h.modes.pass--
		}
		h.modes.mu.Unlock()
	case *cachedHandle:
		h.modes.mu.Lock()
		h.modes.cached--
		h.modes.mu.Unlock()
	}
}
