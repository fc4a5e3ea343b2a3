package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// TIFF tags and field types used by the views.
const (
	tagImageWidth      = 256
	tagImageLength     = 257
	tagBitsPerSample   = 258
	tagCompression     = 259
	tagPhotometric     = 262
	tagImageDesc       = 270
	tagStripOffsets    = 273
	tagSamplesPerPixel = 277
	tagRowsPerStrip    = 278
	tagStripByteCounts = 279
	tagXResolution     = 282
	tagYResolution     = 283
	tagPlanarConfig    = 284
	tagResolutionUnit  = 296
	tagSampleFormat    = 339

	typeASCII    = 2
	typeShort    = 3
	typeLong     = 4
	typeRational = 5
	typeLong8    = 16
)

// maxStripBytes caps a strip: a strip is one chunk row band (RowsPerStrip
// = the chunk's height) unless that band is wider than this, so that a
// reader that loads a whole strip at once (libtiff, ImageJ) never needs
// more than this in one piece.
const maxStripBytes = 8 << 20

// classicLimit is the largest offset a classic TIFF can hold.
const classicLimit = math.MaxUint32

// tiffFile is a TIFF of single-sample pages over a planes sequence; see the
// package comment for the layout.
type tiffFile struct {
	name   string
	chunks Chunks
	pix    *planes
	big    bool
	desc   []byte // ImageDescription with its NUL, in page 0
	descAt int64

	rowsPerStrip, nStrips int64
	xres, yres            [2]uint32
	resUnit               uint16

	ifdAt      int64 // offset of page 0's block; blocks follow back to back
	block0     int64 // bytes of page 0's block (it alone has the description)
	block      int64 // bytes of every other page's block
	dataAt     int64
	size       int64
	nEntries   int64 // entries of every IFD but page 0's
	stripArray bool  // strip offsets and counts out of line
}

func newTIFF(name string, chunks Chunks, pix *planes, desc string, forceBig bool) *tiffFile {
	m := pix.m
	t := &tiffFile{name: name, chunks: chunks, pix: pix, desc: append([]byte(desc), 0)}
	t.rowsPerStrip = min(m.Chunk[1], m.Shape[1], max(1, maxStripBytes/m.rowBytes))
	t.nStrips = (m.Shape[1] + t.rowsPerStrip - 1) / t.rowsPerStrip
	t.resUnit = 1
	t.xres, t.yres = [2]uint32{1, 1}, [2]uint32{1, 1}
	switch {
	case m.Resolution != nil && m.Unitless: // pixels per (unnamed) unit
		t.xres = rational(1 / m.Resolution[0])
		t.yres = rational(1 / m.Resolution[1])
	case m.Resolution != nil:
		t.resUnit = 3 // centimetre
		t.xres = rational(1e7 / m.Resolution[0])
		t.yres = rational(1e7 / m.Resolution[1])
	}
	t.layout(forceBig)
	if !t.big && t.size > classicLimit {
		t.layout(true)
	}
	return t
}

// layout computes the offsets for classic TIFF or BigTIFF.
func (t *tiffFile) layout(big bool) {
	t.big = big
	hdr, entry, countBytes, offBytes := int64(8), int64(12), int64(2), int64(4)
	if big {
		hdr, entry, countBytes, offBytes = 16, 20, 8, 8
	}
	t.descAt = hdr
	t.ifdAt = even(hdr + int64(len(t.desc)))
	t.nEntries = 14
	t.stripArray = t.nStrips > 1
	extra := int64(0)
	if t.stripArray {
		extra += 2 * t.nStrips * offBytes
	}
	if !big {
		extra += 16 // the two resolution rationals
	}
	t.block = countBytes + t.nEntries*entry + offBytes + extra
	t.block0 = t.block + entry
	t.dataAt = t.ifdAt + t.block0 + (t.pix.n-1)*t.block
	t.size = t.dataAt + t.pix.size()
}

func even(n int64) int64 { return n + n&1 }

// rational approximates v > 0 as a TIFF RATIONAL: v of at least 1 with a
// power of ten as denominator; a smaller v (the pixels per unit of a
// voxel larger than the unit) as the inverse of 1/v's rational, so that
// it too keeps about seven significant digits and is never 0.
func rational(v float64) [2]uint32 {
	if v < 1 {
		r := rational(1 / v)
		return [2]uint32{r[1], r[0]}
	}
	if v >= classicLimit {
		return [2]uint32{classicLimit, 1}
	}
	den := 1.0
	for den < 1e6 && v*den*10 < classicLimit {
		den *= 10
	}
	return [2]uint32{uint32(math.Round(v * den)), uint32(den)}
}

func (t *tiffFile) Name() string { return t.name }
func (t *tiffFile) Size() int64  { return t.size }

// blockSize returns the bytes of page's block.
func (t *tiffFile) blockSize(page int64) int64 {
	if page == 0 {
		return t.block0
	}
	return t.block
}

func (t *tiffFile) blockAt(page int64) int64 {
	if page == 0 {
		return t.ifdAt
	}
	return t.ifdAt + t.block0 + (page-1)*t.block
}

