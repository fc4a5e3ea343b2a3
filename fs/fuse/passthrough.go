package fuse

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// FUSE passthrough (kernel 6.9 and later, CAP_SYS_ADMIN): a chunk whose
// decoded bytes are its stored file's bytes (fs.Tree.Backing) is opened
// with that file as its backing file, and the kernel reads it with no
// request to volfs. go-fuse registers the descriptor that the handle's
// PassthroughFd returns (once per inode while any handle of it is open)
// and turns passthrough off for the mount at the first refusal; every
// handle keeps the tree's Handle, so a refused one is served as before.

// backer is what passthrough asks of the tree: *fs.Tree's Backing.
type backer interface {
	Backing(ctx context.Context, f fs.File) (*os.File, error)
}

// passHandle is a Handle with the file backing it.
type passHandle struct {
	*fs.Handle
	file *os.File
}

// PassthroughFd gives go-fuse the backing file's descriptor to register.
func (h *passHandle) PassthroughFd() (int, bool) { return int(h.file.Fd()), true }

// passthrough decides once per mount whether opens may pass through.
type passthrough struct {
	on     bool
	reason string // why not, when !on
}

// probePassthrough finds whether the mount served by srv can pass files
// through: only when asked for (Passthrough), not with DirectIO, only for a local source
// without cache tiers (a disk or shared cache is filled by reads), and only when the kernel registers a backing file (it needs
// CAP_SYS_ADMIN and CONFIG_FUSE_PASSTHROUGH), tried on the volfs binary
// itself and unregistered at once. The outcome is logged once.
func probePassthrough(srv *fuse.Server, t tree, opts MountOptions) *passthrough {
	p := &passthrough{}
	_, isBacker := t.(backer)
	_, local := t.Source().(*fetcher.File)
	switch {
	case !opts.Passthrough:
		p.reason = "not asked for (--passthrough)"
	case opts.DirectIO:
		p.reason = "--direct-io"
	case !isBacker || !local:
		p.reason = "the source is not local"
	case t.Options().Disk != nil || len(t.Options().Tiers) > 0:
		// A cache tier keeps what is read, for a later mount or for an
		// origin that cannot be reached: reads must reach volfs to fill it.
		p.reason = "a disk or shared cache is set (--cache-dir, --shared-cache) and is filled by reads"
	default:
		p.reason = tryBacking(srv)
		p.on = p.reason == ""
	}
	if p.on {
		t.Options().Log.Info("passthrough: on: the kernel reads verbatim local chunks from their files")
	} else {
		t.Options().Log.Info("passthrough: off: " + p.reason)
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

// open returns h with its backing file when the mount passes f through
// and the tree has one, or h as it is.
func (p *passthrough) open(ctx context.Context, t tree, f fs.File, h *fs.Handle) any {
	if p == nil || !p.on {
		return h
	}
	b, err := t.(backer).Backing(ctx, f)
	if err != nil {
		// Served through the tree, which reports a failure of the
		// source (a refused link, a corrupt chunk) with its own log line.
		return h
	}
	return &passHandle{Handle: h, file: b}
}

// handleOf returns the tree's Handle inside the handle that Open returned.
func handleOf(fh any) (*fs.Handle, bool) {
	switch h := fh.(type) {
	case *fs.Handle:
		return h, true
	case *passHandle:
		return h.Handle, true
	}
	return nil, false
}

// release closes the backing file of a handle that has one. The kernel
// holds its own reference to a registered file, so the bytes stay
// readable through the mount until its last handle closes.
func release(fh any) {
	if h, ok := fh.(*passHandle); ok {
		h.file.Close()
	}
}
