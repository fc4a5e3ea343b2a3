package fetcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/html"

	"github.com/volfs/volfs/internal/mem"
)

// HTTPOptions tunes an HTTP fetcher. Zero fields take their defaults.
type HTTPOptions struct {
	// Conns bounds the connections to one host, busy and idle alike
	// (default 16, at least 8). The first fetcher for a host sets the bound
	// of the session that every later fetcher for that host shares.
	Conns int
	// MaxAttempts is how many times a request is sent before a transient
	// failure is returned (default 6).
	MaxAttempts int
	// BaseBackoff and MaxBackoff shape the wait after failed attempt n
	// (counting from 0): a random duration in [0, min(MaxBackoff,
	// BaseBackoff<<n)) (defaults 100ms and 5s). A Retry-After header in
	// seconds on a 429 or 503 reply replaces it, capped at MaxBackoff.
	BaseBackoff, MaxBackoff time.Duration
	// MaxObjectSize bounds a response body (default 2 GiB); a larger one is
	// an error rather than an allocation.
	MaxObjectSize int64
	// StallTimeout bounds how long an attempt may go without progress:
	// from the request to the reply's headers, and between two reads of
	// its body that return data (default 30s). A stalled attempt is a
	// transient failure, so a server that stops sending mid-body is
	// retried and then reported instead of hanging the read that waits.
	StallTimeout time.Duration
	// MinRate is the slowest transfer, in bytes per second, that an
	// attempt may make (default 64 KiB/s). Once the reply's headers are
	// in, an attempt must end within StallTimeout plus the time its body
	// takes at MinRate, counted from the request; the body's size is its
	// Content-Length, or the caller's limit when the server sends none.
	// An attempt past that deadline is a transient failure, like a stall:
	// a server that drips one byte a second, which the stall timer never
	// catches, is retried and then reported.
	MinRate int64
	// FollowRedirects follows a redirect to another scheme, host or port
	// than the base URL's. By default such a redirect is refused with an
	// error wrapping ErrPermission and one log line per target: a source
	// names where its data lives, and a reply must not send the reader
	// elsewhere.
	FollowRedirects bool
	// Log receives the line about a refused redirect; nil means
	// slog.Default().
	Log *slog.Logger
}

func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.Conns <= 0 {
		o.Conns = 16
	}
	o.Conns = max(o.Conns, 8)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 6
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.MaxObjectSize <= 0 {
		o.MaxObjectSize = 2 << 30
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 30 * time.Second
	}
	if o.MinRate <= 0 {
		o.MinRate = 64 << 10
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	// readBody reads one byte past the limit to detect an overlong body.
	o.MaxObjectSize = min(o.MaxObjectSize, math.MaxInt64-1)
	return o
}

// HTTP is a Fetcher over an http:// or https:// base URL, which names a
// directory: the object at key "a/b" is at base + "/a/b", each element
// escaped. Requests are retried as described in HTTPOptions; each attempt
// reads the whole body, so a truncated body is retried too.
//
// All fetchers of a process that address one host share one session: a
// keep-alive HTTP/1.1 connection pool sized by HTTPOptions.Conns.
type HTTP struct {
	base   *url.URL // Path ends with "/"
	opts   HTTPOptions
	sess   *session
	client *http.Client // the session's transport with h's redirect policy

	refused sync.Map // origins whose redirects were refused and logged

	stats httpCounters
}

// HTTPStats counts what an HTTP fetcher did since it was made.
type HTTPStats struct {
	// Objects counts requests that succeeded (GET, ranged GET, HEAD,
	// listing), Bytes the body bytes received by every attempt.
	Objects, Bytes int64
	// Retries counts attempts repeated after a transient failure.
	Retries int64
	// NotFound, GaveUp and Failed count requests that ended in an error:
	// the object does not exist; transient failures until the attempts
	// ran out; any other error (refused, too large, cancelled).
	NotFound, GaveUp, Failed int64
}

type httpCounters struct {
	objects, bytes, retries, notFound, gaveUp, failed atomic.Int64
}

// Stats returns h's counters. Safe for concurrent use.
func (h *HTTP) Stats() HTTPStats {
	c := &h.stats
	return HTTPStats{
		Objects: c.objects.Load(), Bytes: c.bytes.Load(), Retries: c.retries.Load(),
		NotFound: c.notFound.Load(), GaveUp: c.gaveUp.Load(), Failed: c.failed.Load(),
	}
}

