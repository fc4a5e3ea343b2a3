package fetcher

import (
	"context"
	"io/fs"
)

// Local is a Fetcher over a directory of this machine (File): its objects
// are files below Root, and it can tell each one's mode. Callers use it
// through a type assertion on this interface, never on a concrete type:
// to keep a mount out of the source it serves, to show the source's
// permissions, and to know that a fetch costs CPU rather than waiting.
type Local interface {
	Fetcher
	// Root returns the absolute path of the source directory.
	Root() string
	// Mode returns the type and permission bits of the file or directory
	// at key ("" for the root), read when asked.
	Mode(ctx context.Context, key string) (fs.FileMode, error)
}

var (
	_ Local   = (*File)(nil)
	_ Statser = (*File)(nil)
	_ Statser = (*HTTP)(nil)
	_ Statser = (*GCS)(nil)
)
