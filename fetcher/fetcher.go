// Package fetcher reads objects from a volume source: a directory on local
// disk, an HTTP(S) server, or a GCS bucket.
//
// A source is a root under which objects are named by keys: slash-separated,
// relative, clean paths such as "image/8_8_8/0-64_0-64_0-64". Keys never
// start with "/" and never contain "." or ".." elements; every Fetcher
// refuses such a key with an error wrapping ErrInvalidKey, so no key can
// leave the source.
//
// # Errors
//
// Errors are classified here, once, so that callers never look at HTTP status
// codes or *os.PathError values. An error a Fetcher returns wraps at most
// one of the sentinels below (test with errors.Is), or context.Canceled /
// context.DeadlineExceeded when the caller's context ended. An error that
// wraps none (an unexpected HTTP status, a body over the size limit, a
// local I/O error) is a failure that retrying did not or would not fix:
//
//   - ErrNotExist: the object does not exist (HTTP 404/410, ENOENT). Never
//     retried: a missing chunk is ordinary and reads as the fill value.
//   - ErrNotRegular: a local object is not a regular file (a FIFO, a
//     device such as /dev/zero, a socket, directly or through a link). It
//     wraps ErrNotExist, so that a probe for metadata reads it as absent,
//     as it always did; a chunk read must tell it apart and fail, since
//     a chunk whose file is there but is no file is not a hole.
//   - ErrPermission: the source refused access (HTTP 401/403, EACCES).
//     Never retried.
//   - ErrTransient: the source failed in a way that may pass (HTTP 429, 5xx,
//     connection reset, truncated body) and the retries ran out.
//   - ErrInvalidKey: the key is not a clean relative key.
//   - ErrNotSupported: the operation is not available on this source (for
//     example List on an HTTP server that serves no directory index).
//   - ErrTooLarge: the object is larger than the caller's limit (Get). Never
//     retried: the bytes past the limit are never read, so a hostile source
//     cannot make a reader buffer more than the metadata allows.
//   - ErrChanged: the object is no longer the version the read was pinned
//     to (WithVersion): an HTTP or S3 412 to If-Match, a failed GCS
//     generation precondition. Never retried here: the caller decides
//     whether to load again from the start.
//
// Every source words its errors alike, with no package prefix: the
// operation and the object, then the cause ("read gs://b/k: ...", "GET
// https://host/k: 503 Service Unavailable: transient failure"), so that
// they read as they are to the user of the command line.
//
// # Concurrency
//
// All methods of every Fetcher are safe for concurrent use. A cancelled
// context aborts the request promptly (in-flight I/O and retry back-off
// alike) and the call returns an error wrapping ctx.Err().
package fetcher

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors; see the package documentation for when each is returned.
// Their texts carry no package prefix: they end the lines a user reads
// ("GET https://host/k: 503 Service Unavailable: transient failure"),
// whose start already names the operation and the object.
var (
	ErrNotExist     = errors.New("object does not exist")
	ErrPermission   = errors.New("permission denied")
	ErrTransient    = errors.New("transient failure")
	ErrInvalidKey   = errors.New("invalid key")
	ErrNotSupported = errors.New("operation not supported by this source")
	ErrTooLarge     = errors.New("object larger than allowed")
	ErrChanged      = errors.New("object changed during the read")
	// ErrUnsupportedScheme is Open's error for a URL of a scheme that no
	// Fetcher serves; ErrNotDirectory for a local source that is not a
	// directory.
	ErrUnsupportedScheme = errors.New("unsupported scheme")
	ErrNotDirectory      = errors.New("not a directory")
	// ErrOutsideSource is the ErrPermission of an object that a local
	// source reaches only through a symbolic link it does not follow
	// (FileOptions.FollowSymlinks). The fetcher logs the first; callers
	// need not log each.
	// ErrNotRegular wraps ErrNotExist: see the package documentation.
	ErrNotRegular    = fmt.Errorf("not a regular file: %w", ErrNotExist)
	ErrOutsideSource = fmt.Errorf("a symbolic link leaves the source: %w", ErrPermission)
)

// Object is the body of an object as stored.
type Object struct {
	// Data is the object's bytes exactly as the source holds them. The
	// caller owns Data; fetchers read large objects into buffers from
	// internal/mem's pool, so a caller done with Data may give it back with
	// mem.Put.
	Data []byte
	// ContentEncoding is the transport encoding that the source declared
	// for Data ("gzip" for an HTTP response with Content-Encoding: gzip),
	// or "" when Data is the object itself. Fetchers never decode it:
	// decoding is the caller's, so that it runs on the decode pool and is
	// bounded by the size the metadata promises.
	ContentEncoding string
	// ID is the identity of the version of the object that Data is.
	ID Identity
}

