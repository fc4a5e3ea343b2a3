package view

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// python is Debian's python3, which has numpy, tifffile and PIL (the
// user's python3 may be another one).
const python = "/usr/bin/python3"

// chunkKind is how a test stores its chunks, one per format family.
type chunkKind int

const (
	clipped  chunkKind = iota // precomputed raw: x fastest, edge chunks clipped, channel slowest
	fullC                     // zarr order C: x fastest, edge chunks stored full size
	fullF                     // zarr order F: x slowest, edge chunks full size
	n5Header                  // N5: a block header, x fastest, edge blocks truncated
	n5Full                    // N5 as some writers store it: edge blocks full size
)

type viewCase struct {
	name       string
	shape      []int64 // Grid order
	chunk      []int64
	channels   int
	typ        SampleType
	kind       chunkKind
	bigEndian  bool
	fill       float64
	missing    bool // chunks whose index sum % 7 == 3 are missing
	resolution []float64
	bigTIFF    bool
}

var viewCases = []viewCase{
	{name: "precomputed-uint16", shape: []int64{45, 37, 11}, chunk: []int64{16, 16, 4}, typ: Uint16,
		kind: clipped, missing: true, resolution: []float64{4, 4, 40}},
	{name: "precomputed-uint8", shape: []int64{50, 40, 3}, chunk: []int64{64, 16, 2}, typ: Uint8,
		kind: clipped, missing: true, resolution: []float64{10, 10, 30}},
	{name: "precomputed-rgb-uint8", shape: []int64{30, 20, 5}, chunk: []int64{16, 8, 2}, channels: 3,
		typ: Uint8, kind: clipped, missing: true, resolution: []float64{8, 8, 8}},
	{name: "zarr-c-int16-be-4d", shape: []int64{20, 17, 6, 3}, chunk: []int64{8, 8, 4, 2}, typ: Int16,
		kind: fullC, bigEndian: true, fill: 7, missing: true},
	{name: "zarr-f-float64", shape: []int64{19, 13, 7}, chunk: []int64{8, 8, 3}, typ: Float64,
		kind: fullF, fill: 0.5, missing: true, resolution: []float64{1.5, 1.5, 3}},
	{name: "zarr-c-int8-2d", shape: []int64{40, 30}, chunk: []int64{16, 16}, typ: Int8, kind: fullC,
		fill: -3, missing: true},
	{name: "n5-float32", shape: []int64{33, 21, 9}, chunk: []int64{16, 16, 4}, typ: Float32,
		kind: n5Header, bigEndian: true, missing: true, resolution: []float64{4, 4, 40}},
	{name: "n5-int32-full-edge-bigtiff", shape: []int64{23, 18, 5}, chunk: []int64{8, 8, 2}, typ: Int32,
		kind: n5Full, bigEndian: true, missing: true, resolution: []float64{4, 4, 40}, bigTIFF: true},
}

// genReference writes the case's reference volume with numpy and returns
// its path and bytes (little-endian, channel slowest, x fastest).
func genReference(t testing.TB, c viewCase, dir string) (string, []byte) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testenv.Unavailable(t, "no %s: apt-get install python3-numpy", python)
	}
	spec, err := json.Marshal(map[string]any{
		"shape": c.shape, "channels": max(c.channels, 1), "dtype": c.typ.String(), "seed": len(c.name),
		"chunk": c.chunk, "fill": c.fill, "missing": c.missing,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, c.name+".ref")
	out, err := exec.Command(python, "testdata/gen_reference.py", string(spec), path).CombinedOutput()
	if err != nil {
		t.Fatalf("gen_reference.py: %v\n%s", err, out)
	}
	ref, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, ref
}

// memChunks is an in-memory Chunks that counts what it is asked for.
type memChunks struct {
	chunks map[string][]byte
	fill   []byte
	fail   map[string]error // chunks whose load fails
	// layout gives each chunk's layout, as the tree does; nil: the zero
	// layout.
	layout func(c []int64, data []byte) (ChunkLayout, error)

	mu        sync.Mutex
	gets      int       // GUARDED_BY(mu)
	requested int       // GUARDED_BY(mu)
	last      [][]int64 // GUARDED_BY(mu); the coordinates of the last Get
}

