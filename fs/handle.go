package fs

import (
	"context"
	"sync/atomic"
	"syscall"
)

// Handle is a file of the tree opened by a reader that is not the FUSE
// mount (volfs serve answers HTTP and WebDAV requests with handles). Its
// reads take the mount's path: the same chunk store and caches, the
// read-ahead of the reader that opened it, the read timeout, and the one
// error mapping. It is safe for concurrent use.
type Handle struct {
	t       *Tree
	f       File
	path    string
	reader  uint32
	touched atomic.Bool // the first read has told the read-ahead (readers.touch)
}

// Open opens f, found at path p (for log lines), for reader: an id that
// plays the part of the mount's process id for read-ahead, so that one
// client reading chunk files in key order has the next ones prefetched as
// a process reading them through the mount would. It fails as the mount's
// open does: a missing chunk with MissingError is not found.
func (t *Tree) Open(ctx context.Context, f File, p string, reader uint32) (*Handle, error) {
	if o, ok := f.(opener); ok {
		if err := o.open(ctx); err != nil {
			return nil, err
		}
	}
	return &Handle{t: t, f: f, path: p, reader: reader}, nil
}

// Size is the file's size, from the metadata.
func (h *Handle) Size() int64 { return h.f.Size() }

// ReadAt reads len(p) bytes at off, or fewer at the end of the file, with
// File.ReadAt's contract, bounded by Options.ReadTimeout as a read of the
// mount is. An error of a read that timed out wraps ErrReadTimeout.
func (h *Handle) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	rctx, cancel := h.t.readContext(ctx)
	defer cancel()
	if f, ok := h.f.(*chunkFile); ok && h.touched.CompareAndSwap(false, true) {
		_, hit, err := f.chunkHit(rctx)
		f.t.readers.touch(f, h.reader, h.reader, !hit) // a client is one thread
		if err != nil && !isMissing(err) {
			return 0, h.t.readError(ctx, rctx, err)
		}
	}
	n, err := h.f.ReadAt(rctx, p, off)
	return n, h.t.readError(ctx, rctx, err)
}

// Errno is the mount's one mapping from an error of a Lookup, List, Open or
// read to what the kernel would be told: ENOENT for not found, EACCES for a
// refusal, EINTR for a request cancelled by its caller (ctx), EIO for the
// rest, which it logs once per path (op and p name the request). Other
// front ends map its answer, so that they agree with the mount.
func (t *Tree) Errno(ctx context.Context, err error, op, p string) syscall.Errno {
	return t.errno(ctx, err, op, p)
}
