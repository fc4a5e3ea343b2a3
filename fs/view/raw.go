package view

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// rawFile is a planes sequence as a file of its own (volume.raw, a slab).
type rawFile struct {
	name   string
	chunks Chunks
	pix    *planes
}

func (f *rawFile) Name() string { return f.name }
func (f *rawFile) Size() int64  { return f.pix.size() }

// ReadAt reads bytes [off, off+len(p)) from the chunks under them, fetched
// as one batch.
func (f *rawFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return readParts(ctx, p, off, f.Size(), func(ctx context.Context, p []byte, off int64) error {
		return f.pix.readAt(ctx, f.chunks, p, off)
	})
}

func (f *rawFile) chunksAt(off, n int64, limit int) [][]int64 {
	return f.pix.chunksAt(off, n, limit)
}

// textFile is a small header generated in memory (.nhdr, .mhd).
type textFile struct {
	name string
	text []byte
}

func (f *textFile) Name() string { return f.name }
func (f *textFile) Size() int64  { return int64(len(f.text)) }

// ReadAt copies out of the header text; it never blocks.
func (f *textFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return readParts(ctx, p, off, f.Size(), func(_ context.Context, p []byte, off int64) error {
		copy(p, f.text[off:])
		return nil
	})
}

// rawHeader describes a raw file of the given sizes per Grid axis (x
// first; a z range for a slab) with channels slowest, and origin z0 on
// axis 2.
type rawHeader struct {
	m     *geom
	data  string  // the raw file's name, relative to the header
	sizes []int64 // per Grid axis
	z0    int64
}

// axes returns the sizes of the raw file's axes, x fastest, channel last
// when there is more than one, and each axis' spacing (nanometres, 1
// when unknown; 1 for the channel axis).
func (h rawHeader) axes() (sizes []int64, spacing []float64) {
	for i, s := range h.sizes {
		sizes = append(sizes, s)
		sp := 1.0
		if h.m.Resolution != nil {
			sp = h.m.Resolution[i]
		}
		spacing = append(spacing, sp)
	}
	if h.m.chans > 1 {
		sizes = append(sizes, h.m.chans)
		spacing = append(spacing, 1)
	}
	return sizes, spacing
}

// origin returns the position of the raw file's first sample along Grid
// axis i: the Grid's origin, plus the slab's first z times the z spacing
// on axis 2.
func (h rawHeader) origin(i int, spacing float64) float64 {
	o := 0.0
	if h.m.Origin != nil {
		o = h.m.Origin[i]
	}
	if i == 2 {
		o += float64(h.z0) * spacing
	}
	return o
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, " ")
}

// nrrd returns a detached NRRD header (format NRRD0004). The first
// min(3, axes) Grid axes are the space axes, with spacing and units (nm;
// none when Unitless) in "space directions" and "space units" and the
// first sample's position in "space origin"; further axes and the
// channel axis are "list" axes.
func (h rawHeader) nrrd() []byte {
	sizes, spacing := h.axes()
	nspace := min(3, len(h.sizes))
	var b strings.Builder
	b.WriteString("NRRD0004\n")
	b.WriteString("# written by volfs: little-endian samples, x fastest\n")
	fmt.Fprintf(&b, "type: %s\n", sampleTypes[h.m.Type].nrrd)
	fmt.Fprintf(&b, "dimension: %d\n", len(sizes))
	fmt.Fprintf(&b, "sizes: %s\n", joinInts(sizes))
	kinds := make([]string, len(sizes))
	dirs := make([]string, len(sizes))
	for i := range sizes {
		if i >= nspace {
			kinds[i], dirs[i] = "list", "none"
			continue
		}
		kinds[i] = "domain"
		v := make([]string, nspace)
		for j := range v {
			v[j] = "0"
		}
		v[i] = fmtFloat(spacing[i])
		dirs[i] = "(" + strings.Join(v, ",") + ")"
	}
	fmt.Fprintf(&b, "kinds: %s\n", strings.Join(kinds, " "))
	if h.m.size > 1 {
		b.WriteString("endian: little\n")
	}
	b.WriteString("encoding: raw\n")
	fmt.Fprintf(&b, "space dimension: %d\n", nspace)
	fmt.Fprintf(&b, "space directions: %s\n", strings.Join(dirs, " "))
	if h.m.Resolution != nil && !h.m.Unitless {
		b.WriteString("space units:" + strings.Repeat(` "nm"`, nspace) + "\n")
	}
	origin := make([]string, nspace)
	for i := range origin {
		origin[i] = fmtFloat(h.origin(i, spacing[i]))
	}
	fmt.Fprintf(&b, "space origin: (%s)\n", strings.Join(origin, ","))
	fmt.Fprintf(&b, "data file: %s\n", h.data)
	return []byte(b.String())
}

// mhd returns a MetaImage header. MetaImage has no unit: spacing and
// offset (the first sample's position) are in nanometres (3D Slicer and
// ITK read them as millimetres). A multi-channel array is one more dimension, the slowest, since the raw
// layout keeps channels apart rather than interleaved.
func (h rawHeader) mhd() []byte {
	sizes, spacing := h.axes()
	sp := make([]string, len(spacing))
	off := make([]string, len(spacing))
	for i, s := range spacing {
		sp[i], off[i] = fmtFloat(s), "0"
		if i < len(h.sizes) {
			off[i] = fmtFloat(h.origin(i, s))
		}
	}
	var b strings.Builder
	b.WriteString("ObjectType = Image\n")
	fmt.Fprintf(&b, "NDims = %d\n", len(sizes))
	b.WriteString("BinaryData = True\n")
	b.WriteString("BinaryDataByteOrderMSB = False\n")
	b.WriteString("CompressedData = False\n")
	fmt.Fprintf(&b, "DimSize = %s\n", joinInts(sizes))
	fmt.Fprintf(&b, "ElementSpacing = %s\n", strings.Join(sp, " "))
	fmt.Fprintf(&b, "Offset = %s\n", strings.Join(off, " "))
	fmt.Fprintf(&b, "ElementType = %s\n", sampleTypes[h.m.Type].met)
	fmt.Fprintf(&b, "ElementDataFile = %s\n", h.data)
	return []byte(b.String())
}