func chunkKey(c []int64) string { return fmt.Sprint(c) }

func (f *memChunks) Get(ctx context.Context, coords [][]int64) ([]Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.gets++
	f.requested += len(coords)
	f.last = coords
	f.mu.Unlock()
	seen := make(map[string]bool)
	out := make([]Chunk, len(coords))
	for i, c := range coords {
		k := chunkKey(c)
		if seen[k] {
			return nil, fmt.Errorf("memchunks: chunk %v asked twice in one batch", c)
		}
		seen[k] = true
		if err := f.fail[k]; err != nil {
			return nil, err
		}
		out[i].Data = f.chunks[k]
		if out[i].Data != nil && f.layout != nil {
			var err error
			if out[i].Layout, err = f.layout(c, out[i].Data); err != nil {
				return nil, fmt.Errorf("%w: chunk %v: %w", ErrCorrupt, c, err)
			}
		}
	}
	return out, nil
}

func (f *memChunks) Fill() []byte { return f.fill }

func (f *memChunks) counts() (gets, requested int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.requested
}

// encodeSample returns v as one sample of type typ in the given byte order.
func encodeSample(typ SampleType, v float64, bigEndian bool) []byte {
	b := make([]byte, 8)
	var bo binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		bo = binary.BigEndian
	}
	switch typ {
	case Uint8, Int8:
		b[0] = byte(int8(v))
		if typ == Uint8 {
			b[0] = byte(uint8(v))
		}
	case Uint16, Int16:
		bo.PutUint16(b, uint16(int16(v)))
	case Uint32, Int32:
		bo.PutUint32(b, uint32(int32(v)))
	case Float32:
		bo.PutUint32(b, math.Float32bits(float32(v)))
	case Float64:
		bo.PutUint64(b, math.Float64bits(v))
	case Uint64, Int64:
		bo.PutUint64(b, uint64(int64(v)))
	}
	return b[:typ.Size()]
}

// gridIter calls fn with every index of a box of the given sizes, axis 0
// fastest.
func gridIter(sizes []int64, fn func(i []int64)) {
	i := make([]int64, len(sizes))
	for {
		fn(i)
		k := 0
		for ; k < len(sizes); k++ {
			if i[k]++; i[k] < sizes[k] {
				break
			}
			i[k] = 0
		}
		if k == len(sizes) {
			return
		}
	}
}

// stored returns the dimensions a chunk is stored with (what an N5 block
// header says).
func (c viewCase) stored(coord []int64) []int64 {
	d := make([]int64, len(c.shape))
	for k := range d {
		d[k] = c.chunk[k]
		if c.kind == clipped || c.kind == n5Header {
			d[k] = min(c.chunk[k], c.shape[k]-coord[k]*c.chunk[k])
		}
	}
	return d
}

// layout is the layout of a chunk as Chunks.Get hands it out: N5 blocks
// from their header, the others from the coordinates.
func (c viewCase) layout(coord []int64, data []byte) (ChunkLayout, error) {
	n := len(c.shape)
	var d []int64
	var header int64
	if c.kind == n5Header || c.kind == n5Full {
		header = int64(4 + 4*n)
		if int64(len(data)) < header || binary.BigEndian.Uint16(data[2:]) != uint16(n) {
			return ChunkLayout{}, fmt.Errorf("bad n5 block header")
		}
		for k := range n {
			d = append(d, int64(binary.BigEndian.Uint32(data[4+4*k:])))
		}
	} else {
		d = c.stored(coord)
	}
	l := ChunkLayout{Header: header, Strides: make([]int64, n), Extent: d}
	s := int64(c.typ.Size())
	for j := range n {
		k := j
		if c.kind == fullF {
			k = n - 1 - j
		}
		l.Strides[k] = s
		s *= d[k]
	}
	l.ChannelStride = s
	return l, nil
}

// grid returns the Grid of the case.
func (c viewCase) grid() Grid {
	return Grid{Shape: c.shape, Chunk: c.chunk, Channels: c.channels, Type: c.typ,
		BigEndian: c.bigEndian, Resolution: c.resolution}
}