// NewHTTP returns an HTTP fetcher for base. Userinfo in base is sent as
// basic authentication and left out of String and of error messages; a
// query or a fragment is refused.
func NewHTTP(base string, opts HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("fetcher: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("fetcher: %q is not an http or https URL", base)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("fetcher: %q: a base URL cannot have a query or a fragment", u.Redacted())
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		if u.RawPath != "" {
			u.RawPath += "/"
		}
	}
	opts = opts.withDefaults()
	h := &HTTP{base: u, opts: opts, sess: sessionFor(u, opts.Conns)}
	h.client = &http.Client{Transport: h.sess.transport, CheckRedirect: h.checkRedirect}
	return h, nil
}

// String returns the base URL without its trailing slash and password.
func (h *HTTP) String() string { return strings.TrimSuffix(h.base.Redacted(), "/") }

// Dials returns the number of TCP connections that the session of h's host
// has opened so far. In steady state it does not grow.
func (h *HTTP) Dials() int64 { return h.sess.dials.Load() }

// Get sends a GET that accepts gzip and returns a gzip body undecoded, with
// ContentEncoding "gzip". A body longer than limit (or MaxObjectSize) is
// refused with ErrTooLarge once limit+1 bytes have arrived, or at once when
// Content-Length says so.
func (h *HTTP) Get(ctx context.Context, key string, limit int64) (Object, error) {
	if err := CheckKey(key); err != nil {
		return Object{}, err
	}
	limit = min(limit, h.opts.MaxObjectSize)
	var obj Object
	err := h.do(ctx, "GET", h.url(key), http.Header{"Accept-Encoding": {"gzip"}}, upTo(limit), func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return statusError(resp)
		}
		data, err := readBody(resp.Body, resp.ContentLength, limit)
		if err != nil {
			return err
		}
		obj = Object{Data: data, ContentEncoding: contentEncoding(resp)}
		size := int64(-1) // of a compressed reply: not the object's
		if obj.ContentEncoding == "" {
			size = int64(len(data))
		}
		obj.ID = httpIdentity(resp.Header, size)
		return nil
	})
	return obj, err
}

