package fetcher

import (
	"context"
	"os"
)

// Open opens the object at key as Get would read it: a regular file under
// the root (symbolic links followed only as Get follows them), checked on
// the open descriptor. It returns the open file and its Identity, taken
// from the descriptor, so that the identity names exactly the bytes the
// file holds while it stays open and unchanged in place. The caller
// closes the file. It is for handing a file's bytes to a reader without
// reading them (FUSE passthrough); the object is not counted as read.
func (f *File) Open(ctx context.Context, key string) (*os.File, Identity, error) {
	p, err := f.path(ctx, key)
	if err != nil {
		return nil, "", err
	}
	fh, fi, err := f.openRegular(p)
	if err != nil {
		return nil, "", err
	}
	return fh, fileIdentity(fi), nil
}
