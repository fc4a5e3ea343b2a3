package view

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ErrUnsupported is wrapped by New for arrays the views cannot show (an
// unknown sample type, an array of fewer than two axes).
var ErrUnsupported = errors.New("view: unsupported array")

// ErrCorrupt is wrapped by ReadAt when a chunk's decoded bytes do not hold
// what its ChunkLayout promises (too short, bad strides), and when Chunks
// returns a batch of the wrong length or a fill value of the wrong size.
var ErrCorrupt = errors.New("view: corrupt chunk")

// SampleType is the type of one sample (one channel of one voxel).
type SampleType int

// The sample types. The zero value is invalid, so a Grid whose Type was
// forgotten is refused.
const (
	Uint8 SampleType = iota + 1
	Int8
	Uint16
	Int16
	Uint32
	Int32
	Float32
	Uint64
	Int64
	Float64
)

var sampleTypes = map[SampleType]struct {
	name   string
	size   int
	format uint16 // TIFF SampleFormat: 1 unsigned, 2 signed, 3 float
	nrrd   string
	met    string
}{
	Uint8:   {"uint8", 1, 1, "uint8", "MET_UCHAR"},
	Int8:    {"int8", 1, 2, "int8", "MET_CHAR"},
	Uint16:  {"uint16", 2, 1, "uint16", "MET_USHORT"},
	Int16:   {"int16", 2, 2, "int16", "MET_SHORT"},
	Uint32:  {"uint32", 4, 1, "uint32", "MET_UINT"},
	Int32:   {"int32", 4, 2, "int32", "MET_INT"},
	Float32: {"float32", 4, 3, "float", "MET_FLOAT"},
	Uint64:  {"uint64", 8, 1, "uint64", "MET_ULONG_LONG"},
	Int64:   {"int64", 8, 2, "int64", "MET_LONG_LONG"},
	Float64: {"float64", 8, 3, "double", "MET_DOUBLE"},
}

// String returns the numpy name of the type ("uint16"), or "SampleType(n)".
func (t SampleType) String() string {
	if s, ok := sampleTypes[t]; ok {
		return s.name
	}
	return fmt.Sprintf("SampleType(%d)", int(t))
}

// Size returns the bytes of one sample, 0 for an invalid type.
func (t SampleType) Size() int { return sampleTypes[t].size }

// ChunkLayout says where each element of one chunk lives in the chunk's
// decoded bytes. Element (i0, i1, ..., channel ch), with i counted from the
// chunk's origin in Grid axis order, starts at byte
//
//	Header + Σ Strides[k]*i[k] + ChannelStride*ch
//
// and occupies Type.Size() bytes in the Grid's byte order. Elements with
// i[k] >= Extent[k] on some axis are not stored and read as the fill value.
type ChunkLayout struct {
	Header        int64   // bytes before the first element (N5 block header)
	Strides       []int64 // bytes per step along each axis, Grid axis order, each >= 0
	ChannelStride int64   // bytes per channel step; ignored when Channels is 1
	Extent        []int64 // elements present along each axis
}

// Grid is an array as the views see it. Axes are listed fastest first: x,
// y, then z, then any further axes (for a zarr array of shape (t, c, z, y,
// x): Shape = {x, y, z, c, t}). A plane is the x-y image at one index of
// every axis after y.
type Grid struct {
	Shape []int64 // elements per axis, len >= 2, each >= 1
	Chunk []int64 // chunk size per axis (the grid pitch), each >= 1
	// Channels is the number of samples per voxel (precomputed
	// num_channels); 0 is read as 1.
	Channels int
	Type     SampleType
	// BigEndian is the byte order of the decoded chunk bytes and of Fill
	// (N5, zarr ">"). The views are little-endian and swap.
	BigEndian bool
	// Resolution is the voxel size per axis in nanometres; nil when
	// unknown (the views then write a spacing of 1 with no unit).
	Resolution []float64
	// Origin is the position of the first voxel (its centre) per axis,
	// in Resolution's unit (in voxels when Resolution is nil); nil is
	// 0 everywhere.
	Origin []float64
	// Unitless reports that Resolution and Origin are in a unit the
	// metadata does not name rather than nanometres: the headers then
	// give the spacing with no unit.
	Unitless bool
	// Axes name the axes and say what they hold (OME-Zarr), per axis;
	// nil when the metadata does not say. Names of the axes after y
	// name sections and slabs ("c1_z042.tif"); a channel axis after y
	// becomes ImageJ channels in volume.tif and the axes after it
	// frames. A name that is not a short lowercase word is ignored.
	Axes []Axis
}

// Axis is what the metadata says of one Grid axis.
type Axis struct {
	Name string // e.g. "z", "c", "t"; "" for the default name
	Role string // "space", "channel", "time", or "" when unknown (space)
}

// Chunk is one decoded chunk as Chunks.Get hands it to the views: its
// bytes, and where each element lives in them (e.g. after an N5 block
// header), which the views check against the bytes before they read.
type Chunk struct {
	Data   []byte // nil: a chunk the source does not have
	Layout ChunkLayout
}

// Chunks gives the views the decoded chunks of one array. The tree
// implements it over the chunk store; implementations must be safe for
// concurrent use.
type Chunks interface {
	// Get returns the chunks at the given grid coordinates (chunk
	// indices, Grid axis order), loaded as one batch, each with its
	// layout. The result has one entry per coordinate, in order; an entry
	// with nil Data is a chunk the source does not have, which reads as
	// the fill value. The views never modify the returned bytes. An error
	// (a corrupt chunk, one whose layout cannot be told, which should wrap
	// ErrCorrupt; a failed fetch; a cancelled ctx) fails the whole read and
	// is returned by ReadAt wrapped.
	Get(ctx context.Context, coords [][]int64) ([]Chunk, error)
	// Fill returns one sample's fill value in the Grid's byte order.
	Fill() []byte
}

// geom is a validated Grid with the numbers every view needs.
type geom struct {
	Grid
	ndim     int
	size     int64   // bytes per sample
	chans    int64   // channels, >= 1
	nchunks  []int64 // chunks per axis
	outer    int64   // planes per channel: product of Shape[2:]
	rowBytes int64   // X * size
	plane    int64   // bytes of one plane of one channel
	// chunkBytes is the decoded bytes of a full chunk, every channel,
	// capped at maxBytes.
	chunkBytes int64
	limit      int // the batch limit in chunks when > 0 (tests)
}

// maxBytes bounds every size the views compute so that no product
// overflows int64 (a view of 2^62 bytes is no real array).
const maxBytes = math.MaxInt64 / 4

func newGeom(g Grid) (*geom, error) {
	n := len(g.Shape)
	if n < 2 {
		return nil, fmt.Errorf("%w: %d axes, the views need at least 2", ErrUnsupported, n)
	}
	if len(g.Chunk) != n {
		return nil, fmt.Errorf("view: %d chunk sizes for %d axes", len(g.Chunk), n)
	}
	if g.Type.Size() == 0 {
		return nil, fmt.Errorf("%w: sample type %v", ErrUnsupported, g.Type)
	}
	if g.Resolution != nil && len(g.Resolution) != n {
		return nil, fmt.Errorf("view: %d resolutions for %d axes", len(g.Resolution), n)
	}
	for _, r := range g.Resolution {
		if !(r > 0) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("view: resolution %v is not a positive number", g.Resolution)
		}
	}
	if g.Origin != nil && len(g.Origin) != n {
		return nil, fmt.Errorf("view: %d origins for %d axes", len(g.Origin), n)
	}
	for _, o := range g.Origin {
		if math.IsNaN(o) || math.IsInf(o, 0) {
			return nil, fmt.Errorf("view: origin %v is not finite", g.Origin)
		}
	}
	if g.Axes != nil && len(g.Axes) != n {
		return nil, fmt.Errorf("view: %d axes described for %d axes", len(g.Axes), n)
	}
	if g.Channels < 0 {
		return nil, fmt.Errorf("view: %d channels", g.Channels)
	}
	m := &geom{Grid: g, ndim: n, size: int64(g.Type.Size()), chans: max(int64(g.Channels), 1)}
	total := m.size * m.chans
	m.outer = 1
	for i := range n {
		if g.Shape[i] < 1 || g.Chunk[i] < 1 {
			return nil, fmt.Errorf("view: shape %v, chunk %v: sizes must be positive", g.Shape, g.Chunk)
		}
		if total > maxBytes/g.Shape[i] {
			return nil, fmt.Errorf("view: shape %v is too large", g.Shape)
		}
		total *= g.Shape[i]
		m.nchunks = append(m.nchunks, (g.Shape[i]+g.Chunk[i]-1)/g.Chunk[i])
		if i >= 2 {
			m.outer *= g.Shape[i]
		}
	}
	m.chunkBytes = m.size * m.chans
	for _, c := range g.Chunk {
		if m.chunkBytes > maxBytes/c {
			m.chunkBytes = maxBytes
			break
		}
		m.chunkBytes *= c
	}
	m.rowBytes = g.Shape[0] * m.size
	m.plane = m.rowBytes * g.Shape[1]
	return m, nil
}

// outerIndex writes into o (len ndim-2) the indices of axes 2.. of plane
// number p, counted with axis 2 fastest.
func (m *geom) outerIndex(p int64, o []int64) {
	for i := range o {
		s := m.Shape[i+2]
		o[i] = p % s
		p /= s
	}
}