// buildChunks cuts the reference into chunks laid out as the case's format
// stores them; what a chunk stores outside the array is garbage (0xA5) so
// that a view reading it shows.
func buildChunks(c viewCase, ref []byte) *memChunks {
	f := &memChunks{chunks: make(map[string][]byte), fill: encodeSample(c.typ, c.fill, c.bigEndian), layout: c.layout}
	n := len(c.shape)
	nch := make([]int64, n)
	outer := int64(1)
	for k := range n {
		nch[k] = (c.shape[k] + c.chunk[k] - 1) / c.chunk[k]
		if k >= 2 {
			outer *= c.shape[k]
		}
	}
	size := int64(c.typ.Size())
	chans := int64(max(c.channels, 1))
	gridIter(nch, func(coord []int64) {
		sum := int64(0)
		for _, v := range coord {
			sum += v
		}
		if c.missing && sum%7 == 3 {
			return
		}
		var header []byte
		if c.kind == n5Header || c.kind == n5Full {
			header = binary.BigEndian.AppendUint16(nil, 0) // mode: default
			header = binary.BigEndian.AppendUint16(header, uint16(n))
			for _, v := range c.stored(coord) {
				header = binary.BigEndian.AppendUint32(header, uint32(v))
			}
		}
		l, err := c.layout(coord, header)
		if err != nil {
			panic(err)
		}
		data := make([]byte, l.Header+l.ChannelStride*chans)
		copy(data, header)
		g := make([]int64, n)
		for ch := range chans {
			gridIter(l.Extent, func(loc []int64) {
				at := l.Header + ch*l.ChannelStride
				inside := true
				for k := range n {
					at += loc[k] * l.Strides[k]
					g[k] = coord[k]*c.chunk[k] + loc[k]
					inside = inside && g[k] < c.shape[k]
				}
				dst := data[at : at+size]
				if !inside {
					for i := range dst {
						dst[i] = 0xA5
					}
					return
				}
				// Reference index: ((ch*outer + o)*Y + y)*X + x.
				o, stride := int64(0), int64(1)
				for k := 2; k < n; k++ {
					o += g[k] * stride
					stride *= c.shape[k]
				}
				idx := ((ch*outer+o)*c.shape[1]+g[1])*c.shape[0] + g[0]
				src := ref[idx*size : (idx+1)*size]
				for i := range dst {
					if c.bigEndian {
						dst[i] = src[size-1-int64(i)]
					} else {
						dst[i] = src[i]
					}
				}
			})
		}
		f.chunks[chunkKey(coord)] = data
	})
	return f
}

// readAll reads a view file sequentially in odd-sized pieces and checks
// its size and end of file.
func readAll(t *testing.T, f File) []byte {
	t.Helper()
	ctx := context.Background()
	var out []byte
	buf := make([]byte, 65521)
	for off := int64(0); ; {
		n, err := f.ReadAt(ctx, buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: ReadAt(%d): %v", f.Name(), off, err)
		}
	}
	if int64(len(out)) != f.Size() {
		t.Fatalf("%s: read %d bytes, Size() = %d", f.Name(), len(out), f.Size())
	}
	return out
}

