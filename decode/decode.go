// Package decode turns volume metadata into a format-neutral model of chunked
// arrays, and stored chunks into decoded bytes.
//
// A Volume is what one metadata file describes: a Neuroglancer precomputed
// layer ("info", one Array per scale), a Zarr v2 or v3 array (".zarray",
// "zarr.json"), an N5 dataset ("attributes.json"), or a file of group
// metadata that only needs rewriting (Zarr v2 ".zmetadata"). Each format
// registers itself (RegisterFormat) with the name of its metadata file and
// a parser; callers probe only the names the registry lists and never
// switch on format names.
//
// An Array is a regular chunk grid: its shape, chunk shape, element type,
// the key of every chunk (a tree of path elements: precomputed
// "0-64_0-64_0-64", zarr "0.0.0" or "c/0/0/0", N5 "0/0/0"), the decoded size
// of every chunk, its fill value, and a Load step from the source to the
// chunk's bytes in the format's uncompressed layout (what the format itself
// would store with no compression).
//
// The codecs a chunk's stored bytes pass through (compressors, checksums,
// numcodecs filters, the precomputed image and segmentation encodings) are
// in package decode/codec, with their registry and the one table of the
// names each format gives them; the formats here only chain them.
//
// Nothing here does I/O of its own: loads read through the Source they are
// given. Every function is safe for concurrent use; a Volume and its Arrays
// are immutable once parsed.
//
// # Errors
//
// Metadata that cannot be used is refused with a *MetadataError that names
// the file, the field and (for precomputed) the scale. A chunk that does not
// decode to exactly the size the metadata promises is refused with an error
// wrapping ErrCorrupt; a decoder never returns bytes of the wrong length.
package decode

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
	"path"
	"reflect"
	"slices"

	"github.com/volfs/volfs/decode/codec"
	"github.com/volfs/volfs/internal/mem"
)

// ErrCorrupt marks a chunk whose stored bytes do not decode to what the
// metadata promises: a bad header, a truncated stream, a wrong size. It is
// codec.ErrCorrupt, the one sentinel of the formats and the codecs.
var ErrCorrupt = codec.ErrCorrupt

// ErrUnsupported marks metadata that is valid but names something volfs does
// not implement (an encoding, codec or data type). It is
// codec.ErrUnsupported.
var ErrUnsupported = codec.ErrUnsupported

// MetadataError is a refusal of a metadata file. Its message names the file,
// where in it the problem is (Field, with the scale or array in front where
// there is one) and why.
type MetadataError struct {
	File  string // key of the metadata object, e.g. "image/info"
	Field string // e.g. `scales[1] (key "16_16_16"): chunk_sizes`
	Err   error
}

