package decode

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Codec undoes one bytes-to-bytes stage of a chunk's stored encoding (a
// compressor such as gzip, zstd or blosc, or a checksum such as crc32c).
//
// Decode appends the decoded form of src to dst[:0] (reusing dst's storage
// when it is large enough) and returns it. limit is the most bytes the
// output may hold, known from the metadata: a stream that would decode to
// more is refused with an error wrapping ErrCorrupt, and no decoder
// allocates more than limit plus a small constant, whatever sizes src
// claims. Input that does not decode is an error wrapping ErrCorrupt; an
// option the decoder does not implement (a blosc2 buffer, say) wraps
// ErrUnsupported. A Codec is safe for concurrent use and never retains src
// or the result.
type Codec func(dst, src []byte, limit int) ([]byte, error)

var codecs = struct {
	sync.RWMutex
	byName map[string]Codec // GUARDED_BY(RWMutex)
}{byName: make(map[string]Codec)}

// RegisterCodec makes a codec available by name to every format, as
// archive/zip's RegisterDecompressor does for compression methods. Names are
// the ones numcodecs and Zarr v3 use ("gzip", "zlib", "bz2", "zstd", "lz4",
// "blosc", "crc32c"); formats map their own spellings onto them. It panics
// if name is already registered.
func RegisterCodec(name string, c Codec) {
	codecs.Lock()
	defer codecs.Unlock()
	if _, dup := codecs.byName[name]; dup {
		panic("decode: codec registered twice: " + name)
	}
	codecs.byName[name] = c
}

// LookupCodec returns the codec registered under name.
func LookupCodec(name string) (Codec, bool) {
	codecs.RLock()
	defer codecs.RUnlock()
	c, ok := codecs.byName[name]
	return c, ok
}

// codecFor returns the codec called name, or an error wrapping
// ErrUnsupported that names it.
func codecFor(name string) (Codec, error) {
	c, ok := LookupCodec(name)
	if !ok {
		return nil, fmt.Errorf("codec %q: %w", name, ErrUnsupported)
	}
	return c, nil
}

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
	// to what they name: use the object key plus a suffix.
	Memo(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error)
	// Release tells the source that b, a value its Get returned, is no
	// longer referred to by anyone: the source may reuse its memory. Load
	// calls it once a chunk is decoded into memory of its own, never for
	// stored bytes that the decoded chunk shares.
	Release(b []byte)
}