// GetRange sends a GET with a Range header; a zero length returns an empty
// slice without a request. A server that ignores Range and sends the whole
// object (a 200) is served too when the range starts within
// MaxRangeSkip: the bytes before offset are skipped as they stream in, and
// the body is read no further than the range's end. A range that starts
// further is refused at once (ErrNotSupported) rather than downloaded up
// to it. An attempt's deadline (HTTPOptions.MinRate) is set by the bytes
// the reply must carry to reach the range's end: the range's length, or
// offset plus length for a 200, never the object limit.
func (h *HTTP) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, Identity, error) {
	if err := checkRange(offset, length); err != nil {
		return nil, "", err
	}
	if err := CheckKey(key); err != nil {
		return nil, "", err
	}
	if length == 0 {
		return []byte{}, "", nil // "bytes=off-(off-1)" is no range at all
	}
	last := offset + min(length, math.MaxInt64-offset) - 1
	header := http.Header{
		"Accept-Encoding": {"identity"},
		"Range":           {fmt.Sprintf("bytes=%d-%d", offset, last)},
	}
	limit := min(length, h.opts.MaxObjectSize)
	expect := func(resp *http.Response) int64 {
		if resp.StatusCode == http.StatusOK && offset <= MaxRangeSkip {
			return last + 1 // the bytes before offset come too
		}
		return length
	}
	var data []byte
	var id Identity
	err := h.do(ctx, "GET", h.url(key), header, expect, func(resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusRequestedRangeNotSatisfiable:
			data = []byte{} // offset at or past the end
			return nil
		case http.StatusPartialContent, http.StatusOK:
		default:
			return statusError(resp)
		}
		if enc := contentEncoding(resp); enc != "" {
			return fmt.Errorf("range reply has Content-Encoding %q", enc)
		}
		size := resp.ContentLength
		if resp.StatusCode == http.StatusPartialContent {
			first, total, err := parseContentRange(resp.Header.Get("Content-Range"))
			if err != nil || first != offset {
				return fmt.Errorf("reply to range %d-%d has Content-Range %q", offset, last, resp.Header.Get("Content-Range"))
			}
			id = httpIdentity(resp.Header, total)
		} else {
			id = httpIdentity(resp.Header, size)
			if size >= 0 && size <= offset {
				data = []byte{} // the object ends before the range
				return nil
			}
			if ended, err := skipTo(resp.Body, offset); err != nil {
				return err
			} else if ended {
				data = []byte{}
				return nil
			}
			if size >= 0 {
				size = min(size-offset, length)
			}
		}
		var err error
		data, err = readBody(io.LimitReader(resp.Body, length), size, limit)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return data, id, nil
}

// Stat sends a HEAD. When HEAD is refused (405, 501) or its reply has no
// Content-Length, Stat asks for the first byte and reads the size from
// Content-Range.
func (h *HTTP) Stat(ctx context.Context, key string) (int64, Identity, error) {
	if err := CheckKey(key); err != nil {
		return 0, "", err
	}
	u := h.url(key)
	size := int64(-1)
	var id Identity
	err := h.do(ctx, "HEAD", u, http.Header{"Accept-Encoding": {"identity"}}, upTo(0), func(resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusOK:
			if contentEncoding(resp) == "" {
				size = resp.ContentLength
				id = httpIdentity(resp.Header, size)
			}
			return nil
		case http.StatusMethodNotAllowed, http.StatusNotImplemented:
			return nil
		}
		return statusError(resp)
	})
	if err != nil {
		return 0, "", err
	}
	if size >= 0 {
		return size, id, nil
	}
	header := http.Header{"Accept-Encoding": {"identity"}, "Range": {"bytes=0-0"}}
	err = h.do(ctx, "GET", u, header, upTo(1), func(resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
			// 416 answers an empty object: "bytes */0".
			_, size, _ = parseContentRange(resp.Header.Get("Content-Range"))
		case http.StatusOK:
			size = resp.ContentLength
		default:
			return statusError(resp)
		}
		if size < 0 || contentEncoding(resp) != "" {
			return errors.New("reply does not tell the object's size")
		}
		id = httpIdentity(resp.Header, size)
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	return size, id, nil
}

// httpIdentity is the Identity of the object a reply is of, whose whole
// size is size (-1 when the reply does not tell it): its ETag, else its
// Last-Modified time with the size. A weak ETag (W/"x") and the ETag that
// a compressing server gives its gzip or brotli form ("x-gzip", as Apache
// does) name the same version as "x", so that a HEAD and a GET that
// accepts gzip agree.
func httpIdentity(h http.Header, size int64) Identity {
	if etag := strings.TrimSpace(h.Get("ETag")); etag != "" {
		etag = strings.TrimPrefix(etag, "W/")
		for _, suffix := range []string{`-gzip"`, `-br"`} {
			if strings.HasSuffix(etag, suffix) && len(etag) > len(suffix) {
				etag = strings.TrimSuffix(etag, suffix) + `"`
			}
		}
		return Identity("etag:" + etag)
	}
	if size < 0 {
		return ""
	}
	t, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return ""
	}
	return Identity(fmt.Sprintf("modified:%d:%d", t.Unix(), size))
}

// List reads the HTML directory index at the URL of prefix plus "/", as Go's
// http.FileServer, Python's http.server, nginx autoindex and Apache serve
// it: the links that name a direct child are the entries, a trailing slash
// marks a directory, and Size is always -1. A 404 or a reply that is not
// text/html returns ErrNotSupported, since a server without indexes says
// nothing about whether the prefix exists.
func (h *HTTP) List(ctx context.Context, prefix string) ([]Entry, error) {
	dir := ""
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, err
		}
		dir = prefix + "/"
	}
	header := http.Header{"Accept": {"text/html"}, "Accept-Encoding": {"identity"}}
	var entries []Entry
	err := h.do(ctx, "GET", h.url(dir), header, upTo(h.opts.MaxObjectSize), func(resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusNotFound, http.StatusGone:
			return fmt.Errorf("%s: no directory index: %w", resp.Status, ErrNotSupported)
		default:
			return statusError(resp)
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/html" {
			return fmt.Errorf("reply is %q, not a directory index: %w", mt, ErrNotSupported)
		}
		if enc := contentEncoding(resp); enc != "" {
			return fmt.Errorf("directory index has Content-Encoding %q", enc)
		}
		var err error
		entries, err = parseIndex(io.LimitReader(resp.Body, h.opts.MaxObjectSize), resp.Request.URL)
		return err
	})
	return entries, err
}

