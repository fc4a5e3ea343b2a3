package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/volfs/volfs/fetcher"
)

// errno is the one mapping from errors to what the kernel is told. op and
// path name the request for the log line that every EIO gets.
func errno(ctx context.Context, log *slog.Logger, err error, op, path string) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, fetcher.ErrNotExist), errors.Is(err, fetcher.ErrInvalidKey):
		return syscall.ENOENT
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return syscall.EINTR
	}
	log.Error(fmt.Sprintf("%s %s: %v", op, path, err))
	return syscall.EIO
}