// header returns the bytes before the first IFD: the file header and the
// description.
func (t *tiffFile) header() []byte {
	h := make([]byte, t.ifdAt)
	le := binary.LittleEndian
	h[0], h[1] = 'I', 'I'
	if t.big {
		le.PutUint16(h[2:], 43)
		le.PutUint16(h[4:], 8)
		le.PutUint64(h[8:], uint64(t.ifdAt))
	} else {
		le.PutUint16(h[2:], 42)
		le.PutUint32(h[4:], uint32(t.ifdAt))
	}
	copy(h[t.descAt:], t.desc)
	return h
}

// span is a part of one page's IFD block, at byte at of the block: either
// literal bytes, or an array of n offsets (classic TIFF: 4 bytes each,
// BigTIFF: 8) whose element k is gen(k), generated only where a read
// asks for it. The strip arrays are spans of the second kind, so that a
// read of a few bytes of a header costs a few bytes of work, however many
// strips the array has (a plane of 2^26 one-row strips has 1 GiB of them).
type span struct {
	at  int64
	lit []byte
	n   int64
	gen func(k int64) int64
}

// ifd describes the block of one page: its IFD, then the arrays and values
// that do not fit in an entry, as spans laid back to back from byte 0.
// Its cost is that of the IFD's few entries, never of the strip arrays.
func (t *tiffFile) ifd(page int64) []span {
	m := t.pix.m
	at := t.blockAt(page)
	entries := t.nEntries
	if page == 0 {
		entries = t.nEntries + 1
	}
	le := binary.LittleEndian
	entry, countBytes, offBytes := 12, 2, 4
	if t.big {
		entry, countBytes, offBytes = 20, 8, 8
	}
	head := make([]byte, countBytes+int(entries)*entry+offBytes)
	spans := []span{{at: 0, lit: head}}
	if t.big {
		le.PutUint64(head, uint64(entries))
	} else {
		le.PutUint16(head, uint16(entries))
	}
	extra := int64(len(head)) // where out-of-line values go
	i := 0
	// put writes one entry; value is called with the entry's value field
	// when the value fits there, else out-of-line space of vbytes is
	// taken for it: a literal span filled by value, or the array gen
	// when value is nil.
	put := func(tag, typ uint16, count int64, vbytes int64, value func(d []byte), gen func(k int64) int64) {
		e := head[countBytes+i*entry:]
		le.PutUint16(e, tag)
		le.PutUint16(e[2:], typ)
		var v []byte
		if t.big {
			le.PutUint64(e[4:], uint64(count))
			v = e[12:20]
		} else {
			le.PutUint32(e[4:], uint32(count))
			v = e[8:12]
		}
		switch {
		case vbytes <= int64(offBytes) && gen != nil:
			for k := range count {
				t.putOff(v[k*int64(offBytes):], gen(k))
			}
		case vbytes <= int64(offBytes):
			value(v)
		case gen != nil:
			t.putOff(v, at+extra)
			spans = append(spans, span{at: extra, n: count, gen: gen})
			extra += vbytes
		default:
			t.putOff(v, at+extra)
			lit := make([]byte, vbytes)
			value(lit)
			spans = append(spans, span{at: extra, lit: lit})
			extra += vbytes
		}
		i++
	}
	short := func(tag uint16, v uint16) {
		put(tag, typeShort, 1, 2, func(d []byte) { le.PutUint16(d, v) }, nil)
	}
	long := func(tag uint16, v int64) {
		put(tag, typeLong, 1, 4, func(d []byte) { le.PutUint32(d, uint32(v)) }, nil)
	}
	offType := uint16(typeLong)
	if t.big {
		offType = typeLong8
	}
	strips := func(tag uint16, v func(k int64) int64) {
		put(tag, offType, t.nStrips, t.nStrips*int64(offBytes), nil, v)
	}
	rat := func(tag uint16, r [2]uint32) {
		put(tag, typeRational, 1, 8, func(d []byte) {
			le.PutUint32(d, r[0])
			le.PutUint32(d[4:], r[1])
		}, nil)
	}
	stripBytes := t.rowsPerStrip * m.rowBytes
	pageAt := t.dataAt + page*m.plane

	long(tagImageWidth, m.Shape[0])
	long(tagImageLength, m.Shape[1])
	short(tagBitsPerSample, uint16(8*m.size))
	short(tagCompression, 1)
	short(tagPhotometric, 1) // min-is-black
	if page == 0 {
		put(tagImageDesc, typeASCII, int64(len(t.desc)), 0, func(d []byte) { t.putOff(d, t.descAt) }, nil)
	}
	strips(tagStripOffsets, func(k int64) int64 { return pageAt + k*stripBytes })
	short(tagSamplesPerPixel, 1)
	long(tagRowsPerStrip, t.rowsPerStrip)
	strips(tagStripByteCounts, func(k int64) int64 {
		return min(t.rowsPerStrip, m.Shape[1]-k*t.rowsPerStrip) * m.rowBytes
	})
	rat(tagXResolution, t.xres)
	rat(tagYResolution, t.yres)
	short(tagPlanarConfig, 1)
	short(tagResolutionUnit, t.resUnit)
	short(tagSampleFormat, sampleTypes[m.Type].format)
	if page+1 < t.pix.n {
		t.putOff(head[countBytes+int(entries)*entry:], t.blockAt(page+1))
	}
	return spans
}

