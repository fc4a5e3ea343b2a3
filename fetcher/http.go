package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	// noIfMatch is set once the server refused If-Match with the ETag of
	// the version it then served (GetRange): it is not sent again.
	noIfMatch atomic.Bool
	// ignoresRange is set once the server answered a ranged GET with the
	// whole object (a 200): see RangeIgnorer.
	ignoresRange atomic.Bool

	m Metrics // Conns: the session's dials
}

// Stats returns h's counters (Statser); Conns is the dial count of the
// session h shares with every HTTP fetcher of its host. Safe for
// concurrent use.
func (h *HTTP) Stats() Stats { return h.m.Stats() }

// NewHTTP returns an HTTP fetcher for base. Userinfo in base is sent as
// basic authentication and left out of String and of error messages; a
// query or a fragment is refused.
func NewHTTP(base string, opts HTTPOptions) (*HTTP, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", base)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("%q: a base URL cannot have a query or a fragment", u.Redacted())
	}
	if err := checkPort(u); err != nil {
		return nil, err
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
	h.m.ConnsFrom(h.sess.dials.Load)
	return h, nil
}

// checkPort refuses a URL whose port no server can listen on, before any
// request: such a URL is a typo, and no retry can fix it.
func checkPort(u *url.URL) error {
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: port %s is not a port (1 to 65535)", u.Redacted(), p)
		}
	}
	return nil
}

// String returns the base URL without its trailing slash and password.
func (h *HTTP) String() string { return strings.TrimSuffix(h.base.Redacted(), "/") }

// Dials returns the number of TCP connections that the session of h's host
// has opened so far. In steady state it does not grow.
func (h *HTTP) Dials() int64 { return h.sess.dials.Load() }

// Get sends a GET that accepts gzip and returns a gzip body undecoded, with
// ContentEncoding "gzip". A body longer than limit (or MaxObjectSize) is
// refused with ErrTooLarge once limit+1 bytes have arrived, or at once when
// Content-Length says so. A read pinned to a version (WithVersion) whose
// reply names another by its ETag is ErrChanged before the body is read;
// the caller compares the identity of any other reply.
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
		if resp.Header.Get("ETag") != "" {
			// Of another version than a pinned read's (WithVersion): known
			// from its headers, refused before its body is downloaded.
			if err := pinnedReply(ctx, key, httpIdentity(resp.Header, -1)); err != nil {
				return err
			}
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
//
// A read pinned to a version (WithVersion) of an ETag identity sends
// If-Match. A 412 is asked again without it: a reply of the pinned
// version means the server compares If-Match in a way that never matches
// (a weak ETag, or one its gzip form changes), and h stops sending it.
// Either way a reply of another version than the pinned one is ErrChanged,
// known from its headers and refused before its body is read (a server
// that ignores If-Match and Range would otherwise send the object up to
// the range's end for nothing).
func (h *HTTP) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, Identity, error) {
	id, ok := pinned(ctx, key)
	ifMatch := ""
	if etag, isETag := strings.CutPrefix(string(id), "etag:"); ok && isETag && !h.noIfMatch.Load() {
		ifMatch = etag
	}
	data, got, err := h.getRange(ctx, key, offset, length, ifMatch)
	if errors.Is(err, errPreconditionFailed) {
		data, got, err = h.getRange(ctx, key, offset, length, "")
		if err == nil && got == id {
			h.noIfMatch.Store(true)
		}
	}
	if err != nil {
		return nil, "", err
	}
	if ok && got.Known() && got != id {
		return nil, "", fmt.Errorf("%s: %s, the read was pinned to %s: %w", h.url(key).Redacted(), got, id, ErrChanged)
	}
	return data, got, nil
}

// errPreconditionFailed is a 412 reply to If-Match.
var errPreconditionFailed = errors.New("precondition failed (412)")

