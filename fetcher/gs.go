package fetcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/volfs/volfs/internal/mem"
)

// GCSOptions tunes a gs:// fetcher. Zero fields take their defaults.
type GCSOptions struct {
	// Conns bounds the connections to the storage endpoint, busy and idle
	// alike (default 16, at least 8). The first gs:// fetcher of the
	// process sets the bound of the client that all later ones share.
	Conns int
	// Anonymous sends no credentials even when Application Default
	// Credentials are found. Without it, ADC are used when found and
	// anonymous access otherwise; a GOOGLE_APPLICATION_CREDENTIALS that
	// names no usable credentials is an error. With STORAGE_EMULATOR_HOST
	// set, access is always anonymous (emulators take none).
	Anonymous bool
	// Endpoint replaces the JSON API endpoint (for tests: an emulator's
	// "http://127.0.0.1:PORT/storage/v1/"). It takes precedence over
	// STORAGE_EMULATOR_HOST.
	Endpoint string
	// MaxAttempts is how many times the storage library sends a request
	// before a transient failure is returned (default 6).
	MaxAttempts int
	// BaseBackoff and MaxBackoff shape the library's exponential back-off
	// between attempts (defaults 100ms and 5s).
	BaseBackoff, MaxBackoff time.Duration
	// StallTimeout bounds how long one HTTP exchange may go without
	// progress: from the request to the reply's headers, and between two
	// reads of its body that return data (default 30s). A stalled exchange
	// fails with a retryable error, and the library sends it again (a read
	// resumes where the stalled body stopped).
	StallTimeout time.Duration
	// MinRate is the slowest transfer, in bytes per second, that an
	// exchange may make (default 64 KiB/s), as HTTPOptions.MinRate: once
	// the reply's headers are in, the exchange must end within
	// StallTimeout plus its body at MinRate, counted from the request, or
	// it fails with a retryable error. A server that drips a byte a
	// second, which the stall watchdog never catches, is cut off.
	MinRate int64
	// CallTimeout bounds each call (Get, GetRange, Stat, List) as a whole,
	// retries included (default 5m): the library would otherwise retry for
	// as long as the context lives. A read is bounded further by what
	// MaxAttempts attempts at StallTimeout plus its size at MinRate, and
	// their back-off, may take (callBound), as an HTTP source's is: the
	// library resumes a read cut off by the deadline from the bytes it
	// has, so a drip would otherwise go on, a few bytes an attempt, for
	// the whole CallTimeout.
	CallTimeout time.Duration
	// MaxObjectSize bounds what one read holds in memory (default 2 GiB),
	// including a gzip-encoded object that GetRange reads whole.
	MaxObjectSize int64
}

// withDefaults fills zero fields: the session, retry and size defaults are
// the HTTP fetcher's, so both kinds of source behave alike.
func (o GCSOptions) withDefaults() GCSOptions {
	h := HTTPOptions{Conns: o.Conns, MaxAttempts: o.MaxAttempts, BaseBackoff: o.BaseBackoff, MaxBackoff: o.MaxBackoff,
		StallTimeout: o.StallTimeout, MinRate: o.MinRate, MaxObjectSize: o.MaxObjectSize}.withDefaults()
	o.Conns, o.MaxAttempts, o.BaseBackoff, o.MaxBackoff = h.Conns, h.MaxAttempts, h.BaseBackoff, h.MaxBackoff
	o.StallTimeout, o.MinRate, o.MaxObjectSize = h.StallTimeout, h.MinRate, h.MaxObjectSize
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	return o
}

// gcsAttrCacheEntries bounds the per-fetcher memo of object sizes and
// encodings (about 100 bytes an entry): enough for the listings of a large
// mount, so that a read of a listed object needs no metadata request.
const gcsAttrCacheEntries = 1 << 17

// gcsWholeCacheBytes bounds the gzip-encoded objects that GetRange keeps
// after reading them whole, so that the kernel's successive 128 KiB reads
// of one such file do not each download the object again. An object
// larger than this is read whole on every GetRange.
const gcsWholeCacheBytes = 64 << 20