// url returns the URL of key, which may end with "/".
func (h *HTTP) url(key string) *url.URL {
	elems := strings.Split(key, "/")
	for i, e := range elems {
		elems[i] = url.PathEscape(e)
	}
	u := *h.base
	u.Path += key
	u.RawPath = h.base.EscapedPath() + strings.Join(elems, "/")
	return &u
}

// do sends a request and hands the reply to read until read succeeds,
// fails with an error that does not wrap ErrTransient, or MaxAttempts
// attempts have failed. The body is drained and closed after read returns.
// expect tells, from the reply's status and headers, the most body bytes
// read consumes, which sets the attempt's deadline when the reply's
// Content-Length is larger or absent (see HTTPOptions.MinRate). Errors are
// prefixed with the method and URL.
func (h *HTTP) do(ctx context.Context, method string, u *url.URL, header http.Header, expect expectFunc, read func(*http.Response) error) error {
	for attempt := 1; ; attempt++ {
		err := h.try(ctx, method, u, header, expect, read)
		switch {
		case err == nil:
			h.stats.objects.Add(1)
			return nil
		case errors.Is(err, ErrNotExist):
			h.stats.notFound.Add(1)
			return err
		case !errors.Is(err, ErrTransient):
			h.stats.failed.Add(1)
			return err
		}
		if attempt == h.opts.MaxAttempts {
			h.stats.gaveUp.Add(1)
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		h.stats.retries.Add(1)
		t := time.NewTimer(h.backoff(attempt-1, err))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fetcher: %s %s: %w", method, u.Redacted(), ctx.Err())
		case <-t.C:
		}
	}
}

// Causes of an attempt abandoned by its watchdog or its deadline.
var (
	errStalled = errors.New("no progress")
	errTooSlow = errors.New("too slow")
)

// expectFunc tells how many body bytes an operation reads from a reply.
type expectFunc func(*http.Response) int64

// upTo is the expectFunc of an operation that reads at most n bytes of any
// reply.
func upTo(n int64) expectFunc { return func(*http.Response) int64 { return n } }

// MaxRangeSkip is the furthest into an object that GetRange reads from the
// start of a reply that ignores Range (a 200 with the whole object) to
// reach the range asked for: 64 MiB, a fraction of a second on a LAN. A
// shard or pass-through object read from such a server costs what lies
// before each range; beyond this, a read would download more than a
// hostile or broken server deserves, so it is refused.
const MaxRangeSkip = 64 << 20

// skipTo reads and drops the bytes before offset of body, the whole object
// from a server that ignored Range; ended reports an object that ends
// before offset. An offset beyond MaxRangeSkip is refused, with
// ErrNotSupported, before a byte is read.
func skipTo(body io.Reader, offset int64) (ended bool, err error) {
	if offset > MaxRangeSkip {
		return false, fmt.Errorf("the server ignores Range (it sent the whole object): reaching byte %d would read all the bytes before it, more than %d: %w",
			offset, MaxRangeSkip, ErrNotSupported)
	}
	switch _, err := io.CopyN(io.Discard, body, offset); err {
	case nil:
		return false, nil
	case io.EOF:
		return true, nil
	default:
		return false, bodyError(err)
	}
}

