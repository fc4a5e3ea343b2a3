package fetcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

// The gs:// fetcher's client (one storage client per set of options,
// shared by every fetcher that uses them), its transport's stall guard, and
// how the storage library's errors become the package's.

// callBound is how long a call that reads n bytes may take: CallTimeout,
// or less when MaxAttempts attempts of StallTimeout plus n bytes at
// MinRate each, and the most back-off between them, end sooner (the bound
// of an HTTP source's request).
func (g *GCS) callBound(n int64) time.Duration {
	attempts := time.Duration(g.opts.MaxAttempts)
	return min(g.opts.CallTimeout, attempts*attemptBound(g.opts.StallTimeout, g.opts.MinRate, n)+(attempts-1)*g.opts.MaxBackoff)
}

// error classifies err, from a call on key that ran under cctx, a child of
// the caller's ctx with a timeout of bound.
func (g *GCS) error(ctx, cctx context.Context, bound time.Duration, op, key string, err error) error {
	where := fmt.Sprintf("%s %s/%s", op, g, strings.TrimPrefix(key, "/"))
	err = withoutURL(err)
	var gerr *googleapi.Error
	switch {
	case ctx.Err() != nil:
		// Whatever broke, the caller's ending context is the cause that
		// matters, and it is never retried.
		return fmt.Errorf("%s: %w", where, ctx.Err())
	case errors.Is(err, ErrTooLarge) || errors.Is(err, ErrTransient) || errors.Is(err, ErrNotExist) || errors.Is(err, ErrChanged):
		return fmt.Errorf("%s: %w", where, err)
	case errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%s: %v: %w", where, err, ErrNotExist)
	case cctx.Err() != nil:
		return fmt.Errorf("%s: not done within %v: %v: %w", where, bound, err, ErrTransient)
	case errors.As(err, &gerr) && (gerr.Code == http.StatusNotFound || gerr.Code == http.StatusGone):
		return fmt.Errorf("%s: %v: %w", where, err, ErrNotExist)
	case errors.As(err, &gerr) && (gerr.Code == http.StatusUnauthorized || gerr.Code == http.StatusForbidden):
		return fmt.Errorf("%s: %w: %v; this used %s: %s", where, ErrPermission, err, g.client.auth, g.client.authHint)
	case errors.As(err, &gerr) && (gerr.Code == http.StatusTooManyRequests || gerr.Code == http.StatusRequestTimeout || gerr.Code >= 500):
		return fmt.Errorf("%s: %v: %w", where, err, ErrTransient)
	case errors.Is(err, errStalled) || errors.Is(err, errTooSlow) || storage.ShouldRetry(err):
		return fmt.Errorf("%s: %v: %w", where, err, ErrTransient)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// withoutURL drops from err's text the request URL that a *url.Error
// quotes: a listing's URL carries a dozen query parameters and fills four
// lines of a terminal, while the caller names the bucket and key already.
// The host stays, and the chain stays whole for errors.Is and errors.As.
func withoutURL(err error) error {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return err
	}
	host := uerr.URL
	if u, perr := url.Parse(uerr.URL); perr == nil {
		host = u.Host
	}
	long := fmt.Sprintf("%s %q: ", uerr.Op, uerr.URL)
	return &rewordedError{msg: strings.Replace(err.Error(), long, uerr.Op+" "+host+": ", 1), err: err}
}

// rewordedError is err with another text.
type rewordedError struct {
	msg string
	err error
}

func isGzip(enc string) bool { return strings.EqualFold(strings.TrimSpace(enc), "gzip") }

// gcsClient is the storage client that every gs:// fetcher of the process
// shares.
type gcsClient struct {
	client   *storage.Client
	auth     string   // how requests authenticate, for messages
	authHint string   // how to change it
	sess     *session // the transport below, and its dial count
}

// gcsClientFor returns the process's client for opts, making it if it is
// the first.
func gcsClientFor(opts GCSOptions) (*gcsClient, error) {
	emulator := os.Getenv("STORAGE_EMULATOR_HOST")
	key := fmt.Sprintf("%s|%s|%v|%s", opts.Endpoint, emulator, opts.Anonymous, os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"))
	gcsClients.mu.Lock()
	defer gcsClients.mu.Unlock()
	if c, ok := gcsClients.m[key]; ok {
		return c, nil
	}
	c, err := newGCSClient(opts, opts.Anonymous || emulator != "")
	if err != nil {
		return nil, err
	}
	gcsClients.m[key] = c
	return c, nil
}

func newGCSClient(opts GCSOptions, anonymous bool) (*gcsClient, error) {
	// The HTTP session of http.go: HTTP/1.1, an idle pool as large as the
	// connection bound, counted dials, no transparent decompression.
	c := &gcsClient{sess: newSession(opts.Conns)}
	var rt http.RoundTripper = &stallTransport{base: c.sess.transport, timeout: opts.StallTimeout, minRate: opts.MinRate}

	ctx := context.Background()
	c.auth = "anonymous access"
	c.authHint = "for a private bucket, run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS, and do not pass --anonymous"
	if !anonymous {
		creds, err := google.FindDefaultCredentials(ctx, storage.ScopeReadOnly)
		if err == nil {
			c.auth = "Application Default Credentials"
			if creds.ProjectID != "" {
				c.auth += " of project " + creds.ProjectID
			}
			c.authHint = "grant them storage.objects.get and storage.objects.list on the bucket, or pass --anonymous for a public bucket"
			rt = &oauth2.Transport{Source: creds.TokenSource, Base: rt}
		} else if file := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); file != "" {
			// Named but unusable: falling back to anonymous would hide it.
			return nil, fmt.Errorf("gs: GOOGLE_APPLICATION_CREDENTIALS=%s: %w", file, err)
		} else {
			c.auth += " (no Application Default Credentials found)"
		}
	}
	copts := []option.ClientOption{
		option.WithHTTPClient(&http.Client{Transport: rt}),
		// Authentication is the transport's: without this, the library
		// would look for credentials of its own.
		option.WithoutAuthentication(),
		storage.WithDisabledClientMetrics(),
	}
	if opts.Endpoint != "" {
		u, err := url.Parse(opts.Endpoint)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("bad GCS endpoint %q", opts.Endpoint)
		}
		copts = append(copts, option.WithEndpoint(opts.Endpoint))
	}
	client, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("gs: %w", err)
	}
	c.client = client
	return c, nil
}

