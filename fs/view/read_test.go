package view

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// lruChunks is an LRU of a fixed number of decoded chunks in front of
// memChunks, counting the loads ("decodes") it makes, as the chunk store
// does.
type lruChunks struct {
	next *memChunks
	cap  int

	mu    sync.Mutex
	order *list.List               // GUARDED_BY(mu); front = most recent; values are keys
	elems map[string]*list.Element // GUARDED_BY(mu)
	loads int                      // GUARDED_BY(mu)
}

func newLRU(next *memChunks, capacity int) *lruChunks {
	return &lruChunks{next: next, cap: capacity, order: list.New(), elems: make(map[string]*list.Element)}
}

func (l *lruChunks) Fill() []byte { return l.next.Fill() }

func (l *lruChunks) Get(ctx context.Context, coords [][]int64) ([]Chunk, error) {
	out, err := l.next.Get(ctx, coords)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range coords {
		k := chunkKey(c)
		if e, ok := l.elems[k]; ok {
			l.order.MoveToFront(e)
			continue
		}
		l.loads++
		l.elems[k] = l.order.PushFront(k)
		if l.order.Len() > l.cap {
			delete(l.elems, l.order.Remove(l.order.Back()).(string))
		}
	}
	return out, nil
}

// TestSectionWalkDecodesEachChunkOnce walks every section in z order in
// 4 KiB reads, as cat does through the kernel, through an LRU of chunks:
// with room for one chunk layer (every chunk a plane touches) each chunk is
// loaded once for the whole walk; with room for one chunk row only, once
// per plane.
func TestSectionWalkDecodesEachChunkOnce(t *testing.T) {
	c := viewCase{shape: []int64{100, 70, 20}, chunk: []int64{16, 16, 8}, typ: Uint16, kind: clipped}
	nx, ny, nz := 7, 5, 3
	ref := make([]byte, 100*70*20*2)
	for _, tc := range []struct {
		name      string
		capacity  int
		wantLoads int
	}{
		{"layer", nx * ny, nx * ny * nz},
		{"row", nx, nx * ny * 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lru := newLRU(buildChunks(c, ref), tc.capacity)
			v, err := New(c.grid(), lru)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4096)
			for i := range v.Sections.Len() {
				f := v.Sections.File(i)
				for off := int64(0); off < f.Size(); off += int64(len(buf)) {
					if _, err := f.ReadAt(context.Background(), buf, off); err != nil && err != io.EOF {
						t.Fatal(err)
					}
				}
			}
			if lru.loads != tc.wantLoads {
				t.Errorf("walking %d sections loaded %d chunks, want %d", v.Sections.Len(), lru.loads, tc.wantLoads)
			}
		})
	}
}

// constChunks serves one chunk buffer for every coordinate: a volume of
// any size with no memory of its own.
type constChunks struct {
	data   []byte
	fill   []byte
	layout ChunkLayout // of every chunk
}

func (c *constChunks) Get(_ context.Context, coords [][]int64) ([]Chunk, error) {
	out := make([]Chunk, len(coords))
	for i := range out {
		out[i] = Chunk{Data: c.data, Layout: c.layout}
	}
	return out, nil
}

func (c *constChunks) Fill() []byte { return c.fill }

// bigGrid is a 20000 x 20000 x 100 volume of 64^3 uint8 chunks (x fastest,
// edge chunks stored full size) over constChunks.
func bigGrid(typ SampleType, bigEndian bool) (Grid, *constChunks) {
	size := int64(typ.Size())
	chunk := []int64{64, 64, 64}
	g := Grid{Shape: []int64{20000, 20000, 100}, Chunk: chunk, Type: typ, BigEndian: bigEndian,
		Resolution: []float64{4, 4, 40}}
	data := make([]byte, 64*64*64*size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	return g, &constChunks{data: data, fill: make([]byte, size),
		layout: ChunkLayout{Strides: []int64{size, size * 64, size * 64 * 64}, Extent: chunk}}
}

// TestSectionReadMemory reads a whole section of a 20000 x 20000 x 100
// volume (400 MB) in 1 MiB reads and checks that the views allocate a small
// bounded amount per read (the batch's bookkeeping), never the plane.
func TestSectionReadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 400 MB")
	}
	g, chunks := bigGrid(Uint8, false)
	v, err := New(g, chunks)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := v.Sections.Lookup("z50.tif")
	if !ok {
		t.Fatal("no z50.tif")
	}
	buf := make([]byte, 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reads := 0
	for off := int64(0); off < f.Size(); off += int64(len(buf)) {
		if _, err := f.ReadAt(context.Background(), buf, off); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		reads++
	}
	runtime.ReadMemStats(&after)
	perRead := (after.TotalAlloc - before.TotalAlloc) / uint64(reads)
	// A 1 MiB read of a 20000-wide plane spans 53 rows: one or two chunk
	// rows of 313 chunks. Their coordinates, index and layouts take a few
	// hundred bytes each, under the size of the read itself; the plane
	// would be 400 MB.
	const bound = 1 << 20
	if perRead > bound {
		t.Errorf("a 1 MiB read of a %d-byte section allocates %d bytes, want at most %d", f.Size(), perRead, bound)
	}
	t.Logf("%d reads, %d bytes allocated per read", reads, perRead)
}