func (e *MetadataError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("decode: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("decode: %s: %s: %v", e.File, e.Field, e.Err)
}

func (e *MetadataError) Unwrap() error { return e.Err }

// DType is an element type, shared with the codecs that convert elements
// (codec.DType).
type DType = codec.DType

// Volume is the model of one metadata file.
type Volume struct {
	Format string // the registered format name, e.g. "precomputed", "zarr2"
	// Dir is the key of the directory that holds the metadata file, ""
	// for the source root.
	Dir string
	// MetaName is the metadata file's name inside Dir ("info", ".zarray").
	MetaName string
	// Original is the metadata file as stored; Rewritten describes the same
	// volume stored uncompressed, and is what the mount shows as MetaName.
	Original, Rewritten []byte
	// Arrays in metadata order; Array.Name is the path of each below Dir,
	// "" for an array that is Dir itself (zarr, N5).
	Arrays []*Array
	// Skipped are the arrays the metadata names that volfs cannot decode
	// (an unsupported encoding, codec or data type). They are left out of
	// Arrays and of Rewritten; their directories pass through undecoded.
	Skipped []Skipped
}

// Skipped is an array of a volume that is not decoded, and why.
type Skipped struct {
	Name string // as Array.Name
	Err  error  // a *MetadataError wrapping ErrUnsupported
}

// Format is an entry of the format registry: the name of the metadata file
// that marks a directory as holding one of its volumes, and its parser.
type Format struct {
	Name string // e.g. "zarr3"; what a URL prefix such as "zarr3://" pins
	// Meta is the metadata file's name, e.g. "zarr.json".
	Meta string
	// Parse parses the metadata file of the directory dir (a source-relative
	// key, "" for the root). It returns nil and no error when the file is
	// not volume metadata of this format (a Zarr group, an "info" of
	// something else), so that the directory passes through. Any problem
	// with metadata meant for this format is a *MetadataError.
	Parse func(dir string, meta []byte) (*Volume, error)
}

var formats []Format // in probe order; written only by init functions

// RegisterFormat adds a format to the registry. Formats registered first
// are probed first: a directory holding two kinds of metadata shows the
// first. It must be called from an init function.
func RegisterFormat(f Format) { formats = append(formats, f) }

// Formats returns the registered formats in probe order.
func Formats() []Format { return formats }

// Array is one regular chunk grid. Axes are in the order the format names
// them in its metadata and in its chunk keys (precomputed: x, y, z; zarr:
// slowest first; N5: fastest first).
type Array struct {
	// Name is the array's directory relative to its Volume's Dir
	// (a precomputed scale key), "" when the array is Dir itself.
	Name string
	// Key is the array's directory relative to the source root.
	Key      string
	DType    DType
	Channels int     // elements per voxel stored as a separate channel axis (precomputed); 1 elsewhere
	Shape    []int64 // voxels per axis
	Offset   []int64 // coordinate of the first voxel per axis (precomputed voxel_offset; zeros elsewhere)
	Chunk    []int64 // voxels per chunk per axis
	Grid     []int64 // chunks per axis: ceil(Shape/Chunk)
	// Clipped reports whether edge chunks are stored clipped to the
	// array's extent (precomputed, N5) rather than at full chunk size (zarr).
	Clipped bool
	// FirstFastest reports whether the first axis varies fastest in a
	// decoded chunk (precomputed, N5, zarr order "F"); otherwise the last
	// does (zarr order "C").
	FirstFastest bool
	// XLast reports that the metadata names the axes slowest first, so
	// that the last axis is x (zarr, in either storage order); otherwise
	// the first axis is x (precomputed, N5).
	XLast bool
	// Encoding is the codec chain as stored, as shown to users, e.g.
	// "raw", "gzip", "blosc(lz4, shuffle) | crc32c".
	Encoding string
	// Fill is one element's fill value in the decoded layout (the value
	// of every element of a missing chunk); nil means zeros.
	Fill []byte
	// Resolution is the physical size of a voxel per axis, in
	// nanometres, when the format says (precomputed resolution,
	// OME-Zarr scale).
	Resolution []float64
	// Origin is the position of voxel 0 (its centre) per axis, in
	// Resolution's unit, when the metadata gives one (OME-Zarr
	// translation); nil means Offset times Resolution.
	Origin []float64
	// Unitless reports that Resolution and Origin are in a unit the
	// metadata does not name (OME-Zarr space axes without "unit"),
	// not nanometres.
	Unitless bool
	// Axes names each axis, in metadata order, when the metadata does
	// (OME-Zarr); nil otherwise.
	Axes []Axis
	// OME is the OME-Zarr image whose level OMELevel the array is, nil
	// for an array that is not a level of one.
	OME      *OMEImage
	OMELevel int
	// Describe holds format-specific facts for `volfs info`, as
	// name/value pairs in display order (e.g. "order", "C").
	Describe [][2]string

	keys keyTree
	// recipe is the array's recipe fingerprint (Recipe), set once by
	// its format's parser (setRecipe).
	recipe string
	// decoding is recipe without the array's shape (Appended).
	decoding string
	// gridPlaced reports that a chunk's place in its container depends
	// on the grid's size (precomputed's compressed Morton code).
	gridPlaced bool
	// storedExtra is added to the stored-size bound of every chunk: what a
	// container stores besides compressed data (a shard index).
	storedExtra int64
	// widen is the number of stored bytes, before compression, that
	// hold one decoded byte when filters store elements wider than the
	// array's (numcodecs astype to a wider encode_dtype, say); 0 or 1
	// when they do not.
	widen int64
	// verbatim is set by the parsers when the codec chain is empty
	// (Verbatim).
	verbatim bool
	// header returns the bytes that precede the elements of the decoded
	// chunk at c (an N5 block header), or nil.
	header func(c []int64) []byte
	// decode turns the stored bytes of the chunk at c into its decoded
	// bytes, appending to dst[:0]; size is ChunkSize(c).
	decode func(dst, stored []byte, c []int64, size int) ([]byte, error)
	// load, when set, replaces fetching the chunk's own object (a chunk
	// inside a precomputed shard). It returns the chunk's stored bytes.
	load func(ctx context.Context, src Source, c []int64, limit int64) ([]byte, error)
}

// NumChunks returns the number of chunks in the grid.
func (a *Array) NumChunks() int64 {
	n := int64(1)
	for _, g := range a.Grid {
		n *= g // validated not to overflow when the array was built
	}
	return n
}

// Coords returns the grid coordinates of the i-th chunk in key order (first
// axis fastest), for 0 <= i < NumChunks.
func (a *Array) Coords(i int64) []int64 {
	c := make([]int64, len(a.Grid))
	for d, g := range a.Grid {
		c[d] = i % g
		i /= g
	}
	return c
}

// Index returns the position of the chunk at c in Coords order.
func (a *Array) Index(c []int64) int64 {
	i := int64(0)
	for d := len(a.Grid) - 1; d >= 0; d-- {
		i = i*a.Grid[d] + c[d]
	}
	return i
}

// ChunkName returns the key of the chunk at grid coordinates c, relative to
// the array directory; it may hold slashes (nested zarr and N5 keys).
func (a *Array) ChunkName(c []int64) string { return a.keys.name(a, c) }

// ParseChunkName returns the grid coordinates of the chunk called name, and
// false when name is not the key of a chunk in the grid. It accepts exactly
// the names that ChunkName produces.
func (a *Array) ParseChunkName(name string) ([]int64, bool) { return a.keys.parse(a, name) }

// ChunkKey returns the key of the chunk at c relative to the source root.
func (a *Array) ChunkKey(c []int64) string { return path.Join(a.Key, a.ChunkName(c)) }

// Extent returns the number of voxels per axis that the chunk at c holds in
// its decoded form: clipped at the array's edge when a.Clipped, the full
// chunk shape otherwise.
func (a *Array) Extent(c []int64) []int64 {
	e := make([]int64, len(a.Chunk))
	for d := range a.Chunk {
		e[d] = a.Chunk[d]
		if a.Clipped {
			e[d] = min(a.Chunk[d], a.Shape[d]-c[d]*a.Chunk[d])
		}
	}
	return e
}

// HeaderSize returns the size of the bytes that precede the elements in the
// decoded chunk at c (an N5 block header), 0 for most formats.
func (a *Array) HeaderSize(c []int64) int64 {
	if a.header == nil {
		return 0
	}
	return int64(len(a.header(c)))
}

// ChunkSize returns the size in bytes of the decoded chunk at c.
func (a *Array) ChunkSize(c []int64) int64 {
	n := int64(a.DType.Size * a.Channels)
	for _, e := range a.Extent(c) {
		n *= e // bounded by the full chunk size, validated to fit
	}
	return a.HeaderSize(c) + n
}

// Strides returns the distance in bytes between neighbouring elements along
// each axis in the decoded chunk at c, after HeaderSize(c) bytes of header,
// and the distance between channels (precomputed stores channel slowest).
func (a *Array) Strides(c []int64) (axes []int64, channel int64) {
	e := a.Extent(c)
	axes = make([]int64, len(e))
	n := int64(a.DType.Size)
	for k := range e {
		d := k
		if !a.FirstFastest {
			d = len(e) - 1 - k
		}
		axes[d] = n
		n *= e[d]
	}
	return axes, n
}

// FillChunk returns the decoded bytes of a chunk at c that the source does
// not have: its header, then the fill value in every element.
func (a *Array) FillChunk(c []int64) []byte {
	out := make([]byte, a.ChunkSize(c))
	h := 0
	if a.header != nil {
		h = copy(out, a.header(c))
	}
	fillElements(out[h:], a.Fill)
	return out
}

// FillIsZero reports whether missing chunks hold only zero bytes after
// their header.
func (a *Array) FillIsZero() bool {
	for _, b := range a.Fill {
		if b != 0 {
			return false
		}
	}
	return true
}

// fillElements fills dst with copies of the element fill; nil fills zeros.
func fillElements(dst, fill []byte) {
	if len(fill) == 0 {
		clear(dst)
		return
	}
	if len(dst) == 0 {
		return
	}
	n := copy(dst, fill)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}

// Decode turns the stored bytes of the chunk at c, with any transport
// encoding already removed, into its decoded bytes: exactly ChunkSize(c)
// bytes in the format's uncompressed layout. It never returns bytes of
// another length; a mismatch is an error wrapping ErrCorrupt.
func (a *Array) Decode(stored []byte, c []int64) ([]byte, error) {
	return a.decodeInto(nil, stored, c)
}

func (a *Array) decodeInto(dst, stored []byte, c []int64) ([]byte, error) {
	size := a.ChunkSize(c)
	out, err := a.decode(dst, stored, c, int(size))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("%w: %s decoded to %d bytes, want %d", ErrCorrupt, a.Encoding, len(out), size)
	}
	return out, nil
}

