package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3Options tunes an s3:// fetcher. Zero fields take their defaults.
type S3Options struct {
	// Conns bounds the connections to the S3 endpoint, busy and idle alike
	// (default 16, at least 8). The first s3:// fetcher of the process for
	// an endpoint and credential choice sets the bound of the client that
	// later ones share; their StallTimeout and MinRate stay each its own.
	Conns int
	// Anonymous sends unsigned requests, for public buckets, even when
	// credentials are found. Without it the standard AWS credential chain
	// is used (environment, shared config and credentials files with
	// Profile, web identity, container and instance metadata), and
	// requests go unsigned when it finds none.
	Anonymous bool
	// Profile names the shared-config profile to read (as AWS_PROFILE and
	// the AWS CLI's --profile); "" means AWS_PROFILE or "default". A
	// profile that does not exist is an error.
	Profile string
	// Region is the bucket's region. When empty, it is discovered: from
	// the x-amz-bucket-region header of a HEAD of the bucket, else the
	// configured region (AWS_REGION, the profile's), else us-east-1.
	Region string
	// Endpoint is the URL of an S3-compatible service
	// ("http://127.0.0.1:8333", "https://s3.example.org"), addressed with
	// path-style requests (endpoint/bucket/key). When empty,
	// AWS_ENDPOINT_URL_S3 or else AWS_ENDPOINT_URL is used, as by the AWS
	// CLI; with none, AWS S3 itself.
	Endpoint string
	// RequesterPays sends x-amz-request-payer: requester, so that the
	// caller's account pays for a requester-pays bucket.
	RequesterPays bool
	// MaxAttempts, BaseBackoff, MaxBackoff, StallTimeout, MinRate and
	// MaxObjectSize are as in HTTPOptions, and so are their defaults:
	// 503 SlowDown, 429, other 5xx replies, resets, stalls and truncated
	// bodies are retried with full-jitter back-off.
	MaxAttempts             int
	BaseBackoff, MaxBackoff time.Duration
	StallTimeout            time.Duration
	MinRate                 int64
	MaxObjectSize           int64
	// CallTimeout bounds each call (Get, GetRange, Stat, List) as a whole,
	// retries included (default 5m); a read is bounded further as
	// GCSOptions.CallTimeout describes.
	CallTimeout time.Duration
	// Log receives the one line about a refusal (403); nil means
	// slog.Default().
	Log *slog.Logger
}