// getRange is GetRange with ifMatch, when not empty, sent as If-Match.
func (h *HTTP) getRange(ctx context.Context, key string, offset, length int64, ifMatch string) ([]byte, Identity, error) {
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
	if ifMatch != "" {
		header["If-Match"] = []string{ifMatch}
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
		case http.StatusPreconditionFailed:
			return errPreconditionFailed
		case http.StatusPartialContent, http.StatusOK:
		default:
			return statusError(resp)
		}
		if enc := contentEncoding(resp); enc != "" {
			return fmt.Errorf("range reply has Content-Encoding %q", enc)
		}
		size := resp.ContentLength
		if resp.StatusCode == http.StatusPartialContent {
			n, total, err := checkRangeReply(resp.Header.Get("Content-Range"), resp.ContentLength, offset, last)
			if err != nil {
				return err
			}
			if n > limit {
				return fmt.Errorf("range of %d bytes: %w (limit %d)", n, ErrTooLarge, limit)
			}
			if err := checkSize(ctx, key, total); err != nil {
				return err
			}
			id = httpIdentity(resp.Header, total)
			if err := pinnedReply(ctx, key, id); err != nil {
				return err // before its body: nothing of it could be served
			}
			data, err = readExactly(resp.Body, n)
			return err
		} else {
			h.ignoresRange.Store(true)
			if err := checkSize(ctx, key, size); err != nil {
				return err
			}
			id = httpIdentity(resp.Header, size)
			if err := pinnedReply(ctx, key, id); err != nil {
				return err
			}
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

// MaxRangeSkip is the furthest into an object that GetRange reads from the
// start of a reply that ignores Range (a 200 with the whole object) to
// reach the range asked for: 64 MiB, a fraction of a second on a LAN. A
// shard or pass-through object read from such a server costs what lies
// before each range; beyond this, a read would download more than a
// hostile or broken server deserves, so it is refused.
const MaxRangeSkip = 64 << 20

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

// drainLimit bounds what drain reads: a longer remainder costs less to
// abandon, with its connection, than to download.
const drainLimit = 256 << 10

// Streamer is a Fetcher that can send an object's bytes from an offset as
// one stream, for readers that go through an object in order: one request
// instead of one per read, and no Range needed from a server that ignores
// it.
type Streamer interface {
	// Stream returns the bytes of the object at key from offset to its
	// end, as they arrive, with no transport encoding. An offset at or
	// past the end gives an empty stream. Reads of the stream are not
	// retried: a read that fails leaves the stream broken, and the caller
	// falls back to GetRange. Ending ctx, or Close, abandons it. A stream
	// pinned to a version (WithVersion) whose reply is of another one is
	// refused, wrapping ErrChanged, before any byte is handed out.
	Stream(ctx context.Context, key string, offset int64) (io.ReadCloser, error)
}

// RangeIgnorer is a Fetcher that can tell whether its source has been
// seen to ignore Range. Over such a source each GetRange reads the object
// from its start, so a reader going through an object should take one
// stream of it (Streamer) rather than many ranges.
type RangeIgnorer interface {
	// IgnoresRange reports whether a ranged request has been answered
	// with the whole object. It starts false and, once true, stays true.
	IgnoresRange() bool
}

var _ RangeIgnorer = (*HTTP)(nil)

// OwnedRanger is a Fetcher whose GetRange returns bytes that nothing else
// refers to (no slice of an object it keeps), so that a caller done with
// them may give them back to internal/mem's pool with mem.Put: what a
// reader of many large ranges needs to hold its memory to what it uses.
type OwnedRanger interface {
	// RangesOwned reports whether GetRange's bytes are the caller's alone.
	RangesOwned() bool
}

var (
	_ OwnedRanger = (*HTTP)(nil)
	_ OwnedRanger = (*S3)(nil)
)

// RangesOwned reports true: every GetRange reads into a buffer of its own
// (OwnedRanger).
func (h *HTTP) RangesOwned() bool { return true }

// IgnoresRange reports whether the server has answered a ranged GetRange
// with the whole object (RangeIgnorer).
func (h *HTTP) IgnoresRange() bool { return h.ignoresRange.Load() }

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
	what := fmt.Sprintf("stream %s from %d", u.Redacted(), offset)
	fail := func(err error) error { return fmt.Errorf("%s: %w", what, err) }
	sctx, wd := newWatchdog(ctx, what, h.opts.StallTimeout)
	req, err := http.NewRequestWithContext(sctx, "GET", u.String(), nil)
	if err != nil {
		wd.stop()
		return nil, fail(err)
	}
	req.Header = http.Header{"Accept-Encoding": {"identity"}, "Range": {fmt.Sprintf("bytes=%d-", offset)}}
	resp, err := h.client.Do(req)
	if err != nil {
		wd.stop()
		if e := wd.ended(); e != nil {
			return nil, e
		}
		return nil, fail(transportError(err))
	}
	// Closing the body abandons the rest, with its connection.
	body := wd.body(resp.Body, &h.m, false)
	refuse := func(err error) (io.ReadCloser, error) {
		body.Close()
		return nil, fail(err)
	}
	if enc := contentEncoding(resp); enc != "" {
		return refuse(fmt.Errorf("reply has Content-Encoding %q", enc))
	}
	size := resp.ContentLength
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		body.Close()
		return io.NopCloser(strings.NewReader("")), nil
	case http.StatusPartialContent:
		first, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || first != offset {
			return refuse(fmt.Errorf("reply to range %d- has Content-Range %q", offset, resp.Header.Get("Content-Range")))
		}
		size = total
	case http.StatusOK:
	default:
		return refuse(statusError(resp))
	}
	if err := pinnedReply(ctx, key, httpIdentity(resp.Header, size)); err != nil {
		return refuse(err)
	}
	if resp.StatusCode == http.StatusOK {
		if _, err := skipTo(body, offset); err != nil {
			return refuse(err)
		}
	}
	h.m.Done(nil)
	return body, nil
}