// StoredLimit bounds the stored size of the chunk at c: a compressed chunk
// stores less than its decoded size (times widen, for filters that widen
// elements), so twice that plus slack bounds any honest object, while a
// hostile one cannot make a reader buffer more.
func (a *Array) StoredLimit(c []int64) int64 {
	return 2*max(a.widen, 1)*a.ChunkSize(c) + 1<<20 + a.storedExtra
}

// Load reads the chunk at c through src and decodes it: exactly
// ChunkSize(c) bytes, or an error. A chunk the source does not have is the
// source's not-found error (wrapped) or an error wrapping ErrMissing; a
// chunk that does not decode wraps ErrCorrupt. Errors do not name the
// object: the caller does.
func (a *Array) Load(ctx context.Context, src Source, c []int64) ([]byte, error) {
	stored, err := a.Fetch(ctx, src, c)
	if err != nil {
		return nil, err
	}
	return a.DecodeFrom(src, stored, c)
}

// Fetch is the first half of Load: it reads the stored bytes of the chunk
// at c through src (for a sharded array, the chunk's part of its shard),
// for DecodeFrom. A caller that splits Load does so to treat the two
// halves differently (DecodeFrom is bound by CPU, Fetch mostly by I/O).
func (a *Array) Fetch(ctx context.Context, src Source, c []int64) ([]byte, error) {
	limit := a.StoredLimit(c)
	if a.load != nil {
		return a.load(ctx, src, c, limit)
	}
	return src.Get(ctx, a.ChunkKey(c), limit)
}