func (o S3Options) withDefaults() S3Options {
	h := HTTPOptions{Conns: o.Conns, MaxAttempts: o.MaxAttempts, BaseBackoff: o.BaseBackoff, MaxBackoff: o.MaxBackoff,
		StallTimeout: o.StallTimeout, MinRate: o.MinRate, MaxObjectSize: o.MaxObjectSize, Log: o.Log}.withDefaults()
	o.Conns, o.MaxAttempts, o.BaseBackoff, o.MaxBackoff = h.Conns, h.MaxAttempts, h.BaseBackoff, h.MaxBackoff
	o.StallTimeout, o.MinRate, o.MaxObjectSize, o.Log = h.StallTimeout, h.MinRate, h.MaxObjectSize, h.Log
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	if o.Endpoint == "" {
		o.Endpoint = cmpOr(os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"))
	}
	return o
}

// S3 is a Fetcher over an S3 bucket, or a prefix of one: the object at key
// "a/b" is the object named prefix + "/a/b". Directories are the common
// prefixes of a listing with the delimiter "/" (implicit directories); an
// object whose name ends with "/" (a console-made folder marker) makes its
// directory exist but is not listed, and an object named like a directory
// beside it ("a" beside "a/b") is hidden by the directory.
//
// S3 never transcodes: an object stored with Content-Encoding: gzip (as
// CloudVolume uploads them) comes back from Get as stored, with
// ContentEncoding "gzip", for the caller to gunzip; Stat, List and
// GetRange show its stored bytes, which S3 serves in ranges like any
// other's.
//
// Requests are sent by the AWS SDK over the session of http.go (one
// pooled, keep-alive HTTP/1.1 transport of at most Conns connections,
// counted dials) with the stall watchdog and minimum rate of the gs://
// fetcher; retries and back-off are the fetcher's own, as the HTTP
// fetcher's (the SDK's retryer is off), so that every kind of source
// retries alike and counts its retries in Stats.
//
// The region and the credentials are settled by the first call (see
// S3Options), and again by the next call if that failed.
type S3 struct {
	bucket string
	prefix string // "" or ends with "/"
	opts   S3Options
	conn   *s3Conn

	refusedOnce sync.Once // the 403 line is logged once
	m           Metrics
}

var _ Statser = (*S3)(nil)

// NewS3 returns a fetcher for source, "s3://bucket" or
// "s3://bucket/prefix". It makes no request: the region, the credentials
// and whether the bucket exists are settled by the first call.
func NewS3(source string, opts S3Options) (*S3, error) {
	rest, ok := strings.CutPrefix(source, "s3://")
	if !ok {
		return nil, fmt.Errorf("%q is not an s3:// URL", source)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if bucket == "" || strings.ContainsAny(bucket, "?#\\ ") {
		return nil, fmt.Errorf("%q: want s3://BUCKET or s3://BUCKET/PREFIX", source)
	}
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("%q: bad prefix: %w", source, err)
		}
		prefix += "/"
	}
	opts = opts.withDefaults()
	if opts.Endpoint != "" {
		u, err := url.Parse(opts.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("s3: bad endpoint URL %q: want http(s)://HOST[:PORT][/PATH]", opts.Endpoint)
		}
		if err := checkPort(u); err != nil {
			return nil, fmt.Errorf("s3: bad endpoint URL: %w", err)
		}
	}
	s := &S3{bucket: bucket, prefix: prefix, opts: opts, conn: s3ConnFor(bucket, opts)}
	s.m.ConnsFrom(s.conn.sess.dials.Load)
	return s, nil
}

// String returns "s3://bucket" or "s3://bucket/prefix".
func (s *S3) String() string {
	return strings.TrimSuffix("s3://"+s.bucket+"/"+s.prefix, "/")
}

// CacheName returns String for the default endpoint (AWS, whose bucket
// names are global); with S3Options.Endpoint it is "s3 endpoint N:URL"
// followed by String, where URL is the endpoint (scheme and host lower
// case, no trailing "/", a password redacted) and N its length, so that
// no name of one source is the name of another. Two S3-compatible
// services with a bucket of the same name never share cache entries.
func (s *S3) CacheName() string {
	if s.opts.Endpoint == "" {
		return s.String()
	}
	ep := s.opts.Endpoint
	if u, err := url.Parse(ep); err == nil {
		u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		ep = strings.TrimSuffix(u.Redacted(), "/")
	}
	return fmt.Sprintf("s3 endpoint %d:%s %s", len(ep), ep, s.String())
}

// Dials returns the number of TCP connections that the process's S3
// client for this endpoint has opened so far. In steady state it does not
// grow.
func (s *S3) Dials() int64 { return s.conn.sess.dials.Load() }

// Stats returns the fetcher's counters (Statser). Safe for concurrent
// use.
func (s *S3) Stats() Stats { return s.m.Stats() }

// Auth says how requests are signed, once a call has settled it: e.g.
// "anonymous access (--anonymous)" or "AWS credentials from
// EnvConfigCredentials".
func (s *S3) Auth() string {
	st := s.conn.state.Load()
	if st == nil {
		return "not settled yet"
	}
	return st.auth
}

// Region returns the region requests are signed for, once a call has
// settled it.
func (s *S3) Region(ctx context.Context) (string, error) {
	st, err := s.conn.settle(ctx)
	if err != nil {
		return "", err
	}
	return st.region, nil
}

