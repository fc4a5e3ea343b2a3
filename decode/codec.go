package decode

import (
	"context"
	"fmt"
	"sort"
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

// CodecNames returns the registered codec names, sorted.
func CodecNames() []string {
	codecs.RLock()
	defer codecs.RUnlock()
	names := make([]string, 0, len(codecs.byName))
	for n := range codecs.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
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

// RangeReader is the I/O a chunk load may do beyond fetching the chunk's
// own object: ranged reads of a shard (its index, a minishard index, one
// chunk's bytes). Every fetcher.Fetcher satisfies it. A missing object is
// an error that the caller of the load recognises (decode passes it through
// wrapped); decode never inspects it. It must be safe for concurrent use
// and honour ctx.
type RangeReader interface {
	// GetRange returns length bytes of the object at key from offset, or
	// fewer when the object ends first.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
}
