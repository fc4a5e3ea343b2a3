package fetcher

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ctxReader is a body that ends only when its exchange's context does;
// until then each read returns one byte (a steady sender) or blocks (a
// stalled one), and a steady sender paces its bytes by every.
type ctxReader struct {
	ctx    context.Context
	steady bool
	every  time.Duration
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if !r.steady {
		<-r.ctx.Done()
		return 0, r.ctx.Err()
	}
	if r.every > 0 {
		t := time.NewTimer(r.every)
		defer t.Stop()
		select {
		case <-r.ctx.Done():
		case <-t.C:
		}
	}
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	p[0] = 1
	return 1, nil
}

func (r *ctxReader) Close() error { return nil }

// TestWatchdog: a body that stalls is ended with errStalled, one that
// drips is ended at its deadline with errTooSlow, each with an error that
// names the object and wraps ErrTransient; a caller's context that ends is
// not reported as the watchdog's doing.
func TestWatchdog(t *testing.T) {
	const what = "GET http://origin/key"
	for _, tc := range []struct {
		name     string
		steady   bool
		limit    bool // give a deadline of stall plus 10 bytes at 1000 bytes/s
		cancel   bool // cancel the caller's context
		want     error
		wantText string
	}{
		{"stalled", false, false, false, errStalled, "no progress for 50ms"},
		{"stalled with a deadline", false, true, false, errStalled, "no progress for 50ms"},
		{"drip past its deadline", true, true, false, errTooSlow, "not done within 60ms (50ms, plus 10 bytes at 1000 bytes/s)"},
		{"caller's context ended", false, false, true, context.Canceled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx, wd := newWatchdog(parent, what, 50*time.Millisecond)
			defer wd.stop()
			if tc.limit {
				wd.limit(10, 1000)
			}
			if tc.cancel {
				cancel()
			}
			var m Metrics
			body := wd.body(&ctxReader{ctx: ctx, steady: tc.steady}, &m, false)
			n, err := io.Copy(io.Discard, body)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tc.want)
			}
			if tc.wantText == "" {
				if wd.ended() != nil {
					t.Errorf("ended: got %v, want nil", wd.ended())
				}
				return
			}
			if !errors.Is(err, ErrTransient) || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("got %q, want it to wrap ErrTransient, name %q and say %q", err, what, tc.wantText)
			}
			if got := m.Stats().Bytes; got != n {
				t.Errorf("bytes counted: got %d, want %d", got, n)
			}
		})
	}
}

// TestWatchdogProgress: reads that return data, each well within stall,
// keep an exchange alive for several times stall.
func TestWatchdogProgress(t *testing.T) {
	const stall = 300 * time.Millisecond
	ctx, wd := newWatchdog(context.Background(), "GET http://origin/key", stall)
	defer wd.stop()
	body := wd.body(&ctxReader{ctx: ctx, steady: true, every: time.Millisecond}, nil, false)
	start := time.Now()
	b := make([]byte, 1)
	for time.Since(start) < 3*stall {
		if _, err := body.Read(b); err != nil {
			t.Fatalf("after %v: %v, want the body still open", time.Since(start), err)
		}
	}
	if err := body.Close(); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Error("the exchange's context is live after Close, want it released")
	}
	if err := wd.ended(); err != nil {
		t.Errorf("ended after Close: got %v, want nil", err)
	}
}

// TestHTTPStreamStall: a stream whose server stops sending mid-body fails
// its read with an error that says so and names the stream, instead of a
// bare cancellation.
func TestHTTPStreamStall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Header().Set("Content-Range", "bytes 0-99/100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(seq(50))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	opts := fastRetries
	opts.StallTimeout = 50 * time.Millisecond
	h := newHTTP(t, srv.URL, opts)
	body, err := h.Stream(context.Background(), "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	got, err := io.ReadAll(body)
	if len(got) != 50 || !errors.Is(err, errStalled) || !errors.Is(err, ErrTransient) || !strings.Contains(err.Error(), "stream "+srv.URL+"/k from 0") {
		t.Errorf("got %d bytes, %v; want 50 bytes and a stall naming the stream", len(got), err)
	}
}