// Get reads the whole object as stored. An object whose declared size
// exceeds limit is refused before its body is read.
func (s *S3) Get(ctx context.Context, key string, limit int64) (Object, error) {
	if err := CheckKey(key); err != nil {
		return Object{}, err
	}
	limit = min(limit, s.opts.MaxObjectSize)
	var obj Object
	err := s.do(ctx, "get", key, limit, func(ctx context.Context, c *s3.Client) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), RequestPayer: s.payer()})
		if err != nil {
			return err
		}
		defer drain(out.Body)
		size := aws.ToInt64(out.ContentLength)
		if out.ContentLength == nil {
			size = -1
		}
		data, err := readBody(out.Body, size, limit)
		if err != nil {
			return err
		}
		obj = Object{Data: data, ID: s3Identity(out.ETag, out.VersionId)}
		if isGzip(aws.ToString(out.ContentEncoding)) {
			obj.ContentEncoding = "gzip"
		}
		return nil
	})
	return obj, err
}

// GetRange sends a ranged GET of the stored bytes; a zero length returns an
// empty slice without a request, and a range at or past the end (416
// InvalidRange) an empty slice.
func (s *S3) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, Identity, error) {
	if err := checkRange(offset, length); err != nil {
		return nil, "", err
	}
	if err := CheckKey(key); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", s, key, err)
	}
	if length == 0 {
		return []byte{}, "", nil
	}
	length = min(length, s.opts.MaxObjectSize)
	last := offset + length - 1
	if last < offset { // overflow
		last = 1<<63 - 1
	}
	var data []byte
	var id Identity
	// A read pinned to a version (WithVersion) is sent with If-Match: a
	// 412 is ErrChanged.
	var ifMatch *string
	if pin, ok := pinned(ctx, key); ok {
		if etag, ok := strings.CutPrefix(string(pin), "etag:"); ok {
			ifMatch = &etag
		}
	}
	err := s.do(ctx, "read", key, length, func(ctx context.Context, c *s3.Client) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{
			Bucket: &s.bucket, Key: aws.String(s.prefix + key), RequestPayer: s.payer(),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", offset, last)), IfMatch: ifMatch,
		})
		if err != nil {
			if code, ok := apiCode(err); ok && code == "InvalidRange" {
				data = []byte{}
				return nil
			}
			if code, _ := apiCode(err); ifMatch != nil && (code == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed) {
				return fmt.Errorf("%s: %w", apiText(err), ErrChanged)
			}
			return err
		}
		defer drain(out.Body)
		id = s3Identity(out.ETag, out.VersionId)
		size := int64(-1)
		if out.ContentLength != nil {
			size = *out.ContentLength
		}
		if cr := aws.ToString(out.ContentRange); cr != "" {
			n, total, err := checkRangeReply(cr, size, offset, last)
			if err == nil {
				err = checkSize(ctx, key, total)
			}
			if err != nil {
				return err
			}
			data, err = readExactly(out.Body, n)
			return err
		} else if err := checkSize(ctx, key, size); err != nil {
			return err
		} else if offset > 0 {
			// A whole object in reply to a range: some stores send a 200
			// for a range that covers the object; skip to offset.
			if ended, err := skipTo(out.Body, offset); err != nil {
				return err
			} else if ended {
				data = []byte{}
				return nil
			}
			if size >= 0 {
				size = max(size-offset, 0)
			}
		}
		if size >= 0 {
			size = min(size, length)
		}
		data, err = readBody(io.LimitReader(out.Body, length), size, length)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return data, id, nil
}

// Stat sends a HeadObject: the stored size and the identity.
func (s *S3) Stat(ctx context.Context, key string) (int64, Identity, error) {
	size, id, _, err := s.StatEncoding(ctx, key)
	return size, id, err
}

// StatEncoding is Stat, naming the encoding Get reports ("gzip" or "").
func (s *S3) StatEncoding(ctx context.Context, key string) (size int64, id Identity, encoding string, err error) {
	if err := CheckKey(key); err != nil {
		return 0, "", "", err
	}
	err = s.do(ctx, "stat", key, 0, func(ctx context.Context, c *s3.Client) error {
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + key), RequestPayer: s.payer()})
		if err != nil {
			return err
		}
		if out.ContentLength == nil {
			return errors.New("reply does not tell the object's size")
		}
		size, id, encoding = *out.ContentLength, s3Identity(out.ETag, out.VersionId), ""
		if isGzip(aws.ToString(out.ContentEncoding)) {
			encoding = "gzip"
		}
		return nil
	})
	return size, id, encoding, err
}

