package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// TestReadError: only a read context's own deadline makes a read timeout,
// which maps to EIO; the caller's end stays a cancellation (EINTR).
func TestReadError(t *testing.T) {
	tr := &Tree{opts: Options{ReadTimeout: time.Millisecond}, log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	rctx, cancel := tr.readContext(ctx)
	defer cancel()
	<-rctx.Done()
	err := tr.readError(ctx, rctx, rctx.Err())
	if !errors.Is(err, ErrReadTimeout) {
		t.Errorf("deadline passed: got %v, want ErrReadTimeout", err)
	}
	if got := tr.Errno(ctx, err, "read", "x"); got != syscall.EIO {
		t.Errorf("errno of a read timeout: got %v, want EIO", got)
	}

	parent, stop := context.WithCancel(context.Background())
	rctx, cancel = tr.readContext(parent)
	defer cancel()
	stop()
	err = tr.readError(parent, rctx, rctx.Err())
	if errors.Is(err, ErrReadTimeout) {
		t.Errorf("caller gone: got %v, want no read timeout", err)
	}
	if got := tr.Errno(parent, err, "read", "x"); got != syscall.EINTR {
		t.Errorf("errno of a cancelled read: got %v, want EINTR", got)
	}
	if err := tr.readError(ctx, rctx, fetcher.ErrNotExist); !errors.Is(err, fetcher.ErrNotExist) {
		t.Errorf("other errors pass through: got %v", err)
	}
}

// TestReadCtx: a read's context under a timeout behaves as the
// context.WithTimeoutCause it stands for, whether or not its Done channel
// was ever asked for: it ends at its deadline with ErrReadTimeout (as its
// cause once armed, as a timeout readError reports either way), with its
// parent, and on release, and a context derived from it ends with it.
func TestReadCtx(t *testing.T) {
	for _, tc := range []struct {
		name        string
		timeout     time.Duration
		arm         bool // ask for Done before the end
		cancel      bool // end the parent
		release     bool
		want        error // of Err, once ended
		wantTimeout bool  // readError reports a read timeout
	}{
		{"deadline, never armed", time.Nanosecond, false, false, false, context.DeadlineExceeded, true},
		{"deadline, armed", 10 * time.Millisecond, true, false, false, context.DeadlineExceeded, true},
		{"parent ended, never armed", time.Hour, false, true, false, context.Canceled, false},
		{"parent ended, armed", time.Hour, true, true, false, context.Canceled, false},
		{"released, never armed", time.Hour, false, false, true, context.Canceled, false},
		{"released, armed", time.Hour, true, false, true, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancelParent := context.WithCancel(context.Background())
			defer cancelParent()
			tree := &Tree{opts: Options{ReadTimeout: tc.timeout}}
			rctx, release := tree.readContext(parent)
			defer release()
			var derived context.Context
			if tc.arm {
				var cancel context.CancelFunc
				derived, cancel = context.WithCancel(rctx)
				defer cancel()
			}
			if tc.cancel {
				cancelParent()
			}
			if tc.release {
				release()
			}
			check := func(when string) {
				t.Helper()
				if err := rctx.Err(); err != tc.want {
					t.Errorf("Err %s: got %v, want %v", when, err, tc.want)
				}
				err := tree.readError(parent, rctx, errors.New("load failed"))
				if got := errors.Is(err, ErrReadTimeout); got != tc.wantTimeout {
					t.Errorf("readError %s: got %v, want a read timeout: %v", when, err, tc.wantTimeout)
				}
			}
			if !tc.arm {
				// Ended before anything asked for Done.
				check("unarmed")
			}
			<-rctx.Done()
			check("after Done")
			if tc.arm {
				<-derived.Done()
				if tc.wantTimeout && context.Cause(derived) != ErrReadTimeout {
					t.Errorf("cause of a derived context: got %v, want %v", context.Cause(derived), ErrReadTimeout)
				}
			}
		})
	}
}