// GCS is a Fetcher over a bucket, or a prefix of one: the object at key
// "a/b" is the object named prefix + "/a/b". Directories are the prefixes
// that object names share ("implicit directories", as gcsfuse
// --implicit-dirs shows them); an object whose name ends with "/" (a
// console-made folder marker) makes its directory exist but is not listed,
// and an object named like a directory beside it ("a" beside "a/b") is
// hidden by the directory.
//
// Objects stored with Content-Encoding: gzip are never transcoded by the
// server: Get returns their stored bytes with ContentEncoding "gzip", and
// Stat, List and GetRange show the stored (compressed) bytes, as gcsfuse
// does, so that a pass-through file's size, listing and bytes agree. Such
// an object is never read with a Range request (GCS ignores Range on
// them): GetRange reads it whole, bounded by MaxObjectSize, and slices.
// Objects are assumed not to change while the fetcher lives: sizes and
// encodings learned from listings and reads are remembered.
//
// Requests, retries and back-off are the storage library's, configured
// from the retry policy of every source (retryPolicy.gax), so that a read
// cut off mid-body resumes from the bytes it has; a whole-object read checks the CRC32C that GCS sends.
type GCS struct {
	bucketName string
	prefix     string // "" or ends with "/"
	opts       GCSOptions
	client     *gcsClient
	bucket     *storage.BucketHandle // with the retry configuration

	attrs *lru.Cache[string, gcsAttrs] // object name -> size and encoding

	wholeFlight singleflight.Group // one whole read of a gzip-encoded object at a time
	wholeMu     sync.Mutex
	whole       []wholeObject // GUARDED_BY(wholeMu); most recent last
	wholeBytes  int64         // GUARDED_BY(wholeMu)

	m *Metrics // Conns: the client's dials; the retry policy counts Retries
}

// gcsAttrs is what GetRange and Stat need to know about an object.
type gcsAttrs struct {
	size int64 // stored bytes
	gzip bool  // stored with Content-Encoding: gzip
}

// wholeObject is the stored bytes of a gzip-encoded object read whole.
type wholeObject struct {
	name string
	data []byte
	id   Identity
}

// NewGCS returns a fetcher for source, "gs://bucket" or
// "gs://bucket/prefix". It makes no request: a bucket that does not exist
// or refuses access shows at the first call.
func NewGCS(source string, opts GCSOptions) (*GCS, error) {
	rest, ok := strings.CutPrefix(source, "gs://")
	if !ok {
		return nil, fmt.Errorf("%q is not a gs:// URL", source)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if bucket == "" || strings.ContainsAny(bucket, "?#\\ ") {
		return nil, fmt.Errorf("%q: want gs://BUCKET or gs://BUCKET/PREFIX", source)
	}
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("%q: bad prefix: %w", source, err)
		}
		prefix += "/"
	}
	opts = opts.withDefaults()
	client, err := gcsClientFor(opts)
	if err != nil {
		return nil, err
	}
	attrs, err := lru.New[string, gcsAttrs](gcsAttrCacheEntries)
	if err != nil {
		return nil, err
	}
	m := new(Metrics)
	m.ConnsFrom(client.sess.dials.Load)
	policy := retryPolicy{attempts: opts.MaxAttempts, base: opts.BaseBackoff, max: opts.MaxBackoff}
	// The library asks retryable only when it may send the request
	// again, so a true answer is one retry (but for a caller's context
	// that ends during the back-off).
	retryable := func(err error) bool {
		retry := errors.Is(err, errStalled) || errors.Is(err, errTooSlow) || storage.ShouldRetry(err)
		if retry {
			m.Retry()
		}
		return retry
	}
	return &GCS{
		bucketName: bucket,
		prefix:     prefix,
		opts:       opts,
		client:     client,
		bucket: client.client.Bucket(bucket).Retryer(
			storage.WithBackoff(policy.gax()),
			storage.WithMaxAttempts(policy.attempts),
			// Every call of this fetcher reads, and reads are idempotent.
			storage.WithPolicy(storage.RetryAlways),
			storage.WithErrorFunc(retryable),
		),
		attrs: attrs,
		m:     m,
	}, nil
}

// Stats returns g's counters (Statser): every Get, GetRange, Stat and List
// with its outcome, the body bytes of every attempt, the retries the
// storage library made, and the dials of the process's storage client.
func (g *GCS) Stats() Stats { return g.m.Stats() }