var _ EncodingStater = (*S3)(nil)

// s3PageSize is the listing page size asked for; S3 serves at most 1000.
const s3PageSize = 1000

// S3MaxListPages and S3MaxListEntries bound one List: a directory of more
// than a million entries, or a server that keeps saying "truncated", is
// refused with an error after at most S3MaxListPages pages, or once it
// holds more than S3MaxListEntries entries or S3MaxListBytes of names
// (checked after every page, the last one too), instead of growing for
// ever. A continuation token that comes back a second time, or a page
// said to be truncated that gives none, ends the listing at once with an
// error: a listing is whole or refused, never a part of it. So does a
// reply that is not a listing (an empty body, a page of HTML, an <Error>
// sent with 200), which is never taken for an empty directory. A key directory of a volume holds one
// entry per chunk or shard: a million is 2^20 chunks in one directory.
const (
	S3MaxListPages   = 2000
	S3MaxListEntries = 1 << 20
	S3MaxListBytes   = 64 << 20 // of names
)

// s3MaxListReply bounds the bytes of one listing page's reply, which the
// SDK decodes whole into memory: a page of S3 holds at most 1000 keys of
// at most 1024 bytes, each with its size, ETag, date and owner, about
// 3 MiB. A longer reply (a server that ignores max-keys) is refused
// (ErrTooLarge) when it passes the bound, before it is held whole.
const s3MaxListReply = 16 << 20

// List lists the prefix with ListObjectsV2 and the delimiter "/", page by
// page (one page's reply held at a time): objects are files with their
// stored size (-1 when the listing does not give it), common prefixes are
// directories. Names that are not clean keys, keys and prefixes outside
// the prefix asked for, and a key named twice after the first are left
// out. A listing is bounded (S3MaxListPages,
// S3MaxListEntries). A prefix under which nothing is stored returns
// ErrNotExist, except the root; a bucket that does not exist returns
// ErrNotExist for the root too.
func (s *S3) List(ctx context.Context, prefix string) ([]Entry, error) {
	dir := s.prefix
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, err
		}
		dir += prefix + "/"
	}
	var entries []Entry
	dirs := make(map[string]bool)  // a prefix may come again on a later page
	files := make(map[string]bool) // so may a key, from a server that repeats itself
	var token *string
	seen := make(map[string]bool) // the continuation tokens sent so far
	pages, names := 0, 0
	// CallTimeout bounds the listing as a whole, not each page: a server
	// that answers every page slowly, each within its own bound, would
	// otherwise hold a readdir (or a mount's start) for S3MaxListPages of
	// them.
	lctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	for {
		var page *s3.ListObjectsV2Output
		err := s.do(lctx, "list", prefix+"/", 0, func(ctx context.Context, c *s3.Client) error {
			out, err := c.ListObjectsV2(withBodyCap(ctx, s3MaxListReply), &s3.ListObjectsV2Input{
				Bucket: &s.bucket, Prefix: aws.String(dir), Delimiter: aws.String("/"),
				MaxKeys: aws.Int32(s3PageSize), ContinuationToken: token, RequestPayer: s.payer(),
			})
			page = out
			return err
		})
		if err != nil && ctx.Err() == nil && lctx.Err() != nil {
			return nil, fmt.Errorf("list %s/%s/: not done within %v (%d pages): %w", s, prefix, s.opts.CallTimeout, pages, ErrTransient)
		}
		if err != nil {
			return nil, err
		}
		if page.Name == nil {
			// The SDK reads an empty body, or one of no element it
			// knows, as an empty page: never "nothing here".
			return nil, fmt.Errorf("list %s/%s/: the server's reply to page %d is not a listing (no ListBucketResult naming the bucket)", s, prefix, pages+1)
		}
		if entries == nil && (len(page.Contents) > 0 || len(page.CommonPrefixes) > 0) {
			entries = []Entry{}
		}
		for _, p := range page.CommonPrefixes {
			name, under := strings.CutPrefix(aws.ToString(p.Prefix), dir)
			name = strings.TrimSuffix(name, "/")
			if under && name != "" && !dirs[name] && !strings.Contains(name, "/") && CheckKey(name) == nil {
				dirs[name] = true
				entries = append(entries, Entry{Name: name, IsDir: true, Size: -1})
				names += len(name)
			}
		}
		for _, o := range page.Contents {
			name, under := strings.CutPrefix(aws.ToString(o.Key), dir)
			if !under || name == "" || strings.Contains(name, "/") || CheckKey(name) != nil || files[name] {
				// The folder marker, a name no key can reach, a key
				// outside the prefix asked for, or one named again.
				continue
			}
			files[name] = true
			size := int64(-1) // not told: Stat it when it is looked up
			if o.Size != nil && *o.Size >= 0 {
				size = *o.Size
			}
			entries = append(entries, Entry{Name: name, Size: size, ID: s3Identity(o.ETag, nil)})
			names += len(name)
		}
		pages++
		if len(entries) > S3MaxListEntries || names > S3MaxListBytes {
			return nil, fmt.Errorf("list %s/%s/: more than %d entries or %d bytes of names: listing refused", s, prefix, S3MaxListEntries, S3MaxListBytes)
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		next := aws.ToString(page.NextContinuationToken)
		switch {
		case next == "":
			return nil, fmt.Errorf("list %s/%s/: the server said page %d was truncated and sent no continuation token: the rest of the listing cannot be asked for", s, prefix, pages)
		case seen[next]:
			return nil, fmt.Errorf("list %s/%s/: the server sent continuation token %.40q again after %d pages: a listing that would never end", s, prefix, next, pages)
		case pages >= S3MaxListPages:
			return nil, fmt.Errorf("list %s/%s/: more than %d pages: listing refused", s, prefix, S3MaxListPages)
		}
		seen[next] = true
		token = page.NextContinuationToken
	}
	if entries == nil && prefix != "" {
		return nil, fmt.Errorf("list %s/%s/: no object under it: %w", s, prefix, ErrNotExist)
	}
	// A name that is both an object and a prefix shows as the directory,
	// so that what lies below it stays reachable.
	return slices.DeleteFunc(entries, func(e Entry) bool { return !e.IsDir && dirs[e.Name] }), nil
}