// Identity names one version of an object, as its source tells it, so that
// a copy kept elsewhere (the disk cache) can tell whether it was made from
// the object as the source holds it now, as rclone keeps a fingerprint per
// cached item and gcsfuse a generation. Two identities of one key are equal
// when the source says the object has not changed between them:
//
//   - HTTP: the ETag (a weak one, W/"x", and a compressing server's
//     "x-gzip" compare equal to "x"); without an ETag, Last-Modified with
//     the object's size; with neither, the zero Identity.
//   - GCS: the generation with the stored size.
//   - A local file: its size, modification and change times (ns) and inode
//     number, so that a rewrite in place, a copy over it with the old
//     time kept (cp -p, rsync -t) and a rename over it all change it.
//
// The zero Identity means the source did not identify the version (or the
// object changed while it was read): nothing made from it can be checked
// later, so it must not be kept beyond the mount. Identities are compared
// only with identities of the same key from the same source.
type Identity string

// Known reports whether id identifies a version.
func (id Identity) Known() bool { return id != "" }

// Entry is one child of a listed prefix.
type Entry struct {
	Name  string // one path element, no slashes
	IsDir bool
	Size  int64 // object size in bytes, or -1 when the listing does not say
	// ID is the object's identity as the listing names it, the one a Stat
	// of the object returns (S3: its ETag; gs://: its generation and
	// size); empty where listings carry no versions (HTTP indexes, local
	// directories) and for a directory.
	ID Identity
}

// Fetcher reads objects from one source. See the package documentation for
// the error and concurrency contract that every method follows.
type Fetcher interface {
	// Get returns the whole object at key as stored. limit bounds the
	// stored bytes the caller accepts (at most 2 GiB): an object with more
	// is refused with an error wrapping ErrTooLarge after reading at most
	// limit+1 bytes of it, whatever size the source declares or omits.
	Get(ctx context.Context, key string, limit int64) (Object, error)

	// GetRange returns length bytes of the object at key starting at
	// offset, with no transport encoding, and the identity of the version
	// they were read from. It returns fewer bytes only when the object
	// ends before offset+length; an offset at or past the end returns an
	// empty slice and no error (and, when no request was needed, the zero
	// Identity).
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, Identity, error)

	// Stat returns the size in bytes of the object at key as GetRange sees
	// it (without transport encoding), and its identity. It asks the
	// source every time (a HEAD, a metadata request, a stat): it is how a
	// caller learns whether an object changed.
	Stat(ctx context.Context, key string) (int64, Identity, error)

	// List returns the immediate children of the directory prefix (""
	// for the root), in no particular order. It returns ErrNotExist when
	// the prefix is not a directory and ErrNotSupported when the source
	// cannot list.
	List(ctx context.Context, prefix string) ([]Entry, error)

	// String names the source for log lines and error messages, e.g.
	// "file:///data/vol" or "https://example.org/vol".
	String() string
}

// EncodingStater is implemented by a Fetcher whose Stat and GetRange show
// an object stored with Content-Encoding: gzip as stored, its compressed
// size and bytes, where Get returns it with Object.ContentEncoding
// "gzip" for the caller to gunzip (S3, GCS). A caller that must know the
// object's bytes are the decoded ones (a chunk read in ranged parts)
// asks it.
type EncodingStater interface {
	// StatEncoding is Stat, and also names the encoding Get would
	// report for the object: "gzip", or "" for none.
	StatEncoding(ctx context.Context, key string) (size int64, id Identity, encoding string, err error)
}

// CacheNamer is implemented by a Fetcher whose String does not tell apart
// every source whose objects differ: an s3:// source names its bucket,
// not the endpoint that serves it, and two endpoints may each have a
// bucket of that name.
type CacheNamer interface {
	// CacheName names the source in what caches shared between sources
	// keep (a disk cache, a shared tier): distinct for sources whose
	// objects may differ, stable across processes.
	CacheName() string
}

// CacheName returns f's CacheName when it has one, else its String.
func CacheName(f Fetcher) string {
	if n, ok := f.(CacheNamer); ok {
		return n.CacheName()
	}
	return f.String()
}
