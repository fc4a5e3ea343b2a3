package fs

import (
	"context"
	"errors"
	"fmt"
)

// ErrReadTimeout is the cause of a read that did not finish within
// Options.ReadTimeout. It maps to EIO: the source is too slow, which a
// reader should be told rather than kept waiting.
var ErrReadTimeout = errors.New("fs: read timed out")

// readContext returns the context of one read of the mount: ctx, ended
// after Options.ReadTimeout with ErrReadTimeout as its cause. Without a
// timeout it is ctx itself; with one, a readCtx, which costs nothing more
// until the read waits.
func (t *Tree) readContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.opts.ReadTimeout <= 0 {
		return ctx, func() {}
	}
	return newReadCtx(ctx, t.opts.ReadTimeout)
}

// readError returns err, the failure of work done under rctx, a context
// from readContext(ctx), as a read timeout when rctx's deadline, not ctx,
// ended it.
func (t *Tree) readError(ctx, rctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !timedOut(rctx) {
		return err
	}
	return fmt.Errorf("%w: no answer within %v (--read-timeout): %w", ErrReadTimeout, t.opts.ReadTimeout, err)
}
