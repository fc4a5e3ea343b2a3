package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs/view"
)

// TestViewsPrecomputed reads volume.raw and the sections of the 5x4x2 test
// layer: chunk 0-4 holds 1..32 (x fastest), chunk 4-5 is missing (zeros).
func TestViewsPrecomputed(t *testing.T) {
	tree, _ := newTree(t, layerFiles(t), Options{})
	want := make([]byte, 5*4*2)
	c := chunk0()
	for z := range 2 {
		for y := range 4 {
			for x := range 4 {
				want[z*20+y*5+x] = c[z*16+y*4+x]
			}
		}
	}
	got, err := readAll(t, tree, "layer/s0/volume.raw")
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("volume.raw: got %v, %v, want %v", got, err, want)
	}
	s0, err := tree.Resolve(context.Background(), "layer/s0/sections")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names(t, s0.(Dir)), " "), "z0.tif z1.tif"; got != want {
		t.Errorf("sections: got %q, want %q", got, want)
	}
	// The pixels of a one-page TIFF are its last bytes.
	for z, name := range []string{"z0.tif", "z1.tif"} {
		got, err := readAll(t, tree, "layer/s0/sections/"+name)
		if err != nil || !bytes.HasSuffix(got, want[z*20:(z+1)*20]) {
			t.Errorf("%s: got %v, %v, want pixels %v at the end", name, got, err, want[z*20:(z+1)*20])
		}
	}
	if _, err := tree.Resolve(context.Background(), "layer/s0/sections/z2.tif"); tree.Errno(context.Background(), err, "lookup", "z2.tif") != syscall.ENOENT {
		t.Errorf("sections/z2.tif: got %v, want not found", err)
	}
}

// zarrFiles is a 3x2x5 (z, y, x) "<i2" zarr array in chunks of 2x2x3, C
// order, uncompressed, fill 7: element (z, y, x) holds 100z + 10y + x,
// chunk 1.0.1 is missing and chunk 1.0.0 is corrupt (too short).
func zarrFiles(t *testing.T) map[string][]byte {
	t.Helper()
	meta := `{"zarr_format": 2, "shape": [3, 2, 5], "chunks": [2, 2, 3], "dtype": "<i2", "order": "C",
		"compressor": null, "fill_value": 7, "filters": null}`
	files := map[string][]byte{"arr/.zarray": []byte(meta), "arr/1.0.0": []byte("short")}
	for _, cz := range []int{0} {
		for _, cx := range []int{0, 1} {
			var b bytes.Buffer
			for z := cz * 2; z < cz*2+2; z++ {
				for y := range 2 {
					for x := cx * 3; x < cx*3+3; x++ {
						binary.Write(&b, binary.LittleEndian, int16(100*z+10*y+x))
					}
				}
			}
			files["arr/0.0."+string(rune('0'+cx))] = b.Bytes()
		}
	}
	return files
}

// TestViewsZarr reads a zarr array's views from its own directory: x is
// the last metadata axis, missing chunks read as the fill value, and a
// corrupt chunk fails only the reads that touch it.
func TestViewsZarr(t *testing.T) {
	tree, _ := newTree(t, zarrFiles(t), Options{})
	ctx := context.Background()
	arr, err := tree.Resolve(ctx, "arr")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names(t, arr.(Dir)), " "), ".zarray .zarray.orig volume.tif volume.raw volume.nhdr volume.mhd sections slabs 0.0.0 0.0.1 1.0.0 1.0.1"; got != want {
		t.Errorf("arr lists %q, want %q", got, want)
	}
	n, err := tree.Resolve(ctx, "arr/volume.raw")
	if err != nil {
		t.Fatal(err)
	}
	f := n.(File)
	if f.Size() != 3*2*5*2 {
		t.Fatalf("volume.raw: size %d, want %d", f.Size(), 3*2*5*2)
	}
	// Planes z=0 and z=1 are stored; z=2 lies in the corrupt chunk 1.0.0
	// (x 0-2) and the missing chunk 1.0.1 (x 3-4, fill 7).
	got := make([]byte, 2*2*5*2)
	if k, err := f.ReadAt(ctx, got, 0); err != nil || k != len(got) {
		t.Fatalf("volume.raw planes 0-1: %d, %v", k, err)
	}
	for i := range 20 {
		z, y, x := i/10, i/5%2, i%5
		if v := int16(binary.LittleEndian.Uint16(got[2*i:])); v != int16(100*z+10*y+x) {
			t.Errorf("volume.raw (%d, %d, %d) = %d, want %d", z, y, x, v, 100*z+10*y+x)
		}
	}
	// x 3-4 of plane 2 read as the fill value: its batch holds only the
	// missing chunk.
	tail := make([]byte, 4)
	if _, err := f.ReadAt(ctx, tail, 2*10*2+3*2); err != nil || !bytes.Equal(tail, []byte{7, 0, 7, 0}) {
		t.Errorf("plane 2, x 3-4: got %v, %v, want the fill 7, 7", tail, err)
	}
	_, err = f.ReadAt(ctx, make([]byte, 2), 2*10*2)
	if err == nil || tree.Errno(ctx, err, "read", "arr/volume.raw") != syscall.EIO || !strings.Contains(err.Error(), "arr/1.0.0") {
		t.Errorf("plane 2, x 0: got %v, want EIO naming arr/1.0.0", err)
	}
	if !errors.Is(err, decode.ErrCorrupt) {
		t.Errorf("plane 2, x 0: %v does not wrap decode.ErrCorrupt", err)
	}
}

