package fs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// readCtx is the context of one read under Options.ReadTimeout: its
// parent's, ended at deadline with ErrReadTimeout as its cause. A read
// served from memory never waits, so it never needs a Done channel, and
// making one costs a goroutine, a timer and five allocations per read
// (BenchmarkReadContext): go-fuse's request context is not one the
// context package can hook without a goroutine. readCtx makes its channel,
// a context.WithDeadlineCause of the parent, only when something asks for
// Done (a read that waits for a load, or that derives a context of its
// own, which asks for it); until then Err reads the parent and the clock.
// Safe for concurrent use.
type readCtx struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	armed    atomic.Pointer[armedCtx] // set once, under mu
	released bool                     // GUARDED_BY(mu); release was called
}

// armedCtx is the real context a readCtx made, and its cancel.
type armedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

var _ context.Context = (*readCtx)(nil)

// newReadCtx returns the context of a read under parent that ends after
// timeout, and the function that releases it.
func newReadCtx(parent context.Context, timeout time.Duration) (*readCtx, context.CancelFunc) {
	c := &readCtx{parent: parent, deadline: time.Now().Add(timeout)}
	return c, c.release
}

// arm returns the real context, making it on first use.
func (c *readCtx) arm() context.Context {
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	ctx, cancel := context.WithDeadlineCause(c.parent, c.deadline, ErrReadTimeout)
	if c.released {
		cancel() // asked for after the read: ended, as a released context is
	}
	c.armed.Store(&armedCtx{ctx, cancel})
	return ctx
}

// release ends the context, as a CancelFunc does.
func (c *readCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if a := c.armed.Load(); a != nil {
		a.cancel()
	}
}

func (c *readCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *readCtx) Done() <-chan struct{} { return c.arm().Done() }

func (c *readCtx) Err() error {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	released := c.released
	c.mu.Unlock()
	switch {
	case released:
		return context.Canceled
	case !time.Now().Before(c.deadline):
		return context.DeadlineExceeded
	}
	return nil
}

// Value answers from the real context once made, so that context.Cause
// finds its cause; before, from the parent.
func (c *readCtx) Value(key any) any {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// timedOut reports whether the read deadline of rctx, a context from
// readContext, has ended it.
func timedOut(rctx context.Context) bool {
	if context.Cause(rctx) == ErrReadTimeout {
		return true
	}
	_, lazy := rctx.(*readCtx)
	return lazy && rctx.Err() == context.DeadlineExceeded
}