// DecodeFrom is the second half of Load: it decodes stored, which Fetch
// read through src for the chunk at c, as Decode does, then gives stored
// back to src (Release) unless the decoded chunk shares its memory.
func (a *Array) DecodeFrom(src Source, stored []byte, c []int64) ([]byte, error) {
	out, _, err := a.DecodeOwned(src, stored, c)
	return out, err
}

// DecodeOwned is DecodeFrom for a caller that keeps the decoded chunk and
// would give its memory back for reuse once nothing refers to it.
// recycle, when not nil, does that (internal/mem's pool, or src's
// Release), and may be called once, after the last use of out. It is not
// nil only when out is memory nobody else refers to: a buffer of the pool
// this call took and the codec decoded into, or, for an array whose chunks
// are their own objects (OwnObject), the stored bytes themselves (a raw
// chunk), which Fetch's contract makes the load's alone.
//
// The buffer is taken before decoding only where a codec decodes into
// one: a raw chunk (Verbatim's codecs) is its stored bytes.
func (a *Array) DecodeOwned(src Source, stored []byte, c []int64) (out []byte, recycle func(), err error) {
	var dst []byte
	if !a.verbatim || a.header != nil || a.widen > 1 {
		dst = mem.Get(int(a.ChunkSize(c)))
	}
	out, err = a.decodeInto(dst, stored, c)
	switch {
	case err != nil:
	case dst != nil && mem.SameStart(out, dst):
		recycle = func() { mem.Put(dst) }
	case a.load == nil && mem.SameStart(out, stored):
		recycle = func() { src.Release(stored) }
	}
	if dst != nil && recycle == nil && (err != nil || !mem.Overlap(out, dst)) {
		mem.Put(dst) // the codec decoded elsewhere
	}
	if a.load == nil && (err != nil || !mem.Overlap(out, stored)) {
		src.Release(stored)
	}
	return out, recycle, err
}

// MaxAxes is the most axes an array may have, as in tensorstore (kMaxRank)
// and numpy 1.x: much of the work on an array's keys and layouts is
// linear in its axes per chunk, so a metadata file of tens of thousands of
// axes (a few hundred KB) would make listing it quadratic.
const MaxAxes = 32

// maxChunkBytes bounds the decoded size of one chunk (codec.MaxChunkBytes).
const maxChunkBytes = codec.MaxChunkBytes

