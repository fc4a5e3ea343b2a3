package decode

import (
	"context"
	"errors"
)

// ErrMissing marks a chunk that its container says is absent (an empty
// entry of a shard index, a chunk id missing from its minishard): it reads
// as the fill value, exactly as a chunk object that does not exist.
var ErrMissing = errors.New("decode: chunk absent from its shard")

// Source is the I/O a chunk load does; package fs provides it over a
// fetcher. All methods are safe for concurrent use and honour ctx. An
// object that does not exist is an error that the caller of the load
// recognises; decode passes such errors through wrapped and never inspects
// them.
type Source interface {
	// Get returns the object at key with any transport encoding (HTTP
	// Content-Encoding gzip, a ".gz" sibling) removed; more than limit
	// bytes, stored or decoded, is an error.
	Get(ctx context.Context, key string, limit int64) ([]byte, error)
	// GetRange returns length bytes of the object at key from offset, or
	// fewer when the object ends first.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Stat returns the size in bytes of the object at key as GetRange
	// sees it.
	Stat(ctx context.Context, key string) (int64, error)
	// Memo returns the value that load produces for key, from a
	// byte-bounded cache shared by every load of the mount, with one load
	// in flight per key (shard and minishard indexes). Keys must be unique
	// to what they name within the array: use the object key plus a
	// suffix (the source adds the array's recipe). A value made from
	// another version of an object than the one this load reads is never
	// returned with it: the call fails, and the caller of the load drops
	// the memo and loads again (fs.Tree.load).
	Memo(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error)
	// Release tells the source that b, a value its Get returned, is no
	// longer referred to by anyone: the source may reuse its memory. Load
	// calls it once a chunk is decoded into memory of its own, never for
	// stored bytes that the decoded chunk shares.
	Release(b []byte)
}
