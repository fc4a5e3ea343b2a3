// Package decode turns volume metadata into a format-neutral model of chunked
// arrays, and stored chunks into decoded bytes.
//
// A Volume is what one metadata file describes: a Neuroglancer precomputed
// layer ("info", one Array per scale), and later a Zarr array or an N5
// dataset. An Array is a regular chunk grid: its shape, chunk shape, element
// type, the name of every chunk key, the decoded size of every chunk, and a
// Decode function from stored bytes to the format's uncompressed layout.
//
// Nothing here does I/O: callers fetch metadata and chunk objects and hand
// the bytes in. Every function is safe for concurrent use; a Volume and its
// Arrays are immutable once parsed.
//
// # Errors
//
// Metadata that cannot be used is refused with a *MetadataError that names
// the file, the field and (for precomputed) the scale. A chunk that does not
// decode to exactly the size the metadata promises is refused with an error
// wrapping ErrCorrupt; a decoder never returns bytes of the wrong length.
package decode

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
)

// ErrCorrupt marks a chunk whose stored bytes do not decode to what the
// metadata promises: a bad header, a truncated stream, a wrong size.
var ErrCorrupt = errors.New("decode: corrupt chunk")

// ErrUnsupported marks metadata that is valid but names something volfs does
// not implement (an encoding, codec or data type).
var ErrUnsupported = errors.New("decode: unsupported")

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

// DType is an element type.
type DType struct {
	Name string // the metadata's own spelling, e.g. "uint16"
	Size int    // bytes per element
}

// Volume is the model of one metadata file.
type Volume struct {
	Format string // "precomputed"
	// Dir is the key of the directory that holds the metadata file, ""
	// for the source root.
	Dir string
	// MetaName is the metadata file's name inside Dir ("info").
	MetaName string
	// Original is the metadata file as stored; Rewritten describes the same
	// volume stored uncompressed, and is what the mount shows as MetaName.
	Original, Rewritten []byte
	// Arrays in metadata order; Array.Name is the path of each below Dir.
	Arrays []*Array
}

// Array is one regular chunk grid. Axes are in the order the format names
// them in its metadata and in its chunk keys (precomputed: x, y, z).
type Array struct {
	// Name is the array's directory relative to its Volume's Dir
	// (a precomputed scale key).
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
	// array's extent (precomputed) rather than at full chunk size (zarr).
	Clipped  bool
	Encoding string // codec chain as shown to users, e.g. "raw"
	// Resolution is the physical size of a voxel per axis, when the
	// format says (precomputed: nanometres).
	Resolution []float64

	keys   keyCodec
	decode func(stored []byte, size int) ([]byte, error)
}

// keyCodec names chunks: it maps grid coordinates to the chunk's key below
// the array directory and back. Parse accepts exactly the names that Name
// produces.
type keyCodec interface {
	name(a *Array, c []int64) string
	parse(a *Array, name string) ([]int64, bool)
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

// ChunkName returns the key of the chunk at grid coordinates c, relative to
// the array directory.
func (a *Array) ChunkName(c []int64) string { return a.keys.name(a, c) }

// ParseChunkName returns the grid coordinates of the chunk called name, and
// false when name is not the key of a chunk in the grid.
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

// ChunkSize returns the size in bytes of the decoded chunk at c.
func (a *Array) ChunkSize(c []int64) int64 {
	n := int64(a.DType.Size * a.Channels)
	for _, e := range a.Extent(c) {
		n *= e // bounded by the full chunk size, validated to fit
	}
	return n
}

// Decode turns the stored bytes of the chunk at c, with any transport
// encoding already removed, into its decoded bytes: exactly ChunkSize(c)
// bytes in the format's uncompressed layout. It never returns bytes of
// another length; a mismatch is an error wrapping ErrCorrupt.
func (a *Array) Decode(stored []byte, c []int64) ([]byte, error) {
	size := a.ChunkSize(c)
	out, err := a.decode(stored, int(size))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("%w: %s decoded to %d bytes, want %d", ErrCorrupt, a.Encoding, len(out), size)
	}
	return out, nil
}

// maxChunkBytes bounds the decoded size of one chunk: a chunk is decoded into
// memory whole, so metadata promising more is refused rather than trusted.
const maxChunkBytes = 1 << 31

// checkGrid validates the geometry of a and fills a.Grid. It reports the
// offending field by its metadata name via names (shape, chunk, offset).
func (a *Array) checkGrid(names [3]string) (field string, err error) {
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
