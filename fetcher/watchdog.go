package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Causes of an exchange that its watchdog ended.
var (
	errStalled = errors.New("no progress")
	errTooSlow = errors.New("too slow")
)

// watchdog bounds one exchange with a server: a request, the wait for its
// reply's headers and the reading of its body. Every fetcher's exchanges
// have one (HTTP's attempts and streams, and the transport of gs:// and
// s3://), so that a server that stops sending, or drips, is treated alike
// whatever the source.
//
// The contract:
//   - An exchange that makes no progress for stall (no headers yet, or no
//     body bytes since the last read that returned some) is cancelled with
//     cause errStalled.
//   - Once limit has set a deadline, an exchange not done by then is
//     cancelled with cause errTooSlow: a trickle of bytes makes progress
//     for ever, a deadline does not.
//   - ended, and a read of a body wrapped by body that the cancellation
//     broke, then return an error that names the object (what), says why,
//     and wraps errStalled or errTooSlow and ErrTransient: another attempt
//     may succeed.
//
// Progress is cheap: a read that returns data stores the time in an atomic
// word, and touches no timer. When the stall timer fires it measures the
// time since the last progress, and re-arms itself for the rest of stall
// when that is shorter. The exchange's owner calls limit and stop, not
// concurrently with each other; progress and the timers may run at any
// time.
type watchdog struct {
	// ctx is the exchange's own context, made by newWatchdog (not a
	// caller's): ended reads its cause.
	ctx    context.Context
	cancel context.CancelCauseFunc
	what   string // the object, as errors name it: "GET https://host/key"
	stall  time.Duration
	start  time.Time
	last   atomic.Int64 // nanoseconds from start to the last progress

	mu       sync.Mutex
	timer    *time.Timer // GUARDED_BY(mu); the stall timer
	deadline *time.Timer // GUARDED_BY(mu); nil until limit
	stopped  bool        // GUARDED_BY(mu)

	// Set by limit, read by ended: both the owner's.
	bound time.Duration
	why   string // how bound was reckoned, for errTooSlow's message
}

// newWatchdog starts the watchdog of an exchange about what that begins
// now under parent, and returns the context to send the exchange with.
// The caller must call stop when the exchange is over.
func newWatchdog(parent context.Context, what string, stall time.Duration) (context.Context, *watchdog) {
	w := &watchdog{what: what, stall: stall, start: time.Now()}
	w.ctx, w.cancel = context.WithCancelCause(parent)
	w.mu.Lock()
	w.timer = time.AfterFunc(stall, w.fire)
	w.mu.Unlock()
	return w.ctx, w
}

// fire runs when the stall timer expires: it ends the exchange if nothing
// came for stall, or waits for the rest of stall after the last progress.
func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if idle < w.stall {
		w.timer.Reset(w.stall - idle)
		return
	}
	w.cancel(errStalled)
}

// progress records that the exchange made progress now.
func (w *watchdog) progress() { w.last.Store(int64(time.Since(w.start))) }

// limit sets the exchange's deadline, counted from its start: stall plus n
// bytes at minRate bytes a second (attemptBound), or maxAttemptBound when
// n is negative (no length known).
func (w *watchdog) limit(n, minRate int64) {
	w.bound, w.why = maxAttemptBound, "no length known"
	if n >= 0 {
		w.bound = attemptBound(w.stall, minRate, n)
		w.why = fmt.Sprintf("%v, plus %d bytes at %d bytes/s", w.stall, n, minRate)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.deadline != nil {
		return
	}
	w.deadline = time.AfterFunc(w.bound-time.Since(w.start), func() { w.cancel(errTooSlow) })
}

// stop ends the watchdog and releases the exchange's context. It may be
// called more than once.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	if w.deadline != nil {
		w.deadline.Stop()
	}
	w.mu.Unlock()
	w.cancel(nil)
}

// ended returns, if the watchdog cancelled the exchange, the error that
// says so (see the type's contract); otherwise nil. A parent context that
// ended first is not the watchdog's doing.
func (w *watchdog) ended() error {
	switch context.Cause(w.ctx) {
	case errStalled:
		return fmt.Errorf("%s: %w for %v: %w", w.what, errStalled, w.stall, ErrTransient)
	case errTooSlow:
		return fmt.Errorf("%s: %w: not done within %v (%s): %w", w.what, errTooSlow, w.bound, w.why, ErrTransient)
	}
	return nil
}

// body wraps the body of the exchange's reply: each read that returns
// data is progress (and counted in m, if not nil), a read that the
// watchdog broke returns ended's error, and Close stops the watchdog. With
// drain, Close first reads what is left, up to drainLimit, so that the
// connection can go back to the pool; the watchdog, still armed, bounds a
// drain that stalls.
func (w *watchdog) body(rc io.ReadCloser, m *Metrics, drain bool) io.ReadCloser {
	return &watchedBody{rc: rc, w: w, m: m, drain: drain}
}

// watchedBody is watchdog.body's reader.
type watchedBody struct {
	rc    io.ReadCloser
	w     *watchdog
	m     *Metrics
	drain bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.progress()
		if b.m != nil {
			b.m.AddBytes(int64(n))
		}
	}
	if err != nil && err != io.EOF {
		if e := b.w.ended(); e != nil {
			err = e
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	if b.drain {
		io.CopyN(io.Discard, b.rc, drainLimit)
	}
	err := b.rc.Close()
	b.w.stop()
	return err
}
