package fetcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/googleapis/gax-go/v2"
)

// retryPolicy is how every fetcher of this package repeats a request that
// failed in a way that may pass (an error wrapping ErrTransient): the HTTP
// and s3:// fetchers run their attempts through it, and the gs:// fetcher
// gives the storage library its attempts and back-off (gax), so that a read
// the library resumes mid-body keeps the bytes it has.
//
// The rules, for every source alike:
//   - At most attempts attempts; then the last error is returned, saying
//     how many attempts were made.
//   - After failed attempt n (from 0) the wait is a random duration in
//     [0, min(max, base<<n)): full jitter spreads out clients that failed
//     together (Brooker, "Exponential Backoff and Jitter", AWS 2015).
//   - A reply that says how long to wait (Retry-After on a 429 or 503, in
//     seconds or as an HTTP date, whatever the source: S3's 503 SlowDown
//     carries one) replaces the jittered wait, capped at max.
//   - The budget is the call's context deadline, when it has one: a wait
//     that would end past it is not waited; the call gives up at once
//     with the last error, still transient.
//   - A cancelled context ends the wait at once and is the error returned.
type retryPolicy struct {
	attempts  int
	base, max time.Duration
}

// run calls try until it succeeds, fails with an error that is not
// transient, or the policy gives up (see retryPolicy). Each repeated
// attempt is counted in m; the outcome is counted by the caller. The error
// returned is try's last, or ctx's.
func (p retryPolicy) run(ctx context.Context, m *Metrics, try func() error) error {
	for n := 0; ; n++ {
		err := try()
		if err == nil || !errors.Is(err, ErrTransient) || ctx.Err() != nil {
			return err
		}
		if n+1 >= p.attempts {
			return &gaveUpError{err: err, attempts: n + 1}
		}
		wait := p.wait(n, err)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return &gaveUpError{err: err, attempts: n + 1, budget: true}
		}
		m.Retry()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// wait returns the wait after failed attempt n (from 0) that ended with err.
func (p retryPolicy) wait(n int, err error) time.Duration {
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return min(ra.delay, p.max)
	}
	ceiling := p.max
	if n < 62 && p.base <= ceiling>>n {
		ceiling = p.base << n
	}
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling)
}

// gax returns the policy's back-off for the storage library of the gs://
// fetcher: full jitter under a ceiling that doubles from base up to max,
// as wait. (The library reads no Retry-After; GCS sends none.)
func (p retryPolicy) gax() gax.Backoff {
	return gax.Backoff{Initial: p.base, Max: p.max, Multiplier: 2}
}

// gaveUpError is the last transient error of a call that the policy stopped
// retrying.
type gaveUpError struct {
	err      error
	attempts int
	budget   bool // stopped because the next wait would pass the call's deadline
}

func (e *gaveUpError) Error() string {
	if e.budget {
		return fmt.Sprintf("%v (gave up after %d attempts: no time left for another)", e.err, e.attempts)
	}
	return fmt.Sprintf("%v (gave up after %d attempts)", e.err, e.attempts)
}

func (e *gaveUpError) Unwrap() error { return e.err }

// retryAfterError is a transient error whose server asked for a delay
// before the next attempt.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }

func (e *retryAfterError) Unwrap() error { return e.err }

// maxRetryAfter bounds a Retry-After before any arithmetic on it; the
// policy's max caps it further.
const maxRetryAfter = 24 * time.Hour

// withRetryAfter returns err (a transient failure of a reply with status and
// header) carrying the delay that the reply's Retry-After asks for, when
// the status is 429 or 503 and the header is seconds or an HTTP date.
func withRetryAfter(err error, status int, header http.Header) error {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return err
	}
	v := strings.TrimSpace(header.Get("Retry-After"))
	if v == "" {
		return err
	}
	if secs, e := strconv.ParseInt(v, 10, 64); e == nil {
		if secs < 0 {
			return err
		}
		return &retryAfterError{err, min(time.Duration(min(secs, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)}
	}
	if t, e := http.ParseTime(v); e == nil {
		return &retryAfterError{err, min(max(time.Until(t), 0), maxRetryAfter)}
	}
	return err
}