func (s *S3) payer() types.RequestPayer {
	if s.opts.RequesterPays {
		return types.RequestPayerRequester
	}
	return ""
}

// s3Identity is the Identity of the version an S3 reply is of: its ETag,
// which every S3 store sends with every reply of an object and which a new
// upload of a key changes unless its bytes are the same; else its version
// id. (Some stores send a version id with HEAD and not with GET, so the
// ETag comes first, for a Stat and a read of one version to agree.)
func s3Identity(etag, version *string) Identity {
	if e := strings.TrimPrefix(strings.TrimSpace(aws.ToString(etag)), "W/"); e != "" {
		return Identity("etag:" + e)
	}
	if v := aws.ToString(version); v != "" && v != "null" {
		return Identity("s3version:" + v)
	}
	return ""
}

// s3Call is one attempt of an operation, sent with c.
type s3Call func(ctx context.Context, c *s3.Client) error

// do runs call under the retry policy (see retryPolicy), within the
// call's bound (callBound of n bytes), which is also the policy's budget.
// Errors are classified, prefixed with op and the object, and counted.
func (s *S3) do(ctx context.Context, op, key string, n int64, call s3Call) error {
	bound := min(s.opts.CallTimeout, time.Duration(s.opts.MaxAttempts)*attemptBound(s.opts.StallTimeout, s.opts.MinRate, n)+
		time.Duration(s.opts.MaxAttempts-1)*s.opts.MaxBackoff)
	cctx, cancel := context.WithTimeout(withStall(withMetrics(ctx, &s.m), s.opts.StallTimeout, s.opts.MinRate), bound)
	defer cancel()
	where := fmt.Sprintf("%s %s/%s", op, s, strings.TrimSuffix(key, "/"))
	if op == "list" {
		where = fmt.Sprintf("list %s/%s", s, strings.TrimPrefix(key, "/"))
	}
	policy := retryPolicy{attempts: s.opts.MaxAttempts, base: s.opts.BaseBackoff, max: s.opts.MaxBackoff}
	err := policy.run(cctx, &s.m, func() error {
		// Settled inside the loop: a failure to settle (the endpoint
		// down) is retried like any other. Its errors are classified
		// already.
		st, err := s.conn.settle(cctx)
		if err == nil {
			if err = call(cctx, st.client); err != nil {
				err = s.classify(cctx, bound, st, err)
			}
		}
		return err
	})
	switch {
	case err == nil:
		s.m.Done(nil)
		return nil
	case ctx.Err() != nil:
		err = ctx.Err()
	case cctx.Err() != nil && !errors.Is(err, ErrTransient):
		err = fmt.Errorf("not done within %v: %w: %w", bound, err, ErrTransient)
	}
	s.m.Done(err)
	return fmt.Errorf("%s: %w", where, err)
}