// call returns the context of one call of g under ctx, bounded by bound,
// which counts its body bytes in g's Metrics.
func (g *GCS) call(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(withMetrics(ctx, g.m), bound)
}

// String returns "gs://bucket" or "gs://bucket/prefix".
func (g *GCS) String() string {
	return strings.TrimSuffix("gs://"+g.bucketName+"/"+g.prefix, "/")
}

// Dials returns the number of TCP connections that the process's storage
// client has opened so far. In steady state it does not grow.
func (g *GCS) Dials() int64 { return g.client.sess.dials.Load() }

// Auth says how requests are authenticated: "anonymous access" or
// "Application Default Credentials".
func (g *GCS) Auth() string { return g.client.auth }

// Get reads the whole object with ReadCompressed(true): a gzip-encoded
// object comes back as stored, with ContentEncoding "gzip". An object whose
// declared size exceeds limit is refused before its body is read; the body
// is read through the limit all the same.
func (g *GCS) Get(ctx context.Context, key string, limit int64) (obj Object, err error) {
	defer func() { g.m.Done(err) }()
	if err := CheckKey(key); err != nil {
		return Object{}, err
	}
	limit = min(limit, g.opts.MaxObjectSize)
	bound := g.callBound(limit)
	cctx, cancel := g.call(ctx, bound)
	defer cancel()
	name := g.prefix + key
	data, gz, id, err := g.readWhole(cctx, name, limit)
	if err != nil {
		return Object{}, g.error(ctx, cctx, bound, "get", key, err)
	}
	obj = Object{Data: data, ID: id}
	if gz {
		obj.ContentEncoding = "gzip"
	}
	return obj, nil
}

// readWhole reads the stored bytes of object name to their end (so that
// the library checks the CRC32C), refusing more than limit, and returns
// them with the identity of the generation read.
func (g *GCS) readWhole(ctx context.Context, name string, limit int64) (data []byte, gz bool, id Identity, err error) {
	r, err := g.bucket.Object(name).ReadCompressed(true).NewReader(ctx)
	if err != nil {
		return nil, false, "", err
	}
	defer r.Close()
	id = gcsIdentity(r.Attrs.Generation, r.Attrs.Size)
	gz = isGzip(r.Attrs.ContentEncoding)
	size := r.Attrs.Size // the stored size: nothing is transcoded
	if size > limit {
		return nil, gz, "", fmt.Errorf("object of %d bytes: %w (limit %d)", size, ErrTooLarge, limit)
	}
	if size < 0 {
		data, err = io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return nil, gz, "", err
		}
		if int64(len(data)) > limit {
			return nil, gz, "", fmt.Errorf("object of more than %d bytes: %w", limit, ErrTooLarge)
		}
	} else {
		data = mem.Get(int(size))
		if _, err := io.ReadFull(r, data); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, gz, "", err
		}
		// Read on to the end, where the library compares the CRC32C.
		var one [1]byte
		switch _, err := io.ReadFull(r, one[:]); err {
		case io.EOF:
		case nil:
			return nil, gz, "", fmt.Errorf("object longer than its declared %d bytes", size)
		default:
			return nil, gz, "", err
		}
	}
	g.attrs.Add(name, gcsAttrs{size: int64(len(data)), gzip: gz})
	return data, gz, id, nil
}

// GetRange reads a plain object with a Range request of the bytes asked
// for. A gzip-encoded object is read whole (see GCS) and sliced. The size
// and encoding come from the last listing or read of the object, or from
// one metadata request.
func (g *GCS) GetRange(ctx context.Context, key string, offset, length int64) (data []byte, id Identity, err error) {
	defer func() { g.m.Done(err) }()
	if err := checkRange(offset, length); err != nil {
		return nil, "", err
	}
	if err := CheckKey(key); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", g, key, err)
	}
	bound := g.callBound(length)
	cctx, cancel := g.call(ctx, bound)
	defer cancel()
	data, id, err = g.getRange(cctx, g.prefix+key, offset, length, pinnedGeneration(ctx, key))
	if err != nil {
		return nil, "", g.error(ctx, cctx, bound, "read", key, err)
	}
	return data, id, nil
}