// try makes one attempt of do.
func (h *HTTP) try(ctx context.Context, method string, u *url.URL, header http.Header, expectOf expectFunc, read func(*http.Response) error) error {
	// The watchdog cancels the attempt when it makes no progress for
	// StallTimeout, from the request to the headers and between body
	// reads; every read that returns data re-arms it. Once the headers
	// are in, a deadline bounds the whole attempt too (HTTPOptions.MinRate),
	// since a trickle of bytes re-arms the watchdog for ever.
	start := time.Now()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(h.opts.StallTimeout, func() { cancel(errStalled) })
	defer watchdog.Stop()

	req, err := http.NewRequestWithContext(actx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("fetcher: %w", err)
	}
	req.Header = header
	resp, err := h.client.Do(req)
	var bound time.Duration
	var expect int64
	if err != nil {
		err = transportError(err)
	} else {
		expect = expectOf(resp)
		if resp.ContentLength >= 0 && resp.ContentLength < expect {
			expect = resp.ContentLength
		}
		bound = attemptBound(h.opts.StallTimeout, h.opts.MinRate, expect)
		deadline := time.AfterFunc(bound-time.Since(start), func() { cancel(errTooSlow) })
		defer deadline.Stop()
		resp.Body = &progressBody{ReadCloser: resp.Body, watchdog: watchdog, timeout: h.opts.StallTimeout, bytes: &h.stats.bytes}
		err = read(resp)
		drain(resp.Body)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Whatever broke, the caller's ending context is the cause that
		// matters, and it must never be retried.
		err = ctx.Err()
	case context.Cause(actx) == errStalled:
		err = fmt.Errorf("%w for %v: %w", errStalled, h.opts.StallTimeout, ErrTransient)
	case context.Cause(actx) == errTooSlow:
		err = fmt.Errorf("%w: not done within %v (%v, plus %d bytes at %d bytes/s): %w",
			errTooSlow, bound, h.opts.StallTimeout, expect, h.opts.MinRate, ErrTransient)
	}
	if err != nil {
		return fmt.Errorf("fetcher: %s %s: %w", method, u.Redacted(), err)
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

// backoff returns the wait after failed attempt n (from 0). Full jitter
// spreads out clients that failed together (Brooker, "Exponential Backoff
// and Jitter", AWS 2015).
func (h *HTTP) backoff(n int, err error) time.Duration {
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return min(ra.delay, h.opts.MaxBackoff)
	}
	ceiling := h.opts.MaxBackoff
	if n < 62 && h.opts.BaseBackoff <= ceiling>>n {
		ceiling = h.opts.BaseBackoff << n
	}
	return rand.N(ceiling)
}

// progressBody re-arms the watchdog of its attempt on every read that
// returns data.
type progressBody struct {
	io.ReadCloser
	watchdog *time.Timer
	timeout  time.Duration
	bytes    *atomic.Int64 // counts what arrives
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.watchdog.Reset(b.timeout)
		b.bytes.Add(int64(n))
	}
	return n, err
}

// retryAfterError is a transient error whose server asked for a delay
// before the next attempt.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// statusError classifies a reply that the operation cannot use.
func statusError(resp *http.Response) error {
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%s: %w", resp.Status, ErrNotExist)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%s: %w", resp.Status, ErrPermission)
	case code == http.StatusTooManyRequests || code >= 500 && code < 600:
		err := fmt.Errorf("%s: %w", resp.Status, ErrTransient)
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			if secs, e := strconv.Atoi(resp.Header.Get("Retry-After")); e == nil && secs >= 0 {
				// Bounded before the multiplication can overflow; MaxBackoff caps it later.
				return &retryAfterError{err, time.Duration(min(secs, 86400)) * time.Second}
			}
		}
		return err
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
	return fmt.Errorf("%w: %w", err, ErrTransient)
}

var errTooManyRedirects = errors.New("stopped after 10 redirects")

// checkRedirect follows redirects within the base URL's scheme, host and
// port (any of them with FollowRedirects), except one between a path and
// the same path with a trailing slash: servers send it to point from a
// directory name to its index and from a file name with a slash to the
// file, so it means that the key asked for is not what the operation wants
// (Get of a directory, List of a file).
func (h *HTTP) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errTooManyRedirects
	}
	from, to := via[len(via)-1].URL.Path, req.URL.Path
	if from+"/" == to || from == to+"/" {
		return fmt.Errorf("redirected to %s: %w", req.URL.Redacted(), ErrNotExist)
	}
	if target := origin(req.URL); !h.opts.FollowRedirects && target != origin(h.base) {
		if _, logged := h.refused.LoadOrStore(target, true); !logged {
			h.opts.Log.Warn("fetcher: refused a redirect that leaves the source's host (FollowRedirects, volfs --follow-redirects, follows it)",
				"source", h.String(), "to", req.URL.Redacted())
		}
		return fmt.Errorf("redirected to %s, outside %s: %w", req.URL.Redacted(), origin(h.base), ErrPermission)
	}
	return nil
}

