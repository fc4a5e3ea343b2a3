package fs

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/volfs/volfs/fetcher"
)

// ErrNoBacking is wrapped by Backing's refusals of a file whose bytes do
// not sit complete in a file of the source: the reader is served as
// before, through the tree.
var ErrNoBacking = errors.New("no backing file")

// Backing returns an open file whose bytes are, exactly, the bytes of f as
// the tree shows them, for a reader to read without the tree (FUSE
// passthrough); the caller closes it. Only a chunk of a local source whose
// array stores its chunks verbatim (decode.Array.Verbatim: no codec, no
// filter, no shard, proven from the metadata) has one, and only when the
// object at the chunk's own key is a regular file under the root
// (fetcher.File.Open) of exactly the chunk's decoded size, checked with
// fstat on the open descriptor. Everything else (views,
// derived files, remote sources, a missing chunk, a chunk stored under a
// transport-encoded twin, a size that differs: a corrupt chunk the tree
// reports as EIO) is refused with an error wrapping ErrNoBacking, or the
// source's error.
//
// The descriptor pins the file it opened: a source file replaced by a
// rename while it is open goes on serving the old file's bytes whole (and,
// since the kernel backs an inode by one file at a time, so do opens made
// while it is registered); a
// file rewritten in place is not something a local source may do while
// mounted (docs/RELIABILITY.md).
func (t *Tree) Backing(ctx context.Context, f File) (*os.File, error) {
	c, ok := f.(*chunkFile)
	if !ok || !c.a.Verbatim() {
		return nil, fmt.Errorf("fs: %w: not a verbatim chunk", ErrNoBacking)
	}
	src, ok := t.src.(*fetcher.File)
	if !ok {
		return nil, fmt.Errorf("fs: %w: not a local source", ErrNoBacking)
	}
	fh, _, err := src.Open(ctx, c.key)
	if err != nil {
		return nil, err
	}
	fi, err := fh.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Size() != c.size) {
		err = fmt.Errorf("fs: %s: %w: %d bytes stored, %d decoded", c.key, ErrNoBacking, fi.Size(), c.size)
	}
	if err != nil {
		fh.Close()
		return nil, err
	}
	return fh, nil
}