// pinnedGeneration returns the generation ctx pins key to (WithVersion),
// or 0.
func pinnedGeneration(ctx context.Context, key string) int64 {
	id, ok := pinned(ctx, key)
	if !ok {
		return 0
	}
	var gen, size int64
	if _, err := fmt.Sscanf(string(id), "generation:%d:%d", &gen, &size); err != nil {
		return 0
	}
	return gen
}

// getRange reads the range of the object name; a generation other than 0
// is sent as an ifGenerationMatch condition, whose failure is ErrChanged.
func (g *GCS) getRange(ctx context.Context, name string, offset, length, generation int64) ([]byte, Identity, error) {
	a, err := g.attrsOf(ctx, name)
	if err != nil {
		return nil, "", err
	}
	if offset >= a.size || length == 0 {
		return []byte{}, "", nil
	}
	n := min(length, a.size-offset)
	if a.gzip {
		whole, err := g.wholeGzip(ctx, name)
		if err != nil {
			return nil, "", err
		}
		if offset >= int64(len(whole.data)) {
			return []byte{}, whole.id, nil
		}
		return bytes.Clone(whole.data[offset:min(offset+n, int64(len(whole.data)))]), whole.id, nil
	}
	obj := g.bucket.Object(name)
	if generation != 0 {
		obj = obj.If(storage.Conditions{GenerationMatch: generation})
	}
	r, err := obj.NewRangeReader(ctx, offset, n)
	var gerr *googleapi.Error
	if generation != 0 && errors.As(err, &gerr) && gerr.Code == http.StatusPreconditionFailed {
		return nil, "", fmt.Errorf("%v: %w", err, ErrChanged)
	}
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	if isGzip(r.Attrs.ContentEncoding) {
		// Replaced by a gzip-encoded object since its size was learned:
		// the reply is not the range asked for.
		g.attrs.Remove(name)
		return nil, "", fmt.Errorf("object changed to Content-Encoding gzip while read: %w", ErrTransient)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, "", err
	}
	return data, gcsIdentity(r.Attrs.Generation, r.Attrs.Size), nil
}

// gcsIdentity is the Identity of a generation of an object of size stored
// bytes.
func gcsIdentity(generation, size int64) Identity {
	if generation == 0 {
		return ""
	}
	return Identity(fmt.Sprintf("generation:%d:%d", generation, size))
}

// wholeGzip returns the stored bytes of the gzip-encoded object name,
// from the small cache of such objects when it holds them. Concurrent
// callers share one read, which runs on until CallTimeout even when the
// caller that started it leaves, so that its cancellation fails no other
// caller.
func (g *GCS) wholeGzip(ctx context.Context, name string) (wholeObject, error) {
	g.wholeMu.Lock()
	for i, w := range g.whole {
		if w.name == name {
			g.whole = append(append(g.whole[:i:i], g.whole[i+1:]...), w)
			g.wholeMu.Unlock()
			return w, nil
		}
	}
	g.wholeMu.Unlock()

	ch := g.wholeFlight.DoChan(name, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.CallTimeout)
		defer cancel()
		data, _, id, err := g.readWhole(rctx, name, g.opts.MaxObjectSize)
		w := wholeObject{name, data, id}
		if err == nil && int64(len(data)) <= gcsWholeCacheBytes {
			g.keepWhole(w)
		}
		return w, err
	})
	select {
	case <-ctx.Done():
		return wholeObject{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return wholeObject{}, r.Err
		}
		return r.Val.(wholeObject), nil
	}
}

// keepWhole adds an object's bytes to the cache of gzip-encoded objects,
// evicting the least recently used beyond gcsWholeCacheBytes.
func (g *GCS) keepWhole(w wholeObject) {
	g.wholeMu.Lock()
	defer g.wholeMu.Unlock()
	g.whole = append(g.whole, w)
	g.wholeBytes += int64(len(w.data))
	for g.wholeBytes > gcsWholeCacheBytes {
		g.wholeBytes -= int64(len(g.whole[0].data))
		g.whole = g.whole[1:]
	}
}

// attrsOf returns the size and encoding of object name, asking GCS only
// when no listing or read has told them yet.
func (g *GCS) attrsOf(ctx context.Context, name string) (gcsAttrs, error) {
	if a, ok := g.attrs.Get(name); ok {
		return a, nil
	}
	a, _, err := g.askAttrs(ctx, name)
	return a, err
}