// classify maps an error of the SDK, or of reading a reply's body, to the
// fetcher's sentinels. A 403 is logged once, naming the credentials used
// and how to change them.
func (s *S3) classify(cctx context.Context, bound time.Duration, st *s3State, err error) error {
	err = withoutURL(err)
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrTransient) || errors.Is(err, ErrNotExist) || errors.Is(err, ErrPermission) || errors.Is(err, ErrChanged) {
		return err
	}
	var (
		noKey    *types.NoSuchKey
		notFound *types.NotFound
		noBucket *types.NoSuchBucket
	)
	code, _ := apiCode(err)
	status := httpStatus(err)
	switch {
	case errors.As(err, &noBucket) || code == "NoSuchBucket":
		return fmt.Errorf("bucket %q does not exist at %s: %w", s.bucket, st.where, ErrNotExist)
	case errors.As(err, &noKey) || errors.As(err, &notFound) || status == http.StatusNotFound || status == http.StatusGone:
		return fmt.Errorf("%s: %w", apiText(err), ErrNotExist)
	case status == http.StatusForbidden || status == http.StatusUnauthorized || code == "AccessDenied":
		s.refusedOnce.Do(func() {
			s.opts.Log.Warn("fetcher: S3 refused access (403); "+st.hint, "source", s.String(), "credentials", st.auth, "error", apiText(err))
		})
		return fmt.Errorf("%w: %s; this used %s: %s", ErrPermission, apiText(err), st.auth, st.hint)
	case status == http.StatusTooManyRequests || status >= 500 || code == "SlowDown" || code == "InternalError" ||
		code == "ServiceUnavailable" || code == "RequestTimeout":
		return withRetryAfter(fmt.Errorf("%s: %w", apiText(err), ErrTransient), status, httpHeader(err))
	case status == http.StatusMovedPermanently || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed":
		return fmt.Errorf("%s (the bucket is in another region than %s: pass its --region): %w", apiText(err), st.region, ErrPermission)
	case status != 0:
		return fmt.Errorf("unexpected reply: %s", apiText(err))
	case cctx.Err() != nil:
		return fmt.Errorf("not done within %v: %v: %w", bound, err, ErrTransient)
	}
	return transportError(err)
}

// apiCode returns the S3 error code of err ("NoSuchKey", "SlowDown"), if
// it has one.
func apiCode(err error) (string, bool) {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() != "" {
		return ae.ErrorCode(), true
	}
	return "", false
}

// apiText is the short form of an S3 error: its status and code, and its
// message when S3 sent one.
func apiText(err error) string {
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	text := err.Error()
	if errors.As(err, &ae) {
		text = ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			text += ": " + m
		}
	}
	if errors.As(err, &re) && re.Response != nil {
		text = fmt.Sprintf("%d %s", re.HTTPStatusCode(), text)
	}
	return text
}

// httpHeader is the header of the reply that err comes from, or nil.
func httpHeader(err error) http.Header {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.Header
	}
	return nil
}

// httpStatus is the HTTP status of the reply that err comes from, or 0.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