// randomReads compares 200 reads at random offsets and lengths with the
// sequential read, as restic's fuse_test does, and checks that each read
// asks Chunks at most once.
func randomReads(t *testing.T, f File, want []byte, chunks *memChunks, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	size := f.Size()
	for range 200 {
		off := rng.Int64N(size)
		n := 1 + rng.Int64N(min(size, 3*int64(len(want))/4+1))
		if rng.IntN(4) == 0 {
			n = 1 + rng.Int64N(16) // a few bytes: partial samples
		}
		buf := make([]byte, n)
		before, _ := chunks.counts()
		got, err := f.ReadAt(ctx, buf, off)
		after, _ := chunks.counts()
		if after-before > 1 {
			t.Fatalf("%s: ReadAt(%d, %d) asked Chunks %d times, want at most 1", f.Name(), off, n, after-before)
		}
		// ChunksAt names exactly the chunks the read asked for.
		var asked [][]int64
		if after > before {
			chunks.mu.Lock()
			asked = chunks.last
			chunks.mu.Unlock()
		}
		if got := ChunksAt(f, off, n, 1<<20); fmt.Sprint(got) != fmt.Sprint(asked) {
			t.Fatalf("%s: ChunksAt(%d, %d) = %v, the read asked for %v", f.Name(), off, n, got, asked)
		}
		wantN := min(n, size-off)
		if int64(got) != wantN || (err != nil && err != io.EOF) || (int64(got) < n) != (err == io.EOF) {
			t.Fatalf("%s: ReadAt(%d, %d) = %d, %v; want %d", f.Name(), off, n, got, err, wantN)
		}
		if !bytes.Equal(buf[:got], want[off:off+wantN]) {
			t.Fatalf("%s: ReadAt(%d, %d) differs from the sequential read", f.Name(), off, n)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestViewsWithOtherPrograms writes every view of every case through
// ReadAt and checks them with tifffile, PIL, libtiff, GDAL, ImageJ, teem,
// plastimatch and numpy.memmap against numpy's reference.
func TestViewsWithOtherPrograms(t *testing.T) {
	for _, tool := range []string{"tiffinfo", "tiffdump", "gdalinfo", "teem-unu", "plastimatch", "java"} {
		testenv.LookPath(t, tool, "apt-get install -y libtiff-tools gdal-bin teem-apps plastimatch imagej")
	}
	if _, err := os.Stat("/usr/share/java/ij.jar"); err != nil {
		testenv.Unavailable(t, "ImageJ is missing: apt-get install -y imagej")
	}
	if err := exec.Command(python, "-c", "import numpy, tifffile, PIL").Run(); err != nil {
		testenv.Unavailable(t, "%s lacks numpy, tifffile or PIL: apt-get install -y python3-numpy python3-tifffile python3-pil", python)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var manifest []map[string]any
	for _, c := range viewCases {
		refPath, ref := genReference(t, c, dir)
		chunks := buildChunks(c, ref)
		v, err := newViews(c.grid(), chunks, options{forceBigTIFF: c.bigTIFF})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out := filepath.Join(dir, c.name)
		for _, f := range v.Files {
			data := readAll(t, f)
			writeFile(t, filepath.Join(out, f.Name()), data)
			if f.Name() == VolumeTIFF || f.Name() == VolumeRaw {
				randomReads(t, f, data, chunks, rng)
			}
		}
		if f, ok := v.Lookup(VolumeRaw); !ok || !bytes.Equal(readAll(t, f), ref) {
			t.Errorf("%s: volume.raw differs from numpy's reference", c.name)
		}
		for _, d := range []struct {
			name string
			dir  *Dir
		}{{SectionsDir, v.Sections}, {SlabsDir, v.Slabs}} {
			for i := range d.dir.Len() {
				f := d.dir.File(i)
				if f.Name() != d.dir.Name(i) {
					t.Fatalf("%s: %s file %d is named %q, Name(%d) = %q", c.name, d.name, i, f.Name(), i, d.dir.Name(i))
				}
				if g, ok := d.dir.Lookup(f.Name()); !ok || g.Name() != f.Name() {
					t.Fatalf("%s: Lookup(%q) = %v, %v", c.name, f.Name(), g, ok)
				}
				if i > 0 && d.dir.Name(i-1) >= f.Name() {
					t.Fatalf("%s: %q lists before %q", c.name, d.dir.Name(i-1), f.Name())
				}
				data := readAll(t, f)
				writeFile(t, filepath.Join(out, d.name, f.Name()), data)
				if i == 0 || i == d.dir.Len()-1 {
					randomReads(t, f, data, chunks, rng)
				}
			}
		}
		manifest = append(manifest, map[string]any{
			"name": c.name, "dir": out, "ref": refPath, "dtype": c.typ.String(), "shape": c.shape,
			"channels": max(c.channels, 1), "chunk": c.chunk, "resolution": c.resolution, "bigtiff": c.bigTIFF,
		})
	}
	js, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(dir, "manifest.json")
	writeFile(t, mpath, js)
	cmd := exec.Command(python, "testdata/check_views.py", mpath)
	cmd.Env = append(os.Environ(), "GDAL_PAM_ENABLED=NO")
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check_views.py: %v\n%s", err, got)
	}
	t.Logf("%s", got)
}

// TestReadErrors checks that a failing chunk fails only the reads that
// touch it, that a short chunk is ErrCorrupt, and that cancellation
// reaches Chunks.
func TestReadErrors(t *testing.T) {
	c := viewCase{shape: []int64{32, 32, 4}, chunk: []int64{16, 16, 4}, typ: Uint16, kind: clipped}
	ref := make([]byte, 32*32*4*2)
	chunks := buildChunks(c, ref)
	bad := errors.New("fetch failed")
	chunks.fail = map[string]error{chunkKey([]int64{1, 1, 0}): bad}
	v, err := New(c.grid(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := v.Lookup(VolumeRaw)
	ctx := context.Background()
	buf := make([]byte, 32) // the first 16 samples of row 0: chunk (0,0,0) only
	if _, err := raw.ReadAt(ctx, buf, 0); err != nil {
		t.Errorf("read of a good chunk: %v", err)
	}
	if _, err := raw.ReadAt(ctx, buf, 16*64+32); !errors.Is(err, bad) {
		t.Errorf("read of the failing chunk: got %v, want %v", err, bad)
	}
	chunks.chunks[chunkKey([]int64{0, 1, 0})] = make([]byte, 100)
	if _, err := raw.ReadAt(ctx, buf, 16*64); !errors.Is(err, ErrCorrupt) {
		t.Errorf("read of a short chunk: got %v, want ErrCorrupt", err)
	}
	n5 := viewCase{shape: []int64{32, 32, 4}, chunk: []int64{16, 16, 4}, typ: Uint16, kind: n5Header, bigEndian: true}
	n5chunks := buildChunks(n5, ref)
	n5chunks.chunks[chunkKey([]int64{0, 0, 0})][3] = 7 // the header's ndim
	n5v, err := New(n5.grid(), n5chunks)
	if err != nil {
		t.Fatal(err)
	}
	n5raw, _ := n5v.Lookup(VolumeRaw)
	if _, err := n5raw.ReadAt(ctx, buf, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("read of a block with a bad header: got %v, want ErrCorrupt", err)
	}
	if _, err := n5raw.ReadAt(ctx, buf, 16*64); err != nil {
		t.Errorf("read of a good block beside a bad one: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := raw.ReadAt(cctx, buf, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: got %v, want context.Canceled", err)
	}
	if n, err := raw.ReadAt(ctx, buf, raw.Size()); n != 0 || err != io.EOF {
		t.Errorf("read at the end: got %d, %v; want 0, EOF", n, err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, g := range []Grid{
		{Shape: []int64{5}, Chunk: []int64{5}, Type: Uint8},
		{Shape: []int64{5, 5}, Chunk: []int64{5, 5}},
		{Shape: []int64{5, 5}, Chunk: []int64{5, 5}, Type: SampleType(99)},
	} {
		if _, err := New(g, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("New(%v, %v): got %v, want ErrUnsupported", g.Shape, g.Type, err)
		}
	}
	for _, g := range []Grid{
		{Shape: []int64{5, 5}, Chunk: []int64{5}, Type: Uint8},
		{Shape: []int64{5, 0}, Chunk: []int64{5, 5}, Type: Uint8},
		{Shape: []int64{5, 5}, Chunk: []int64{5, 5}, Type: Uint8, Resolution: []float64{1, -1}},
		{Shape: []int64{1 << 40, 1 << 40, 1 << 40}, Chunk: []int64{5, 5, 5}, Type: Uint8},
	} {
		if _, err := New(g, nil); err == nil {
			t.Errorf("New(%v, chunk %v): no error", g.Shape, g.Chunk)
		}
	}
}

func TestNames(t *testing.T) {
	tcz := []Axis{{"x", "space"}, {"y", "space"}, {"z", "space"}, {"c", "channel"}, {"t", "time"}}
	for _, tc := range []struct {
		shape, chunk         []int64
		first, last, slab0   string
		nsections, slabFiles int
		axes                 []Axis
	}{
		{[]int64{10, 10, 4, 3, 2}, []int64{4, 4, 4, 1, 1}, "t0_c0_z0.tif", "t1_c2_z3.tif", "t0_c0_z0-3.mhd", 24, 18, tcz},
		{[]int64{10, 10, 3}, []int64{4, 4, 1}, "c0.tif", "c2.tif", "c0-0.mhd", 3, 9, []Axis{{}, {}, {"c", "channel"}}},
		// A name that is no short lowercase word: the default names.
		{[]int64{10, 10, 4, 3}, []int64{4, 4, 4, 1}, "a3-0_z0.tif", "a3-2_z3.tif", "a3-0_z0-3.mhd", 12, 9, []Axis{{}, {}, {"z", ""}, {"C", "channel"}}},
		{[]int64{10, 10, 100}, []int64{4, 4, 64}, "z00.tif", "z99.tif", "z00-63.mhd", 100, 6, nil},
		{[]int64{10, 10, 5}, []int64{4, 4, 64}, "z0.tif", "z4.tif", "z0-4.mhd", 5, 3, nil},
		{[]int64{10, 10, 12, 3}, []int64{4, 4, 5, 1}, "a3-0_z00.tif", "a3-2_z11.tif", "a3-0_z00-04.mhd", 36, 27, nil},
		{[]int64{10, 10}, []int64{4, 4}, "plane.tif", "plane.tif", "", 1, 0, nil},
	} {
		v, err := New(Grid{Shape: tc.shape, Chunk: tc.chunk, Type: Uint8, Axes: tc.axes}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := v.Sections
		if s.Len() != tc.nsections || s.Name(0) != tc.first || s.Name(s.Len()-1) != tc.last {
			t.Errorf("shape %v: %d sections %q..%q, want %d %q..%q", tc.shape, s.Len(), s.Name(0), s.Name(s.Len()-1),
				tc.nsections, tc.first, tc.last)
		}
		if v.Slabs.Len() != tc.slabFiles || (tc.slabFiles > 0 && v.Slabs.Name(0) != tc.slab0) {
			t.Errorf("shape %v: %d slab files, want %d starting %q", tc.shape, v.Slabs.Len(), tc.slabFiles, tc.slab0)
		}
		for _, bad := range []string{"z100.tif", "z-1.tif", "z0.tiff", "plane", "a3-3_z00.tif", "z00-62.raw", "z01-63.raw", "volume.tif"} {
			if _, ok := s.Lookup(bad); ok {
				t.Errorf("shape %v: section Lookup(%q) found a file", tc.shape, bad)
			}
			if _, ok := v.Slabs.Lookup(bad); ok {
				t.Errorf("shape %v: slab Lookup(%q) found a file", tc.shape, bad)
			}
		}
	}
}

// TestImageJOrder checks that volume.tif's pages follow ImageJ's order,
// channel fastest, then z, then time, whatever the Grid's axis order.
func TestImageJOrder(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		axes  []Axis
		// pages[i] is the Grid plane (axis 2 fastest) of page group i
		pages            []int64
		channels, slices int64
	}{
		// (t, c, z, y, x): Grid x, y, z=4, c=3, t=2; page 1 is c=1, z=0,
		// plane 0 + 4*1; page 3 is c=0, z=1, plane 1; page 12 is t=1.
		{[]int64{5, 5, 4, 3, 2}, []Axis{{}, {}, {"z", "space"}, {"c", "channel"}, {"t", "time"}}, []int64{0, 4, 8, 1, 5, 9, 2}, 3, 4},
		// (t, y, x): no z, time is frames.
		{[]int64{5, 5, 6}, []Axis{{}, {}, {"t", "time"}}, []int64{0, 1, 2}, 1, 1},
		// No axes: z is axis 2, the rest frames, as before.
		{[]int64{5, 5, 4, 3}, nil, []int64{0, 1, 2, 3, 4}, 1, 4},
	} {
		m, err := newGeom(Grid{Shape: tc.shape, Chunk: tc.shape, Type: Uint8, Axes: tc.axes})
		if err != nil {
			t.Fatal(err)
		}
		ij := newImageJOrder(m)
		if ij.channels != tc.channels || ij.slices != tc.slices {
			t.Errorf("%v: %d channels, %d slices, want %d, %d", tc.shape, ij.channels, ij.slices, tc.channels, tc.slices)
		}
		for p, want := range tc.pages {
			if got := ij.plane(int64(p)); got != want {
				t.Errorf("%v: page %d is plane %d, want %d", tc.shape, p, got, want)
			}
		}
	}
}