// origin returns u's scheme, lower-case host and port, the port spelled
// out even when it is the scheme's default.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// readBody reads a body of size bytes (-1 when unknown) that may not exceed
// limit. A known size is read into one buffer of that size; a body that
// ends early is a truncated body, a transient failure.
func readBody(r io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("body of %d bytes: %w (limit %d)", size, ErrTooLarge, limit)
	}
	if size >= 0 {
		data := mem.Get(int(size))
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, bodyError(err)
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, bodyError(err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("body of more than %d bytes: %w", limit, ErrTooLarge)
	}
	return data, nil
}

func bodyError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading body: %w: %w", err, ErrTransient)
}

// drainLimit bounds what drain reads: a longer remainder costs less to
// abandon, with its connection, than to download.
const drainLimit = 256 << 10

// drain reads what is left of body and closes it, so that its connection
// goes back to the pool.
func drain(body io.ReadCloser) {
	io.CopyN(io.Discard, body, drainLimit)
	body.Close()
}

// contentEncoding returns the reply's Content-Encoding, "" for identity.
func contentEncoding(resp *http.Response) string {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if enc == "identity" {
		return ""
	}
	return enc
}

// parseContentRange parses "bytes first-last/total" and "bytes */total";
// first is -1 in the second form and total is -1 when the server wrote "*".
func parseContentRange(s string) (first, total int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rng, tot, ok := strings.Cut(strings.TrimPrefix(s, "bytes "), "/")
	if !ok {
		return -1, -1, bad
	}
	first, total = -1, -1
	if rng != "*" {
		f, _, ok := strings.Cut(rng, "-")
		if first, err = strconv.ParseInt(f, 10, 64); !ok || err != nil {
			return -1, -1, bad
		}
	}
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return -1, -1, bad
		}
	}
	return first, total, nil
}

// parseIndex returns the direct children of dir that the links of an HTML
// directory index name, each once.
func parseIndex(r io.Reader, dir *url.URL) ([]Entry, error) {
	var entries []Entry
	seen := make(map[string]bool)
	z := html.NewTokenizer(r)
	for {
		switch z.Next() {
		case html.ErrorToken:
			if err := z.Err(); err != io.EOF {
				return nil, bodyError(err)
			}
			return entries, nil
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if string(name) != "a" {
				continue
			}
			for more {
				var key, val []byte
				key, val, more = z.TagAttr()
				if string(key) != "href" {
					continue
				}
				if e, ok := indexEntry(dir, string(val)); ok && !seen[e.Name] {
					seen[e.Name] = true
					entries = append(entries, e)
				}
			}
		}
	}
}

// indexEntry returns the direct child of dir that href names, if any:
// links to parents, to other hosts or deeper paths, sort links ("?C=N")
// and anchors name none.
func indexEntry(dir *url.URL, href string) (Entry, bool) {
	ref, err := url.Parse(href)
	if err != nil {
		return Entry{}, false
	}
	u := dir.ResolveReference(ref)
	if u.Scheme != dir.Scheme || !strings.EqualFold(u.Host, dir.Host) || u.RawQuery != "" || u.Fragment != "" {
		return Entry{}, false
	}
	rest, ok := strings.CutPrefix(u.Path, dir.Path)
	name, isDir := strings.CutSuffix(rest, "/")
	if !ok || !strings.HasSuffix(dir.Path, "/") || strings.Contains(name, "/") || CheckKey(name) != nil {
		return Entry{}, false
	}
	return Entry{Name: name, IsDir: isDir, Size: -1}, true
}

// session is the connection pool that every HTTP fetcher of the process
// shares for one host.
type session struct {
	transport *http.Transport
	dials     atomic.Int64 // TCP connections opened
}

// sessions holds one session per scheme and host:port, for the life of the
// process: a mount talks to a handful of hosts.
var sessions = struct {
	mu sync.Mutex
	m  map[string]*session // GUARDED_BY(mu)
}{m: make(map[string]*session)}

// sessionFor returns the session of u's host, creating it with room for
// conns connections if it is the first.
func sessionFor(u *url.URL, conns int) *session {
	key := origin(u)
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	if s, ok := sessions.m[key]; ok {
		return s
	}
	s := newSession(conns)
	sessions.m[key] = s
	return s
}