// TestViewsRefused: a 1-D array and a bool array have no views, and their
// directories list only their chunks.
func TestViewsRefused(t *testing.T) {
	tree, _ := newTree(t, map[string][]byte{
		"line/.zarray": []byte(`{"zarr_format": 2, "shape": [10], "chunks": [5], "dtype": "<i2", "order": "C", "compressor": null, "fill_value": 0, "filters": null}`),
		"mask/.zarray": []byte(`{"zarr_format": 2, "shape": [4, 4], "chunks": [4, 4], "dtype": "|b1", "order": "C", "compressor": null, "fill_value": false, "filters": null}`),
	}, Options{})
	for dir, want := range map[string]string{"line": ".zarray .zarray.orig 0 1", "mask": ".zarray .zarray.orig 0.0"} {
		d, err := tree.Resolve(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(names(t, d.(Dir)), " "); got != want {
			t.Errorf("%s lists %q, want %q", dir, got, want)
		}
		if _, err := tree.Resolve(context.Background(), dir+"/"+view.VolumeRaw); err == nil {
			t.Errorf("%s has a %s", dir, view.VolumeRaw)
		}
	}
}

// countingFetcher counts the requests that reach its source.
type countingFetcher struct {
	fetcher.Fetcher
	n atomic.Int64
}

func (f *countingFetcher) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	f.n.Add(1)
	return f.Fetcher.Get(ctx, key, limit)
}

func (f *countingFetcher) GetRange(ctx context.Context, key string, off, n int64) ([]byte, fetcher.Identity, error) {
	f.n.Add(1)
	return f.Fetcher.GetRange(ctx, key, off, n)
}

func (f *countingFetcher) Stat(ctx context.Context, key string) (int64, fetcher.Identity, error) {
	f.n.Add(1)
	return f.Fetcher.Stat(ctx, key)
}

func (f *countingFetcher) List(ctx context.Context, prefix string) ([]fetcher.Entry, error) {
	f.n.Add(1)
	return f.Fetcher.List(ctx, prefix)
}

// TestViewsStatNoIO lists and sizes every view of a zarr array once its
// directory is open: no request reaches the source.
func TestViewsStatNoIO(t *testing.T) {
	local, err := fetcher.Open(writeFiles(t, zarrFiles(t)), fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &countingFetcher{Fetcher: local}
	tree, err := New(context.Background(), src, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	arr, err := tree.Resolve(ctx, "arr")
	if err != nil {
		t.Fatal(err)
	}
	before := src.n.Load()
	sizes := map[string]int64{}
	var walk func(d Dir, p string)
	walk = func(d Dir, p string) {
		for _, name := range names(t, d) {
			n, err := d.Lookup(ctx, name)
			if err != nil {
				t.Fatalf("%s/%s: %v", p, name, err)
			}
			switch n := n.(type) {
			case *viewDir:
				walk(n, p+"/"+name)
			case File:
				sizes[p+"/"+name] = n.Size()
			}
		}
	}
	walk(arr.(Dir), "arr")
	if got := src.n.Load() - before; got != 0 {
		t.Errorf("listing and sizing the views made %d requests, want 0", got)
	}
	// 3 planes of 2 x 5 int16; slabs of 2 and 1 planes. Files: the
	// metadata (2), views (4), chunks (4), sections (3) and slabs (6).
	for p, want := range map[string]int64{"arr/volume.raw": 60, "arr/slabs/z0-1.raw": 40, "arr/slabs/z2-2.raw": 20} {
		if sizes[p] != want {
			t.Errorf("%s: size %d, want %d", p, sizes[p], want)
		}
	}
	if n := len(sizes); n != 2+4+4+3+6 {
		t.Errorf("%d files, want %d: %v", n, 2+4+4+3+6, sizes)
	}
}

// TestViewsCancelled: a view read whose request is cancelled fails with
// EINTR and loads nothing.
func TestViewsCancelled(t *testing.T) {
	tree, _ := newTree(t, zarrFiles(t), Options{})
	n, err := tree.Resolve(context.Background(), "arr/volume.raw")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = n.(File).ReadAt(ctx, make([]byte, 60), 0)
	if got := tree.Errno(ctx, err, "read", "arr/volume.raw"); got != syscall.EINTR {
		t.Errorf("cancelled read: got %v (%v), want EINTR", got, err)
	}
	if s := tree.store.Cache().Stats(); s.Misses != 0 {
		t.Errorf("cancelled read loaded %d chunks, want 0", s.Misses)
	}
}