// stallTransport gives each exchange a watchdog: no progress for timeout
// (no reply headers, or no body bytes between two reads) ends it, and so
// does, once the headers are in, a deadline of timeout plus the body's size
// at minRate from the request (the size is the Content-Length, or the
// length of the Range asked for, or else maxAttemptBound applies). The
// exchange then fails with an error wrapping errStalled or errTooSlow and
// ErrTransient, which the storage libraries retry (resuming a read from the
// bytes it has). Closing a body drains what is left of it, up to
// drainLimit, so that its connection goes back to the pool.
type stallTransport struct {
	base    http.RoundTripper
	timeout time.Duration
	minRate int64
}

// stallOptions are the stall timeout and minimum rate of the fetcher that
// sends a request, carried by its context (withStall) so that fetchers
// sharing one client and transport each get their own: the transport's
// are only the default.
type stallOptions struct {
	timeout time.Duration
	minRate int64
}

type stallKey struct{}

// withStall returns ctx carrying the stall options of one fetcher for
// stallTransport.
func withStall(ctx context.Context, timeout time.Duration, minRate int64) context.Context {
	return context.WithValue(ctx, stallKey{}, stallOptions{timeout, minRate})
}

// rangeLength returns the length of a "bytes=first-last" Range header, or
// -1.
func rangeLength(h string) int64 {
	first, last, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	f, err1 := strconv.ParseInt(first, 10, 64)
	l, err2 := strconv.ParseInt(last, 10, 64)
	if !ok || err1 != nil || err2 != nil || l < f {
		return -1
	}
	return l - f + 1
}
