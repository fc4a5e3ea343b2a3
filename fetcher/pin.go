package fetcher

import (
	"context"
	"fmt"
)

// Pinning a read to one version
//
// A load that reads one object in several requests (a shard's index, then
// a chunk inside it) must read them all from one version of the object.
// The caller pins each later request to the identity the first one
// returned with WithVersion; a fetcher that can make the source refuse
// another version does so, and answers ErrChanged:
//
//   - HTTP: If-Match with the ETag of a strong "etag:" identity (a weak
//     ETag or a Last-Modified identity cannot be a precondition: RFC 9110
//     compares If-Match strongly).
//   - S3: IfMatch with the ETag.
//   - GCS: the generation as an ifGenerationMatch condition.
//
// The precondition is the source's half of the check. The caller still
// compares the identity each call returns with the one it pinned (a local
// file's identity is taken before and after its bytes are read, and
// sources without preconditions answer with their current version), so a
// mix of versions is never served whether or not the source honours the
// precondition. A context is the carrier because the pin must pass through
// every wrapper of a Fetcher (retries, metrics, keeping) untouched, as a
// deadline does.

type versionKey struct{}

// WithVersion returns ctx carrying id as the version that reads of key
// under it must be: a fetcher asked for key under it sends the
// precondition its source supports and answers ErrChanged when the source
// holds another version. Reads of other keys ignore it. An unknown id
// pins nothing.
func WithVersion(ctx context.Context, key string, id Identity) context.Context {
	if !id.Known() {
		return ctx
	}
	return context.WithValue(ctx, versionKey{}, pin{key, id})
}

type pin struct {
	key string
	id  Identity
}

// pinned returns the version ctx pins key to, if any (WithVersion).
func pinned(ctx context.Context, key string) (Identity, bool) {
	p, ok := ctx.Value(versionKey{}).(pin)
	if !ok || p.key != key {
		return "", false
	}
	return p.id, true
}

// Pinned returns the version ctx pins key to (WithVersion), if any: for a
// fetcher that serves key from another object (a reference set's target)
// and passes the pin on as that object's own.
func Pinned(ctx context.Context, key string) (Identity, bool) { return pinned(ctx, key) }

// pinnedReply is nil unless ctx pins key (WithVersion) to a version other
// than got, the identity of a reply: then an error wrapping ErrChanged. A
// stream (Streamer) has no retry to ask again, so its reply is compared
// before its first byte is handed out.
func pinnedReply(ctx context.Context, key string, got Identity) error {
	if id, ok := pinned(ctx, key); ok && got.Known() && got != id {
		return fmt.Errorf("%s, the read was pinned to %s: %w", got, id, ErrChanged)
	}
	return nil
}

type sizeKey struct{}

type sizePin struct {
	key  string
	size int64
}

// WithSize returns ctx carrying size as the size the object at key must
// have for reads of it under ctx: a fetcher whose reply tells the whole
// object's size (an HTTP or S3 Content-Range, the length of a whole body
// sent for a range) answers ErrChanged when it is another. An identity
// that names a version without its size (an ETag) cannot then hide an
// object longer or shorter than the one whose size was checked, as a
// server does whose HEAD and GET give one ETag and two sizes. Reads of
// other keys ignore it; a negative size pins nothing.
func WithSize(ctx context.Context, key string, size int64) context.Context {
	if size < 0 {
		return ctx
	}
	return context.WithValue(ctx, sizeKey{}, sizePin{key, size})
}

// checkSize refuses total, the size a reply tells the object at key has
// (negative: the reply does not tell), when ctx pins key to another size
// (WithSize), with an error wrapping ErrChanged.
func checkSize(ctx context.Context, key string, total int64) error {
	p, ok := ctx.Value(sizeKey{}).(sizePin)
	if !ok || p.key != key || total < 0 || total == p.size {
		return nil
	}
	return fmt.Errorf("%s: the object is %d bytes, the read was pinned to %d: %w", key, total, p.size, ErrChanged)
}