// TestLargeSectionIsBigTIFF checks that a plane past 4 GiB becomes a
// BigTIFF that libtiff accepts: the file is written sparse (headers and
// IFD through ReadAt, the pixel data a hole of zeros, which is what its
// missing chunks read as).
func TestLargeSectionIsBigTIFF(t *testing.T) {
	for _, tool := range []string{"tiffinfo", "tiffdump"} {
		testenv.LookPath(t, tool, "apt-get install -y libtiff-tools")
	}
	g := Grid{Shape: []int64{70000, 70000, 2}, Chunk: []int64{1024, 1024, 1}, Type: Uint8}
	v, err := New(g, &memChunks{fill: []byte{0}})
	if err != nil {
		t.Fatal(err)
	}
	sec := v.Sections.File(1)
	vol, _ := v.Lookup(VolumeTIFF)
	for _, f := range []File{sec, vol} {
		tf := f.(*tiffFile)
		if !tf.big {
			t.Fatalf("%s of %d bytes is not BigTIFF", f.Name(), f.Size())
		}
		head := make([]byte, tf.dataAt)
		if _, err := f.ReadAt(context.Background(), head, 0); err != nil {
			t.Fatal(err)
		}
		// Check one pixel read too: the last byte is a missing chunk's fill.
		last := []byte{1}
		if _, err := f.ReadAt(context.Background(), last, f.Size()-1); err != nil || last[0] != 0 {
			t.Fatalf("%s: last byte = %d, %v; want 0", f.Name(), last[0], err)
		}
		path := filepath.Join(t.TempDir(), f.Name())
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(head); err != nil {
			t.Fatal(err)
		}
		if err := out.Truncate(f.Size()); err != nil {
			t.Skipf("no sparse file of %d bytes here: %v", f.Size(), err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"tiffinfo", "tiffdump"} {
			got, err := exec.Command(tool, path).CombinedOutput()
			if err != nil || strings.Contains(string(got), "Error") {
				t.Errorf("%s %s: %v\n%s", tool, f.Name(), err, got)
			}
			if tool == "tiffinfo" && !strings.Contains(string(got), "Image Width: 70000 Image Length: 70000") {
				t.Errorf("tiffinfo %s: no 70000 x 70000 image in\n%s", f.Name(), got)
			}
		}
		if binary.LittleEndian.Uint16(head[2:]) != 43 {
			t.Errorf("%s: version %d, want 43 (BigTIFF)", f.Name(), binary.LittleEndian.Uint16(head[2:]))
		}
	}
	// A volume.tif under 4 GiB stays classic.
	g.Shape = []int64{1000, 1000, 2}
	v, err = New(g, &memChunks{fill: []byte{0}})
	if err != nil {
		t.Fatal(err)
	}
	if vol, _ := v.Lookup(VolumeTIFF); vol.(*tiffFile).big {
		t.Errorf("a %d-byte volume.tif is BigTIFF", vol.Size())
	}
}

// BenchmarkSectionRead reads one section of the 20000 x 20000 x 100 volume
// from chunks already in memory (the cache-hit path), in reads of the
// given size; it measures the mapping and copy, not fetch or decode.
func BenchmarkSectionRead(b *testing.B) {
	for _, tc := range []struct {
		typ       SampleType
		bigEndian bool
		read      int
	}{
		{Uint8, false, 128 << 10},
		{Uint8, false, 1 << 20},
		{Uint16, false, 1 << 20},
		{Float32, true, 1 << 20}, // N5: byte swapping
	} {
		endian := "le"
		if tc.bigEndian {
			endian = "be"
		}
		b.Run(fmt.Sprintf("%v-%s-%dKiB", tc.typ, endian, tc.read>>10), func(b *testing.B) {
			g, chunks := bigGrid(tc.typ, tc.bigEndian)
			v, err := New(g, chunks)
			if err != nil {
				b.Fatal(err)
			}
			f := v.Sections.File(50)
			// One band of 64 rows per iteration: a section is 400 MB+.
			band := int64(64) * g.Shape[0] * int64(tc.typ.Size())
			buf := make([]byte, tc.read)
			b.SetBytes(band)
			b.ReportAllocs()
			start := f.Size() - 10*band
			for i := 0; b.Loop(); i++ {
				at := start + int64(i%10)*band
				for off := at; off < at+band; off += int64(len(buf)) {
					if _, err := f.ReadAt(context.Background(), buf, off); err != nil && !errors.Is(err, io.EOF) {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestConcurrentReads reads one set of views from several goroutines at
// once (as FUSE serves requests) and compares every read with a sequential
// read; run with -race.
func TestConcurrentReads(t *testing.T) {
	c := viewCase{shape: []int64{45, 37, 11}, chunk: []int64{16, 16, 4}, channels: 2, typ: Uint16,
		kind: clipped, missing: true}
	ref := make([]byte, 45*37*11*2*2)
	for i := range ref {
		ref[i] = byte(i*31 + i>>8)
	}
	chunks := buildChunks(c, ref)
	v, err := New(c.grid(), chunks)
	if err != nil {
		t.Fatal(err)
	}
	files := append([]File{}, v.Files...)
	files = append(files, v.Sections.File(3), v.Slabs.File(v.Slabs.Len()-1))
	want := make([][]byte, len(files))
	for i, f := range files {
		want[i] = readAll(t, f)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 100 {
				i := rng.IntN(len(files))
				f := files[i]
				off := rng.Int64N(f.Size())
				buf := make([]byte, 1+rng.Int64N(min(f.Size()-off, 20000)))
				n, err := f.ReadAt(context.Background(), buf, off)
				if err != nil && err != io.EOF {
					errs <- err
					return
				}
				if !bytes.Equal(buf[:n], want[i][off:off+int64(n)]) || n != len(buf) {
					errs <- fmt.Errorf("%s: ReadAt(%d, %d) = %d bytes, differs", f.Name(), off, len(buf), n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBatchedReads reads every view of every case with batches of at most
// 1, 2, 3 and 7 chunks, so that reads split into batches of row pieces and
// into column windows of rows too wide for one batch, and compares 200
// random reads with the sequential read of the unsplit views. No batch
// may ask for more chunks than the limit, and no read may ask for a chunk
// more often than once per row it needs it in (the windows of a wide run
// ask once for every row of the run).
func TestBatchedReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range viewCases {
		_, ref := genReference(t, c, t.TempDir())
		whole, err := newViews(c.grid(), buildChunks(c, ref), options{forceBigTIFF: c.bigTIFF})
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 2, 3, 7} {
			chunks := &limitChunks{memChunks: buildChunks(c, ref), limit: limit}
			v, err := newViews(c.grid(), chunks, options{forceBigTIFF: c.bigTIFF, batchChunks: limit})
			if err != nil {
				t.Fatal(err)
			}
			files := append([]File{}, v.Files...)
			files = append(files, v.Sections.File(0), v.Sections.File(v.Sections.Len()-1))
			for _, f := range files {
				want := readAll(t, mustLookup(t, whole, f))
				if got := readAll(t, f); !bytes.Equal(got, want) {
					t.Fatalf("%s, limit %d: %s differs from the unsplit read", c.name, limit, f.Name())
				}
				for range 200 {
					off := rng.Int64N(f.Size())
					n := 1 + rng.Int64N(f.Size()-off)
					buf := make([]byte, n)
					chunks.record(true)
					if _, err := f.ReadAt(context.Background(), buf, off); err != nil && err != io.EOF {
						t.Fatalf("%s, limit %d: %s: ReadAt(%d, %d): %v", c.name, limit, f.Name(), off, n, err)
					}
					asked := chunks.record(false)
					if !bytes.Equal(buf, want[off:off+n]) {
						t.Fatalf("%s, limit %d: %s: ReadAt(%d, %d) differs", c.name, limit, f.Name(), off, n)
					}
					// ChunksAt names the chunks the batches asked for, in turn.
					if got := ChunksAt(f, off, n, 1<<20); fmt.Sprint(got) != fmt.Sprint(asked) {
						t.Fatalf("%s, limit %d: %s: ChunksAt(%d, %d) = %v, the read asked for %v", c.name, limit, f.Name(), off, n, got, asked)
					}
				}
				if got := ChunksAt(f, 0, f.Size(), 5); len(got) > 5 {
					t.Errorf("%s: ChunksAt(limit 5) returned %d chunks", f.Name(), len(got))
				}
			}
			if chunks.over.Load() {
				t.Errorf("%s, limit %d: a batch asked for more chunks than the limit", c.name, limit)
			}
		}
	}
}

// limitChunks records whether a batch passed its limit, and the chunks
// asked for while recording.
type limitChunks struct {
	*memChunks
	limit int
	over  atomic.Bool

	mu        sync.Mutex
	recording bool
	asked     [][]int64 // GUARDED_BY(mu)
}

func (c *limitChunks) Get(ctx context.Context, coords [][]int64) ([]Chunk, error) {
	if len(coords) > c.limit {
		c.over.Store(true)
	}
	c.mu.Lock()
	if c.recording {
		c.asked = append(c.asked, coords...)
	}
	c.mu.Unlock()
	return c.memChunks.Get(ctx, coords)
}

// record starts (on) or ends recording, and returns what was recorded.
func (c *limitChunks) record(on bool) [][]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	asked := c.asked
	c.recording, c.asked = on, nil
	return asked
}

// mustLookup returns the file of v named as f (a Files entry or a section).
func mustLookup(t *testing.T, v *Views, f File) File {
	t.Helper()
	if g, ok := v.Lookup(f.Name()); ok {
		return g
	}
	if g, ok := v.Sections.Lookup(f.Name()); ok {
		return g
	}
	t.Fatalf("no %s", f.Name())
	return nil
}

// TestHugeGeometry reads the views of arrays whose geometry is extreme
// (issue 16: 2^26 and 2^40 one-sample rows, a 2^23-sample row of
// one-sample chunks) and checks that a read's allocations are bounded by
// the read, not by the array: the TIFF strip arrays are generated per
// byte range, a batch holds at most maxBatchChunks chunks, and a plane
// TIFF cannot describe has no TIFF views.
func TestHugeGeometry(t *testing.T) {
	one := ChunkLayout{Strides: []int64{1, 1}, Extent: []int64{1, 1}}
	for _, tc := range []struct {
		name      string
		shape     []int64
		file      string
		off, n    int64
		tiff      bool
		maxAlloc  uint64
		maxChunks int
	}{
		{"2^26 rows, volume.tif header", []int64{1, 1 << 26}, VolumeTIFF, 0, 4096, true, 1 << 20, 0},
		{"2^26 rows, volume.tif strip arrays", []int64{1, 1 << 26}, VolumeTIFF, 300 << 20, 128 << 10, true, 1 << 20, 0},
		{"2^26 rows, volume.tif pixels", []int64{1, 1 << 26}, VolumeTIFF, 1<<29 + 1<<26 - 1<<20, 128 << 10, true, 48 << 20, 128 << 10},
		{"2^40 rows, volume.raw", []int64{1, 1 << 40}, VolumeRaw, 1 << 39, 4096, false, 4 << 20, 4096},
		// 131072 one-byte chunks in 32 batches: about 256 bytes of
		// bookkeeping each, a batch's worth held at once.
		{"2^23 columns, volume.raw", []int64{1 << 23, 1}, VolumeRaw, 1 << 20, 128 << 10, true, 48 << 20, 128 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Grid{Shape: tc.shape, Chunk: []int64{1, 1}, Type: Uint8}
			chunks := &countChunks{constChunks: constChunks{data: []byte{7}, fill: []byte{0}, layout: one}}
			v, err := New(g, chunks)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := v.Lookup(VolumeTIFF); ok != tc.tiff || (v.Sections.Len() > 0) != tc.tiff || (len(v.Refused) == 0) != tc.tiff {
				t.Fatalf("volume.tif %v, %d sections, refused %q; want TIFF views %v", ok, v.Sections.Len(), v.Refused, tc.tiff)
			}
			f, ok := v.Lookup(tc.file)
			if !ok {
				t.Fatalf("no %s", tc.file)
			}
			buf := make([]byte, tc.n)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if _, err := f.ReadAt(context.Background(), buf, tc.off); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if a := after.TotalAlloc - before.TotalAlloc; a > tc.maxAlloc {
				t.Errorf("ReadAt(%d, %d) allocated %d bytes, want at most %d", tc.off, tc.n, a, tc.maxAlloc)
			}
			if chunks.max.Load() > maxBatchChunks || chunks.total.Load() > int64(tc.maxChunks) {
				t.Errorf("largest batch %d chunks, %d in all; want at most %d and %d", chunks.max.Load(), chunks.total.Load(), maxBatchChunks, tc.maxChunks)
			}
			if tc.file == VolumeRaw && !bytes.Equal(buf, bytes.Repeat([]byte{7}, int(tc.n))) {
				t.Errorf("volume.raw bytes differ from the chunks'")
			}
			if len(ChunksAt(f, tc.off, 64<<20, 256)) > 256 {
				t.Errorf("ChunksAt returned more than its limit")
			}
		})
	}
}

// countChunks is constChunks that counts the chunks asked for.
type countChunks struct {
	constChunks
	max, total atomic.Int64
}

func (c *countChunks) Get(ctx context.Context, coords [][]int64) ([]Chunk, error) {
	c.total.Add(int64(len(coords)))
	if n := int64(len(coords)); n > c.max.Load() {
		c.max.Store(n)
	}
	return c.constChunks.Get(ctx, coords)
}