// putOff writes an offset (4 bytes in classic TIFF, 8 in BigTIFF).
func (t *tiffFile) putOff(d []byte, v int64) {
	if t.big {
		binary.LittleEndian.PutUint64(d, uint64(v))
	} else {
		binary.LittleEndian.PutUint32(d, uint32(v))
	}
}

// readIFD fills p with bytes [rel, rel+len(p)) of page's block, which
// must lie inside it, generating only the array elements under them.
func (t *tiffFile) readIFD(page int64, p []byte, rel int64) {
	offBytes := int64(4)
	if t.big {
		offBytes = 8
	}
	end := rel + int64(len(p))
	var tmp [8]byte
	for _, s := range t.ifd(page) {
		size := int64(len(s.lit))
		if s.gen != nil {
			size = s.n * offBytes
		}
		lo, hi := max(rel, s.at), min(end, s.at+size)
		if lo >= hi {
			continue
		}
		if s.gen == nil {
			copy(p[lo-rel:hi-rel], s.lit[lo-s.at:])
			continue
		}
		for k := (lo - s.at) / offBytes; s.at+k*offBytes < hi; k++ {
			e0 := s.at + k*offBytes
			t.putOff(tmp[:], s.gen(k))
			a, b := max(e0, lo), min(e0+offBytes, hi)
			copy(p[a-rel:b-rel], tmp[a-e0:b-e0])
		}
	}
}

// ReadAt reads bytes [off, off+len(p)): the header and IFDs are generated,
// the pixel data read from chunks in one batch.
func (t *tiffFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return readParts(ctx, p, off, t.size, func(ctx context.Context, p []byte, off int64) error {
		if off < t.ifdAt {
			n := copy(p, t.header()[off:])
			p, off = p[n:], off+int64(n)
		}
		for len(p) > 0 && off < t.dataAt {
			page := int64(0)
			if off >= t.ifdAt+t.block0 {
				page = 1 + (off-t.ifdAt-t.block0)/t.block
			}
			rel := off - t.blockAt(page)
			n := min(int64(len(p)), t.blockSize(page)-rel)
			t.readIFD(page, p[:n], rel)
			p, off = p[n:], off+n
		}
		if len(p) == 0 {
			return nil
		}
		return t.pix.readAt(ctx, t.chunks, p, off-t.dataAt)
	})
}

// chunksAt maps bytes [off, off+n) of the file to the pixel data's.
func (t *tiffFile) chunksAt(off, n int64, limit int) [][]int64 {
	end := min(off+n, t.size)
	off = max(off, t.dataAt)
	if off >= end {
		return nil
	}
	return t.pix.chunksAt(off-t.dataAt, end-off, limit)
}

// readParts clips a read to a file of the given size and reports io.EOF as
// io.ReaderAt does.
func readParts(ctx context.Context, p []byte, off, size int64, read func(context.Context, []byte, int64) error) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("view: negative offset %d", off)
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	if err := read(ctx, p[:n], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// imagejDesc is the ImageJ description of a hyperstack of the given
// channels, z slices and frames, with pages in ImageJ's order (channel
// fastest, then slice, then frame).
func imagejDesc(m *geom, channels, slices, frames int64) string {
	var b strings.Builder
	b.WriteString("ImageJ=1.11a\n")
	fmt.Fprintf(&b, "images=%d\n", channels*slices*frames)
	dims := 0
	for _, kv := range []struct {
		k string
		v int64
	}{{"channels", channels}, {"slices", slices}, {"frames", frames}} {
		if kv.v > 1 {
			fmt.Fprintf(&b, "%s=%d\n", kv.k, kv.v)
			dims++
		}
	}
	if dims > 1 {
		b.WriteString("hyperstack=true\n")
	}
	if channels > 1 {
		b.WriteString("mode=grayscale\n")
	}
	perUnit := 1000.0 // nanometres per µm
	if m.Unitless {
		perUnit = 1
	}
	if m.Resolution != nil && !m.Unitless {
		b.WriteString("unit=um\n")
	}
	if m.Resolution != nil && m.ndim > 2 && slices > 1 {
		b.WriteString("spacing=" + fmtFloat(m.Resolution[2]/perUnit) + "\n")
	}
	// ImageJ's origin is the pixel at the coordinate 0, in pixels.
	for i, k := range []string{"xorigin", "yorigin", "zorigin"} {
		if m.Origin == nil || i >= m.ndim || i == 2 && slices <= 1 || m.Origin[i] == 0 {
			continue
		}
		sp := 1.0
		if m.Resolution != nil {
			sp = m.Resolution[i]
		}
		b.WriteString(k + "=" + fmtFloat(-m.Origin[i]/sp) + "\n")
	}
	b.WriteString("loop=false\n")
	return b.String()
}
