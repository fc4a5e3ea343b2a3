package fs

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// Geometry of the view benchmarks: a 512 x 512 x 64 uint8 precomputed
// scale in gzip chunks of 64 x 64 x 16 (64 KiB decoded): 8 x 8 x 4 = 256
// chunks, a chunk row of 8 chunks (512 KiB), a chunk layer of 64 (4 MiB).
const (
	benchX, benchZ, benchC, benchCZ = 512, 64, 64, 16
	benchChunks                     = (benchX / benchC) * (benchX / benchC) * (benchZ / benchCZ)
	benchChunkBytes                 = benchC * benchC * benchCZ
)

// benchVolume writes the benchmark scale under a new directory.
func benchVolume(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	info := fmt.Sprintf(`{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1, "type": "image",
	 "scales": [{"key": "s0", "size": [%d, %d, %d], "voxel_offset": [0, 0, 0], "resolution": [4, 4, 40],
	 "chunk_sizes": [[%d, %d, %d]], "encoding": "raw"}]}`, benchX, benchX, benchZ, benchC, benchC, benchCZ)
	if err := os.MkdirAll(filepath.Join(dir, "s0"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "info"), []byte(info), 0o644); err != nil {
		b.Fatal(err)
	}
	raw := make([]byte, benchChunkBytes)
	for z := 0; z < benchZ; z += benchCZ {
		for y := 0; y < benchX; y += benchC {
			for x := 0; x < benchX; x += benchC {
				for i := range raw {
					raw[i] = byte(i*7 + x + 3*y + 5*z)
				}
				var buf bytes.Buffer
				w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
				w.Write(raw)
				w.Close()
				name := fmt.Sprintf("%d-%d_%d-%d_%d-%d.gz", x, x+benchC, y, y+benchC, z, z+benchCZ)
				if err := os.WriteFile(filepath.Join(dir, "s0", name), buf.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	return dir
}

func benchViewTree(b *testing.B, dir string, cacheBytes int64) *Tree {
	b.Helper()
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	t, err := New(context.Background(), src, Options{CacheBytes: cacheBytes, Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// readFile reads the file at p whole in reads of len(buf), as the kernel
// sends them, and returns its size.
func readFile(b *testing.B, t *Tree, p string, buf []byte) int64 {
	b.Helper()
	n, err := t.Resolve(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	f := n.(File)
	for off := int64(0); off < f.Size(); off += int64(len(buf)) {
		if _, err := f.ReadAt(context.Background(), buf, off); err != nil {
			b.Fatal(err)
		}
	}
	return f.Size()
}

// BenchmarkViewsWalk reads every section in z order, in 1 MiB reads, with
// a cold cache per pass, and reports the amplification: chunks decoded
// (cache misses) per chunk of the volume. With a cache that holds one
// chunk layer it is 1; with room for about one chunk row, every plane
// decodes its chunks again, so each chunk is decoded once per plane it
// covers (benchCZ = 16 times).
func BenchmarkViewsWalk(b *testing.B) {
	dir := benchVolume(b)
	for _, tc := range []struct {
		name  string
		cache int64
	}{
		{"cache=layer", 2 * benchChunks / (benchZ / benchCZ) * benchChunkBytes},
		{"cache=row", 2 * (benchX / benchC) * benchChunkBytes},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 1<<20)
			b.SetBytes(benchX * benchX * benchZ)
			b.ReportAllocs()
			var misses int64
			for b.Loop() {
				t := benchViewTree(b, dir, tc.cache)
				for z := range benchZ {
					readFile(b, t, fmt.Sprintf("s0/sections/z%02d.tif", z), buf)
				}
				misses += t.store.Cache().Stats().Misses
			}
			b.ReportMetric(float64(misses)/float64(b.N)/benchChunks, "decodes/chunk")
		})
	}
}

// BenchmarkViewsRead reads, with a cold cache per pass and in 1 MiB reads,
// one section against the chunks under it read one by one, and
// volume.raw against every chunk read one by one: the cost of stitching
// over the cost of decoding.
func BenchmarkViewsRead(b *testing.B) {
	dir := benchVolume(b)
	var layer, all []string // the chunks under section z20, every chunk
	for z := 0; z < benchZ; z += benchCZ {
		for y := 0; y < benchX; y += benchC {
			for x := 0; x < benchX; x += benchC {
				name := fmt.Sprintf("s0/%d-%d_%d-%d_%d-%d", x, x+benchC, y, y+benchC, z, z+benchCZ)
				all = append(all, name)
				if z == 16 {
					layer = append(layer, name)
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		files []string
	}{
		{"section", []string{"s0/sections/z20.tif"}},
		{"section-chunks", layer},
		{"volume.raw", []string{"s0/volume.raw"}},
		{"volume-chunks", all},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 1<<20)
			b.ReportAllocs()
			var size int64
			for b.Loop() {
				t := benchViewTree(b, dir, DefaultCacheBytes)
				size = 0
				for _, f := range tc.files {
					size += readFile(b, t, f, buf)
				}
			}
			b.SetBytes(size)
		})
	}
}

// BenchmarkViewsRecord reads volume.raw warm (every chunk in memory) in
// 1 MiB reads, through a handle, which notes each chunk's version in its
// record (chunkrecord.go), against ReadAt, which notes none: the cost of
// one version per chunk on the read that costs least otherwise. It also
// reports RecordCurrent's cost per chunk, the check of a view's open.
func BenchmarkViewsRecord(b *testing.B) {
	dir := benchVolume(b)
	t := benchViewTree(b, dir, DefaultCacheBytes)
	buf := make([]byte, 1<<20)
	ctx := context.Background()
	n, err := t.Resolve(ctx, "s0/volume.raw")
	if err != nil {
		b.Fatal(err)
	}
	f := n.(File)
	readFile(b, t, "s0/volume.raw", buf) // warm
	b.Run("readat", func(b *testing.B) {
		b.SetBytes(f.Size())
		for b.Loop() {
			readFile(b, t, "s0/volume.raw", buf)
		}
	})
	b.Run("handle", func(b *testing.B) {
		b.SetBytes(f.Size())
		for b.Loop() {
			h, err := t.Open(ctx, f, "s0/volume.raw", 1)
			if err != nil {
				b.Fatal(err)
			}
			for off := int64(0); off < f.Size(); off += int64(len(buf)) {
				if _, err := h.Read(ctx, buf, off); err != nil {
					b.Fatal(err)
				}
			}
			h.Close()
		}
	})
	b.Run("current", func(b *testing.B) {
		h, err := t.Open(ctx, f, "s0/volume.raw", 1)
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		if _, err := h.Read(ctx, make([]byte, f.Size()), 0); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if !t.RecordCurrent(ctx, h.rec) {
				b.Fatal("a warm view's record is not current")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchChunks, "ns/chunk")
	})
}
