package view

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Names of the directories and files the views add to an array directory.
const (
	SectionsDir = "sections"
	SlabsDir    = "slabs"
	VolumeTIFF  = "volume.tif"
	VolumeRaw   = "volume.raw"
	VolumeNRRD  = "volume.nhdr"
	VolumeMHD   = "volume.mhd"
)

// File is one view file. Size is exact and never does I/O. ReadAt reads
// bytes [off, off+len(p)) as io.ReaderAt does (n < len(p) only with an
// error; io.EOF at or past the end), asking Chunks once per batch (see
// the package comment); it is safe for concurrent use. A cancelled ctx is passed to Chunks.Get, whose
// error ReadAt returns wrapped.
type File interface {
	Name() string
	Size() int64
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// ChunksAt returns the grid coordinates of the chunks that a read of bytes
// [off, off+n) of f would ask Chunks for (none for a header), in the order
// it would, without any I/O: a reader's read-ahead prefetches them. It
// returns the first limit of them at most, and its work is bounded by
// limit, not by n.
func ChunksAt(f File, off, n int64, limit int) [][]int64 {
	if m, ok := f.(interface {
		chunksAt(off, n int64, limit int) [][]int64
	}); ok && limit > 0 {
		return m.chunksAt(off, n, limit)
	}
	return nil
}

// Reserver is implemented by Chunks that bound the memory of the reads in
// flight. Reserve waits until n more bytes fit in the budget (or ctx ends,
// returning its error) and returns the function that gives them back. A
// read reserves the decoded bytes of each batch before Get and releases
// them once the batch is copied out.
type Reserver interface {
	Reserve(ctx context.Context, n int64) (release func(), err error)
}

// Dir is a directory of view files made on demand, so that a directory of
// a million sections costs nothing until it is read. Entries are in
// lexical order, which is also plane order.
type Dir struct {
	n      int
	name   func(i int) string
	file   func(i int) File
	lookup func(name string) (int, bool)
}

// Len returns the number of files.
func (d *Dir) Len() int { return d.n }

// Name returns the name of file i, 0 <= i < Len().
func (d *Dir) Name(i int) string { return d.name(i) }

// File returns file i, 0 <= i < Len().
func (d *Dir) File(i int) File { return d.file(i) }

// Lookup returns the file of that name, or false.
func (d *Dir) Lookup(name string) (File, bool) {
	i, ok := d.lookup(name)
	if !ok || i < 0 || i >= d.n || d.name(i) != name {
		return nil, false
	}
	return d.file(i), true
}

// Views are the stitched views of one array: Files sit in the array's
// directory (volume.tif, volume.raw, volume.nhdr, volume.mhd, in that
// order; volume.tif only where the plane fits TIFF), Sections in
// SectionsDir (empty where volume.tif is left out) and Slabs in SlabsDir. Everything is
// computed from the Grid: making Views does no I/O.
type Views struct {
	Files    []File
	Sections *Dir
	Slabs    *Dir
	// Refused says why views an array of this shape cannot have were left
	// out (a TIFF plane past 2^32-1 samples a side), one sentence each,
	// for the log and `volfs info`; empty for most arrays.
	Refused []string
}

// Lookup returns the file of that name among Files, or false.
func (v *Views) Lookup(name string) (File, bool) {
	for _, f := range v.Files {
		if f.Name() == name {
			return f, true
		}
	}
	return nil, false
}

// options are settings for tests.
type options struct {
	forceBigTIFF bool // BigTIFF even where classic TIFF would do
	batchChunks  int  // a read's batch limit in chunks instead of batchLimit's
}

// New returns the views of the array described by g, read through chunks.
// It fails with an error wrapping ErrUnsupported for an array of fewer than
// two axes or an unknown sample type, and on an inconsistent Grid.
func New(g Grid, chunks Chunks) (*Views, error) {
	return newViews(g, chunks, options{})
}

func newViews(g Grid, chunks Chunks, opt options) (*Views, error) {
	m, err := newGeom(g)
	if err != nil {
		return nil, err
	}
	m.limit = opt.batchChunks
	nm := newNamer(m)
	v := &Views{}

	// TIFF holds a plane's width and height in 32 bits (LONG; BigTIFF
	// readers take no LONG8 there): a larger plane has no TIFF views
	// rather than a header that lies.
	tiff := m.Shape[0] <= math.MaxUint32 && m.Shape[1] <= math.MaxUint32
	if !tiff {
		v.Refused = append(v.Refused, fmt.Sprintf("no %s or %s: a plane of %d x %d samples does not fit TIFF's 32-bit width and height",
			VolumeTIFF, SectionsDir, m.Shape[0], m.Shape[1]))
	}

	// volume.tif: pages in ImageJ order, channel fastest.
	ij := newImageJOrder(m)
	pages := &planes{m: m, n: m.outer * m.chans, at: func(q int64, o []int64) int64 {
		m.outerIndex(ij.plane(q/m.chans), o)
		return q % m.chans
	}}
	if tiff {
		v.Files = append(v.Files, newTIFF(VolumeTIFF, chunks, pages,
			imagejDesc(m, m.chans*ij.channels, ij.slices, m.outer/(ij.channels*ij.slices)), opt.forceBigTIFF))
	}

	// volume.raw: the raw layout, x fastest, channel slowest.
	raw := &planes{m: m, n: m.outer * m.chans, at: func(q int64, o []int64) int64 {
		m.outerIndex(q%m.outer, o)
		return q / m.outer
	}}
	v.Files = append(v.Files, &rawFile{name: VolumeRaw, chunks: chunks, pix: raw})
	h := rawHeader{m: m, data: VolumeRaw, sizes: m.Shape}
	v.Files = append(v.Files, &textFile{name: VolumeNRRD, text: h.nrrd()}, &textFile{name: VolumeMHD, text: h.mhd()})

	// sections: one TIFF per plane, one page per channel.
	secDesc := imagejDesc(m, m.chans, 1, 1)
	nsec := int(m.outer)
	if !tiff {
		nsec = 0
	}
	v.Sections = &Dir{
		n:    nsec,
		name: func(i int) string { return nm.section(int64(i)) + ".tif" },
		file: func(i int) File {
			pix := &planes{m: m, n: m.chans, at: func(q int64, o []int64) int64 {
				m.outerIndex(int64(i), o)
				return q
			}}
			return newTIFF(nm.section(int64(i))+".tif", chunks, pix, secDesc, opt.forceBigTIFF)
		},
		lookup: func(name string) (int, bool) {
			s, ok := strings.CutSuffix(name, ".tif")
			if !ok {
				return 0, false
			}
			return nm.parseSection(s)
		},
	}

	// slabs: one chunk of z over the whole x-y extent, at every index of
	// the axes after z; three files each.
	v.Slabs = &Dir{lookup: func(string) (int, bool) { return 0, false }}
	if m.ndim > 2 {
		nz := m.nchunks[2]
		nslab := m.outer / m.Shape[2] * nz
		exts := []string{".mhd", ".nhdr", ".raw"} // lexical order
		v.Slabs = &Dir{
			n:    int(nslab) * len(exts),
			name: func(i int) string { return nm.slab(int64(i/len(exts))) + exts[i%len(exts)] },
			file: func(i int) File {
				s := int64(i / len(exts))
				base := nm.slab(s)
				z0 := s % nz * m.Chunk[2]
				z1 := min(z0+m.Chunk[2], m.Shape[2])
				above := s / nz // index over the axes after z
				switch exts[i%len(exts)] {
				case ".raw":
					nzs := z1 - z0
					pix := &planes{m: m, n: nzs * m.chans, at: func(q int64, o []int64) int64 {
						m.outerIndex((above*m.Shape[2])+z0+q%nzs, o)
						return q / nzs
					}}
					return &rawFile{name: base + ".raw", chunks: chunks, pix: pix}
				}
				// A slab is 3-D: it holds one index of every axis after z.
				sizes := []int64{m.Shape[0], m.Shape[1], z1 - z0}
				h := rawHeader{m: m, data: base + ".raw", sizes: sizes, z0: z0}
				if exts[i%len(exts)] == ".nhdr" {
					return &textFile{name: base + ".nhdr", text: h.nrrd()}
				}
				return &textFile{name: base + ".mhd", text: h.mhd()}
			},
			lookup: func(name string) (int, bool) {
				for k, e := range exts {
					if s, ok := strings.CutSuffix(name, e); ok {
						i, ok := nm.parseSlab(s)
						return i*len(exts) + k, ok
					}
				}
				return 0, false
			},
		}
	}
	return v, nil
}

// imagejOrder maps ImageJ's page order (channel fastest, then z, then
// frames) onto the Grid's planes (axis 2 fastest). The channel axis is the
// first axis after y whose role is "channel", the z axis is axis 2 unless
// its role is channel or time, and every other axis after y counts frames,
// in Grid order.
type imagejOrder struct {
	m        *geom
	order    []int // axes after y (Grid indices) in ImageJ order
	channels int64 // planes along the channel axis, 1 without one
	slices   int64 // planes along z, 1 without one
}

func newImageJOrder(m *geom) *imagejOrder {
	ij := &imagejOrder{m: m, channels: 1, slices: 1}
	role := func(k int) string {
		if m.Axes == nil {
			return ""
		}
		return m.Axes[k].Role
	}
	c, z := -1, -1
	for k := 2; k < m.ndim; k++ {
		if role(k) == "channel" {
			c = k
			break
		}
	}
	if m.ndim > 2 && role(2) != "channel" && role(2) != "time" {
		z = 2
	}
	if c >= 0 {
		ij.order = append(ij.order, c)
		ij.channels = m.Shape[c]
	}
	if z >= 0 {
		ij.order = append(ij.order, z)
		ij.slices = m.Shape[z]
	}
	for k := 2; k < m.ndim; k++ {
		if k != c && k != z {
			ij.order = append(ij.order, k)
		}
	}
	return ij
}

// plane returns the Grid plane number (axis 2 fastest) of ImageJ page
// group p (pages of one plane's channels of Grid.Channels).
func (ij *imagejOrder) plane(p int64) int64 {
	m := ij.m
	var idx [16]int64
	at := idx[:0]
	if m.ndim-2 > len(idx) {
		at = make([]int64, 0, m.ndim-2)
	}
	at = at[:m.ndim-2]
	for _, k := range ij.order {
		at[k-2] = p % m.Shape[k]
		p /= m.Shape[k]
	}
	q := int64(0)
	for k := m.ndim - 1; k >= 2; k-- {
		q = q*m.Shape[k] + at[k-2]
	}
	return q
}

// axisName returns the name that Grid.Axes gives axis k, or "" when it
// gives none fit for a file name: 1 to 8 lowercase letters.
func axisName(m *geom, k int) string {
	if m.Axes == nil {
		return ""
	}
	n := m.Axes[k].Name
	if len(n) < 1 || len(n) > 8 {
		return ""
	}
	for _, r := range n {
		if r < 'a' || r > 'z' {
			return ""
		}
	}
	return n
}

// namer makes and parses the names of sections and slabs. A section is
// named by the indices of the axes after y, slowest first, each as the
// axis' name followed by the index zero-padded to the width of the axis'
// largest index, joined by "_": "z042" for a 3-D array of 100 planes,
// "a3-2_z042" for 4-D (axes after z are named a3, a4, ...; a "-" parts a
// name ending in a digit from its index). Lexical order is plane order. A
// 2-D array has one section, "plane". A slab is named like a section but
// with the z part as the first and last z of the slab:
// "z000-063".
type namer struct {
	m     *geom
	names []string // per axis from 2 on
	width []int
	re    *regexp.Regexp
	reSl  *regexp.Regexp
}

func newNamer(m *geom) *namer {
	nm := &namer{m: m}
	var parts, slab []string
	given := map[string]bool{}
	for k := 2; k < m.ndim; k++ {
		given[axisName(m, k)] = true
	}
	for k := m.ndim - 1; k >= 2; k-- {
		name := "z"
		if k > 2 {
			name = "a" + strconv.Itoa(k) + "-"
		}
		// The metadata's names, when every axis after y has a distinct
		// one (the default names could otherwise collide with them).
		if len(given) == m.ndim-2 && !given[""] {
			name = axisName(m, k)
		}
		nm.names = append([]string{name}, nm.names...)
	}
	for k := 2; k < m.ndim; k++ {
		nm.width = append(nm.width, len(strconv.FormatInt(m.Shape[k]-1, 10)))
	}
	for k := m.ndim - 1; k >= 2; k-- {
		p := regexp.QuoteMeta(nm.names[k-2]) + `([0-9]{` + strconv.Itoa(nm.width[k-2]) + `})`
		parts = append(parts, p)
		if k == 2 {
			p = regexp.QuoteMeta(nm.names[0]) + `([0-9]{` + strconv.Itoa(nm.width[0]) + `})-([0-9]{` + strconv.Itoa(nm.width[0]) + `})`
		}
		slab = append(slab, p)
	}
	nm.re = regexp.MustCompile("^" + strings.Join(parts, "_") + "$")
	nm.reSl = regexp.MustCompile("^" + strings.Join(slab, "_") + "$")
	return nm
}

func (nm *namer) pad(k int, v int64) string {
	s := strconv.FormatInt(v, 10)
	return strings.Repeat("0", max(0, nm.width[k]-len(s))) + s
}

// section names plane i (axis 2 fastest).
func (nm *namer) section(i int64) string {
	m := nm.m
	if m.ndim == 2 {
		return "plane"
	}
	o := make([]int64, m.ndim-2)
	m.outerIndex(i, o)
	parts := make([]string, len(o))
	for k := range o {
		parts[len(o)-1-k] = nm.names[k] + nm.pad(k, o[k])
	}
	return strings.Join(parts, "_")
}

func (nm *namer) parseSection(s string) (int, bool) {
	if nm.m.ndim == 2 {
		return 0, s == "plane"
	}
	g := nm.re.FindStringSubmatch(s)
	if g == nil {
		return 0, false
	}
	i := int64(0)
	for k := nm.m.ndim - 1; k >= 2; k-- {
		v, _ := strconv.ParseInt(g[nm.m.ndim-k], 10, 64)
		if v >= nm.m.Shape[k] {
			return 0, false
		}
		i = i*nm.m.Shape[k] + v
	}
	return int(i), true
}

// slab names slab s: s counts z chunks fastest, then the axes after z.
func (nm *namer) slab(s int64) string {
	m := nm.m
	nz := m.nchunks[2]
	z0 := s % nz * m.Chunk[2]
	z1 := min(z0+m.Chunk[2], m.Shape[2]) - 1
	o := make([]int64, m.ndim-2)
	m.outerIndex(s/nz*m.Shape[2], o)
	parts := make([]string, len(o))
	for k := range o {
		parts[len(o)-1-k] = nm.names[k] + nm.pad(k, o[k])
	}
	parts[len(o)-1] = nm.names[0] + nm.pad(0, z0) + "-" + nm.pad(0, z1)
	return strings.Join(parts, "_")
}

func (nm *namer) parseSlab(s string) (int, bool) {
	m := nm.m
	g := nm.reSl.FindStringSubmatch(s)
	if g == nil {
		return 0, false
	}
	i := int64(0)
	for k := m.ndim - 1; k >= 3; k-- {
		v, _ := strconv.ParseInt(g[m.ndim-k], 10, 64)
		if v >= m.Shape[k] {
			return 0, false
		}
		i = i*m.Shape[k] + v
	}
	z0, _ := strconv.ParseInt(g[m.ndim-2], 10, 64)
	if z0%m.Chunk[2] != 0 || z0 >= m.Shape[2] {
		return 0, false
	}
	i = i*m.nchunks[2] + z0/m.Chunk[2]
	return int(i), true // Dir.Lookup checks the whole name, z1 included
}

// String describes the views for logs.
func (v *Views) String() string {
	return fmt.Sprintf("views: %d files, %d sections, %d slab files", len(v.Files), v.Sections.Len(), v.Slabs.Len())
}
