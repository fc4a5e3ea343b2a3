package codec

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Func undoes one stage of a chunk's stored encoding (a compressor such as
// gzip, zstd or blosc, a checksum such as crc32c, or a filter such as
// delta).
//
// A Func appends the decoded form of src to dst[:0] (reusing dst's storage
// when it is large enough) and returns it. limit is the most bytes the
// output may hold, known from the metadata: a stream that would decode to
// more is refused with an error wrapping ErrCorrupt, and no decoder
// allocates more than limit plus a small constant, whatever sizes src
// claims. Input that does not decode is an error wrapping ErrCorrupt; an
// option the decoder does not implement (a blosc2 buffer, say) wraps
// ErrUnsupported. A Func is safe for concurrent use and never retains src
// or the result.
type Func func(dst, src []byte, limit int) ([]byte, error)

// Config is what the metadata says of one codec of a chain.
type Config struct {
	// Params is the codec's JSON object of parameters: a numcodecs
	// configuration ({"id": "delta", "dtype": "<i4"}) or a Zarr v3
	// codec's "configuration". Nil when the metadata gives none.
	Params json.RawMessage
	// Elem is the element type of the data the codec was given when the
	// chunk was encoded, as far as the format knows it (Size 0 when it
	// does not). Filters whose parameters leave it out take it from here
	// (numcodecs.shuffle's element size in Zarr v3, say).
	Elem DType
}

// unmarshal decodes cfg.Params, when the metadata gives any, into p,
// leaving p as it is otherwise.
func (cfg Config) unmarshal(p any) error {
	if len(cfg.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(cfg.Params, p); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// Stage is a codec configured for one chain: its decoder and what it does
// to sizes and element types.
type Stage struct {
	Decode Func
	// Name is the codec as shown to users, with the parameters that
	// matter: "zstd", "blosc(lz4, shuffle)", "delta(<i2 -> <i4)".
	Name string
	// Encoded and Decoded are the element types of the stage's input and
	// output when decoding. They differ only for filters that change
	// the type (astype, delta or fixedscaleoffset with an astype); for
	// byte codecs both are Config.Elem.
	Encoded, Decoded DType
	// InLimit returns the most bytes the stage's input may hold when its
	// output may hold at most out bytes: the limit of the stage before
	// it in decoding order.
	InLimit func(out int) int
}

// Factory builds the Stage of a codec from its configuration. A
// parameter that is missing or wrong is an error naming it; a value the
// decoder does not implement wraps ErrUnsupported.
type Factory func(cfg Config) (*Stage, error)

var codecs = struct {
	sync.RWMutex
	byName map[string]Factory // GUARDED_BY(RWMutex)
}{byName: make(map[string]Factory)}

// Register makes a codec available by name to every format, as
// archive/zip's RegisterDecompressor does for compression methods. Names
// are numcodecs' ids ("gzip", "zlib", "bz2", "zstd", "lz4", "lzma",
// "blosc", "delta", "crc32", ...) and Zarr v3's ("crc32c"); each format
// maps its own spellings onto them through the one table of Name. It
// panics if name is already registered.
func Register(name string, f Factory) {
	codecs.Lock()
	defer codecs.Unlock()
	if _, dup := codecs.byName[name]; dup {
		panic("codec: registered twice: " + name)
	}
	codecs.byName[name] = f
}

// registerCompressor registers a codec whose parameters do not matter to
// decoding (a compression level, say): its output is bounded by the next
// stage, its input by nothing it knows.
func registerCompressor(name string, c Func) {
	Register(name, func(cfg Config) (*Stage, error) {
		return &Stage{Decode: c, Name: name, Encoded: cfg.Elem, Decoded: cfg.Elem, InLimit: storedLimit}, nil
	})
}

// storedLimit bounds the stored form of out decoded bytes, as
// decode.Array.StoredLimit does: compression may expand incompressible
// data a little, never by twice.
func storedLimit(out int) int { return 2*out + 1<<20 }

// NewStage returns the stage of the codec registered under name, configured
// by cfg; a name that is not registered wraps ErrUnsupported.
func NewStage(name string, cfg Config) (*Stage, error) {
	codecs.RLock()
	f, ok := codecs.byName[name]
	codecs.RUnlock()
	switch {
	case !ok && isImagecodecs(name):
		return nil, unsupportedImagecodecs(name)
	case !ok:
		return nil, fmt.Errorf("codec %q: %w", name, ErrUnsupported)
	}
	s, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("codec %s: %w", name, err)
	}
	return s, nil
}

// Lookup returns the decoder of the codec called name with no
// parameters, or an error wrapping ErrUnsupported that names it.
func Lookup(name string) (Func, error) {
	s, err := NewStage(name, Config{})
	if err != nil {
		return nil, err
	}
	return s.Decode, nil
}
