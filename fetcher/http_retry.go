package fetcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// do sends a request and hands the reply to read until read succeeds, or
// fails in a way the retry policy does not repeat (see retryPolicy). The
// body is drained and closed after read returns. expect tells, from the
// reply's status and headers, the most body bytes read consumes, which sets
// the attempt's deadline when the reply's Content-Length is larger or
// absent (see HTTPOptions.MinRate). Errors are prefixed with the method and
// URL.
func (h *HTTP) do(ctx context.Context, method string, u *url.URL, header http.Header, expect expectFunc, read func(*http.Response) error) error {
	err := h.policy().run(ctx, &h.m, func() error { return h.try(ctx, method, u, header, expect, read) })
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: %w", method, u.Redacted(), ctx.Err())
	}
	h.m.Done(err)
	return err
}

// policy returns h's retry policy.
func (h *HTTP) policy() retryPolicy {
	return retryPolicy{attempts: h.opts.MaxAttempts, base: h.opts.BaseBackoff, max: h.opts.MaxBackoff}
}

// expectFunc tells how many body bytes an operation reads from a reply.
type expectFunc func(*http.Response) int64

// upTo is the expectFunc of an operation that reads at most n bytes of any
// reply.
func upTo(n int64) expectFunc { return func(*http.Response) int64 { return n } }

// try makes one attempt of do.
func (h *HTTP) try(ctx context.Context, method string, u *url.URL, header http.Header, expectOf expectFunc, read func(*http.Response) error) error {
	// The watchdog cancels the attempt when it makes no progress for
	// StallTimeout; once the headers are in, it bounds the whole attempt
	// too (HTTPOptions.MinRate).
	actx, wd := newWatchdog(ctx, method+" "+u.Redacted(), h.opts.StallTimeout)
	defer wd.stop()

	req, err := http.NewRequestWithContext(actx, method, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := h.client.Do(req)
	if err != nil {
		err = transportError(err)
	} else {
		expect := expectOf(resp)
		if resp.ContentLength >= 0 && resp.ContentLength < expect {
			expect = resp.ContentLength
		}
		wd.limit(expect, h.opts.MinRate)
		resp.Body = wd.body(resp.Body, &h.m, false)
		err = read(resp)
		drain(resp.Body)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Whatever broke, the caller's ending context is the cause that
		// matters, and it must never be retried.
		err = ctx.Err()
	case wd.ended() != nil:
		return wd.ended()
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	return nil
}

// maxAttemptBound caps attemptBound, far beyond any real transfer, so that
// the arithmetic cannot overflow.
const maxAttemptBound = 7 * 24 * time.Hour

// attemptBound is how long an attempt whose body has n bytes may take from
// its request to its end: stall (StallTimeout) for the latency, plus n
// bytes at minRate (MinRate). The HTTP fetcher's attempts and the gs://
// fetcher's exchanges share it.
func attemptBound(stall time.Duration, minRate, n int64) time.Duration {
	transfer := float64(n) / float64(minRate) * float64(time.Second)
	return min(stall+time.Duration(min(transfer, float64(maxAttemptBound))), maxAttemptBound)
}

// statusError classifies a reply that the operation cannot use.
func statusError(resp *http.Response) error {
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%s: %w", resp.Status, ErrNotExist)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%s: %w", resp.Status, ErrPermission)
	case code == http.StatusTooManyRequests || code >= 500 && code < 600:
		return withRetryAfter(fmt.Errorf("%s: %w", resp.Status, ErrTransient), code, resp.Header)
	}
	return fmt.Errorf("unexpected status %s", resp.Status)
}

// transportError classifies an error of http.Client.Do that is not the
// caller's context ending.
func transportError(err error) error {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err // the URL is in the prefix already
	}
	if errors.Is(err, ErrNotExist) || errors.Is(err, ErrPermission) || errors.Is(err, errTooManyRedirects) {
		return err // from checkRedirect
	}
	// Retrying cannot fix a certificate or a host name that does not exist.
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return err
	}
	if dnsErr, ok := errors.AsType[*net.DNSError](err); ok && dnsErr.IsNotFound {
		return err
	}
	if _, ok := errors.AsType[*net.AddrError](err); ok {
		return err // an address that cannot be dialled, such as port 99999
	}
	return fmt.Errorf("%w: %w", err, ErrTransient)
}