// askAttrs asks GCS for the attributes of object name, and keeps them for
// attrsOf.
func (g *GCS) askAttrs(ctx context.Context, name string) (gcsAttrs, Identity, error) {
	oa, err := g.bucket.Object(name).Attrs(ctx)
	if err != nil {
		return gcsAttrs{}, "", err
	}
	a := gcsAttrs{size: oa.Size, gzip: isGzip(oa.ContentEncoding)}
	g.attrs.Add(name, a)
	return a, gcsIdentity(oa.Generation, oa.Size), nil
}

// Stat returns the stored size of the object (for a gzip-encoded object,
// its compressed size, which is what GetRange reads) and its identity,
// from one metadata request.
func (g *GCS) Stat(ctx context.Context, key string) (size int64, id Identity, err error) {
	size, id, _, err = g.StatEncoding(ctx, key)
	return size, id, err
}

// StatEncoding is Stat, naming the encoding Get reports ("gzip" or "").
func (g *GCS) StatEncoding(ctx context.Context, key string) (size int64, id Identity, encoding string, err error) {
	defer func() { g.m.Done(err) }()
	if err := CheckKey(key); err != nil {
		return 0, "", "", err
	}
	if err := ctx.Err(); err != nil {
		return 0, "", "", fmt.Errorf("stat %s/%s: %w", g, key, err)
	}
	cctx, cancel := g.call(ctx, g.opts.CallTimeout)
	defer cancel()
	a, id, err := g.askAttrs(cctx, g.prefix+key)
	if err != nil {
		return 0, "", "", g.error(ctx, cctx, g.opts.CallTimeout, "stat", key, err)
	}
	if a.gzip {
		encoding = "gzip"
	}
	return a.size, id, encoding, nil
}

var _ EncodingStater = (*GCS)(nil)

// gcsPageSize is the listing page size asked for; GCS serves at most 1000.
const gcsPageSize = 1000

// List lists the prefix with the delimiter "/", page by page (only one
// page's reply is held at a time): objects are files with their stored
// size, common prefixes are directories. Names that are not clean keys
// (empty, ".", ".." elements, backslashes) are left out. A prefix under
// which nothing is stored returns ErrNotExist, except the root. A listing
// is bounded as an S3 one is (a page's reply cut at 16 MiB; S3MaxListPages,
// S3MaxListEntries, S3MaxListBytes; a page token sent twice ends it at
// once), and as a whole by CallTimeout.
func (g *GCS) List(ctx context.Context, prefix string) (entries []Entry, err error) {
	defer func() { g.m.Done(err) }()
	dir := g.prefix
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, err
		}
		dir += prefix + "/"
	}
	cctx, cancel := g.call(ctx, g.opts.CallTimeout)
	defer cancel()
	entries, err = g.list(cctx, dir)
	if err != nil {
		return nil, g.error(ctx, cctx, g.opts.CallTimeout, "list", prefix+"/", err)
	}
	if entries == nil && prefix != "" {
		return nil, g.error(ctx, cctx, g.opts.CallTimeout, "list", prefix+"/", fmt.Errorf("no object under it: %w", ErrNotExist))
	}
	return entries, nil
}