// checkGrid validates the geometry of a and fills a.Grid. It reports the
// offending field by its metadata name via names (shape, chunk, offset).
func (a *Array) checkGrid(names [3]string) (field string, err error) {
	if len(a.Shape) == 0 {
		return names[0], fmt.Errorf("0-dimensional arrays are not supported: %w", ErrUnsupported)
	}
	if len(a.Shape) > MaxAxes {
		return names[0], fmt.Errorf("%d axes, more than the %d volfs reads: %w", len(a.Shape), MaxAxes, ErrUnsupported)
	}
	if len(a.Chunk) != len(a.Shape) {
		return names[1], fmt.Errorf("has %d axes, the shape %d", len(a.Chunk), len(a.Shape))
	}
	if a.Offset == nil {
		a.Offset = make([]int64, len(a.Shape))
	}
	a.Grid = make([]int64, len(a.Shape))
	total, chunk, count := uint64(a.DType.Size*a.Channels), uint64(a.DType.Size*a.Channels), uint64(1)
	for d := range a.Shape {
		if a.Shape[d] <= 0 {
			return names[0], fmt.Errorf("must be positive, got %v", a.Shape)
		}
		if a.Chunk[d] <= 0 {
			return names[1], fmt.Errorf("must be positive, got %v", a.Chunk)
		}
		if a.Offset[d] > math.MaxInt64-a.Shape[d] {
			return names[2], fmt.Errorf("offset %d plus size %d overflows", a.Offset[d], a.Shape[d])
		}
		a.Grid[d] = (a.Shape[d]-1)/a.Chunk[d] + 1
		// The last chunk's upper bound, grid*chunk, must be representable:
		// keys and extents are computed from it.
		if hi, lo := bits.Mul64(uint64(a.Grid[d]), uint64(a.Chunk[d])); hi != 0 || lo > math.MaxInt64 || a.Offset[d] > math.MaxInt64-int64(lo) {
			return names[1], fmt.Errorf("the last chunk's end on axis %d overflows 64 bits", d)
		}
		var hi uint64
		if hi, total = bits.Mul64(total, uint64(a.Shape[d])); hi != 0 || total > math.MaxInt64 {
			return names[0], fmt.Errorf("%v voxels of %d bytes overflow 64 bits", a.Shape, a.DType.Size*a.Channels)
		}
		if hi, count = bits.Mul64(count, uint64(a.Grid[d])); hi != 0 || count > math.MaxInt64 {
			return names[1], fmt.Errorf("chunk count overflows 64 bits")
		}
		if hi, chunk = bits.Mul64(chunk, uint64(a.Chunk[d])); hi != 0 || chunk > maxChunkBytes {
			return names[1], fmt.Errorf("a chunk of %v would decode to more than %d bytes", a.Chunk, maxChunkBytes)
		}
		// The last chunk's key ends at offset + grid*chunk, past the
		// volume's end; it must still be an int64.
		if hi, span := bits.Mul64(uint64(a.Grid[d]), uint64(a.Chunk[d])); hi != 0 || span > math.MaxInt64 ||
			a.Offset[d] > 0 && int64(span) > math.MaxInt64-a.Offset[d] {
			return names[1], fmt.Errorf("the chunk grid of %v at offset %v ends past 2^63", a.Chunk, a.Offset)
		}
	}
	return "", nil
}

// SameChunks reports whether two arrays, parsed from two metadata files of
// one directory, name the same chunk files and decode them to the same
// bytes: the same keys, grid, element type and byte order, axis order and
// fill. Both metadata files then describe what the mount serves.
func SameChunks(a, b *Array) bool {
	fill := func(x *Array) []byte {
		if len(x.Fill) == 0 {
			return make([]byte, x.DType.Size)
		}
		return x.Fill
	}
	return a.Key == b.Key && a.Name == b.Name && slices.Equal(a.Shape, b.Shape) && slices.Equal(a.Chunk, b.Chunk) &&
		slices.Equal(a.Offset, b.Offset) && a.Channels == b.Channels && a.Clipped == b.Clipped &&
		a.FirstFastest == b.FirstFastest && a.DType.Size == b.DType.Size && a.DType.Kind == b.DType.Kind &&
		a.DType.BigEndian == b.DType.BigEndian && a.header == nil && b.header == nil &&
		bytes.Equal(fill(a), fill(b)) &&
		reflect.DeepEqual(a.keys, b.keys)
}