func newSession(conns int) *session {
	s := &session{}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				s.dials.Add(1)
			}
			return c, err
		},
		// Go's HTTP/2 moves 1 MiB bodies 2-3 times slower than HTTP/1.1
		// over parallel connections; a non-nil empty TLSNextProto keeps it off.
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		// Go keeps 2 idle connections per host by default, so a burst of
		// concurrent reads re-dials; keep every connection the host may have.
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// No ResponseHeaderTimeout: the watchdog of each attempt bounds
		// the wait for headers with the fetcher's own StallTimeout, which
		// a fixed transport-wide timeout would override.
		// Accept-Encoding is ours to set: gzip bodies are returned undecoded.
		DisableCompression: true,
	}
	s.transport = tr
	return s
}

// Streamer is a Fetcher that can send an object's bytes from an offset as
// one stream, for readers that go through an object in order: one request
// instead of one per read, and no Range needed from a server that ignores
// it.
type Streamer interface {
	// Stream returns the bytes of the object at key from offset to its
	// end, as they arrive, with no transport encoding. An offset at or
	// past the end gives an empty stream. Reads of the stream are not
	// retried: a read that fails leaves the stream broken, and the caller
	// falls back to GetRange. Ending ctx, or Close, abandons it.
	Stream(ctx context.Context, key string, offset int64) (io.ReadCloser, error)
}

// Stream sends a GET for the bytes from offset on ("Range: bytes=N-"). A
// server that ignores Range is served when offset is within MaxRangeSkip
// (the bytes before it are skipped as they come). The stream has the
// stall watchdog of an attempt (HTTPOptions.StallTimeout) but no overall
// deadline: its reader bounds each of its reads.
func (h *HTTP) Stream(ctx context.Context, key string, offset int64) (io.ReadCloser, error) {
	if err := checkRange(offset, 0); err != nil {
		return nil, err
	}
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	u := h.url(key)
	fail := func(err error) error { return fmt.Errorf("fetcher: stream %s from %d: %w", u.Redacted(), offset, err) }
	sctx, cancel := context.WithCancelCause(ctx)
	watchdog := time.AfterFunc(h.opts.StallTimeout, func() { cancel(errStalled) })
	stop := func() {
		watchdog.Stop()
		cancel(nil)
	}
	req, err := http.NewRequestWithContext(sctx, "GET", u.String(), nil)
	if err != nil {
		stop()
		return nil, fail(err)
	}
	req.Header = http.Header{"Accept-Encoding": {"identity"}, "Range": {fmt.Sprintf("bytes=%d-", offset)}}
	resp, err := h.client.Do(req)
	if err != nil {
		stop()
		if context.Cause(sctx) == errStalled {
			return nil, fail(fmt.Errorf("%w for %v: %w", errStalled, h.opts.StallTimeout, ErrTransient))
		}
		return nil, fail(transportError(err))
	}
	body := &streamBody{ReadCloser: &progressBody{ReadCloser: resp.Body, watchdog: watchdog, timeout: h.opts.StallTimeout, bytes: &h.stats.bytes}, stop: stop}
	refuse := func(err error) (io.ReadCloser, error) {
		body.Close()
		return nil, fail(err)
	}
	if enc := contentEncoding(resp); enc != "" {
		return refuse(fmt.Errorf("reply has Content-Encoding %q", enc))
	}
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		body.Close()
		return io.NopCloser(strings.NewReader("")), nil
	case http.StatusPartialContent:
		if first, _, err := parseContentRange(resp.Header.Get("Content-Range")); err != nil || first != offset {
			return refuse(fmt.Errorf("reply to range %d- has Content-Range %q", offset, resp.Header.Get("Content-Range")))
		}
	case http.StatusOK:
		if _, err := skipTo(body, offset); err != nil {
			return refuse(err)
		}
	default:
		return refuse(statusError(resp))
	}
	h.stats.objects.Add(1)
	return body, nil
}

// streamBody is the body of a Stream: closing it abandons the rest, with
// its connection, and stops its watchdog.
type streamBody struct {
	io.ReadCloser
	stop func()
}

func (b *streamBody) Close() error {
	err := b.ReadCloser.Close()
	b.stop()
	return err
}