// list returns the entries under dir, nil when dir holds nothing at all
// and an empty slice when only a folder marker holds it.
func (g *GCS) list(ctx context.Context, dir string) ([]Entry, error) {
	q := &storage.Query{Prefix: dir, Delimiter: "/"}
	if err := q.SetAttrSelection([]string{"Name", "Size", "ContentEncoding", "Generation"}); err != nil {
		return nil, err
	}
	// A page's reply is decoded whole: bounded as an S3 page's is.
	it := g.bucket.Objects(withBodyCap(ctx, s3MaxListReply), q)
	it.PageInfo().MaxSize = gcsPageSize
	var entries []Entry
	dirs := make(map[string]bool) // a prefix may come again on a later page
	// The iterator asks for pages while the server names a next one, with
	// no count, and takes a token sent before: a Next that starts with
	// nothing buffered read a page, whose token is checked here.
	tokens := make(map[string]bool)
	names := 0
	for {
		fetched := it.PageInfo().Remaining() == 0
		oa, err := it.Next()
		if err == iterator.Done {
			// A name that is both an object and a prefix shows as the
			// directory, so that what lies below it stays reachable.
			return slices.DeleteFunc(entries, func(e Entry) bool { return !e.IsDir && dirs[e.Name] }), nil
		}
		if err != nil {
			return nil, err
		}
		if next := it.PageInfo().Token; fetched && next != "" {
			switch {
			case tokens[next]:
				return nil, fmt.Errorf("the server sent page token %.40q again after %d pages: a listing that would never end", next, len(tokens)+1)
			case len(tokens)+1 >= S3MaxListPages:
				return nil, fmt.Errorf("more than %d pages: listing refused", S3MaxListPages)
			}
			tokens[next] = true
		}
		if entries == nil {
			entries = []Entry{}
		}
		if oa.Prefix != "" {
			name := strings.TrimSuffix(strings.TrimPrefix(oa.Prefix, dir), "/")
			if name != "" && !dirs[name] && !strings.Contains(name, "/") && CheckKey(name) == nil {
				dirs[name] = true
				entries = append(entries, Entry{Name: name, IsDir: true, Size: -1})
				names += len(name)
			}
		} else if name := strings.TrimPrefix(oa.Name, dir); name != "" && !strings.Contains(name, "/") && CheckKey(name) == nil {
			// (Else the folder marker, or a name no key can reach.)
			g.attrs.Add(oa.Name, gcsAttrs{size: oa.Size, gzip: isGzip(oa.ContentEncoding)})
			entries = append(entries, Entry{Name: name, Size: oa.Size, ID: gcsIdentity(oa.Generation, oa.Size)})
			names += len(name)
		}
		if len(entries) > S3MaxListEntries || names > S3MaxListBytes {
			return nil, fmt.Errorf("more than %d entries or %d bytes of names: listing refused", S3MaxListEntries, S3MaxListBytes)
		}
	}
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }

// gcsClients holds one client per endpoint and credential choice, for the
// life of the process; a mount makes one.
var gcsClients = struct {
	mu sync.Mutex
	m  map[string]*gcsClient // GUARDED_BY(mu)
}{m: make(map[string]*gcsClient)}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// The object, without the query: a listing's fills lines of a terminal.
	what := req.Method + " " + req.URL.Scheme + "://" + req.URL.Host + req.URL.EscapedPath()
	timeout, minRate := t.timeout, t.minRate
	if o, ok := req.Context().Value(stallKey{}).(stallOptions); ok {
		timeout, minRate = o.timeout, o.minRate
	}
	ctx, wd := newWatchdog(req.Context(), what, timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		wd.stop()
		if e := wd.ended(); e != nil {
			return nil, e
		}
		return nil, err
	}
	n := resp.ContentLength
	if n < 0 {
		n = rangeLength(req.Header.Get("Range"))
	}
	wd.limit(n, minRate)
	resp.Body = wd.body(resp.Body, metricsFrom(ctx), true)
	if max, ok := req.Context().Value(bodyCapKey{}).(int64); ok {
		resp.Body = &cappedBody{ReadCloser: resp.Body, max: max}
	}
	return resp, nil
}

type bodyCapKey struct{}

// withBodyCap returns ctx carrying a bound of max bytes on the body of
// each reply to a request made with it (stallTransport): a reader of a
// longer body gets an error wrapping ErrTooLarge in place of the bytes
// past max, for replies that a client (an SDK's XML decoder) reads whole
// into memory.
func withBodyCap(ctx context.Context, max int64) context.Context {
	return context.WithValue(ctx, bodyCapKey{}, max)
}

// cappedBody is a body of at most max bytes (withBodyCap).
type cappedBody struct {
	io.ReadCloser
	max, read int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.read > b.max {
		return 0, b.tooLarge()
	}
	// One byte more than the bound tells a body of exactly max bytes
	// from a longer one.
	p = p[:min(int64(len(p)), b.max-b.read+1)]
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > b.max {
		return n - 1, b.tooLarge()
	}
	return n, err
}

func (b *cappedBody) tooLarge() error {
	return fmt.Errorf("reply of more than %d bytes: %w", b.max, ErrTooLarge)
}
