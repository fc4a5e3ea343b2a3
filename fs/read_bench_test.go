package fs

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkChunkReadHit reads every chunk file of the benchmark volume
// (benchVolume), each looked up by path and read in 1 MiB reads, from a
// warm memory cache: the read path of a chunk already decoded (lookup,
// the chunk store's key, the copy out), where the recipe fingerprint in
// the key is paid on every lookup. BenchmarkViewsRead's volume-chunks is
// the same reads from a cold cache: the load path, where a load's pins
// are.
func BenchmarkChunkReadHit(b *testing.B) {
	dir := benchVolume(b)
	var all []string
	for z := 0; z < benchZ; z += benchCZ {
		for y := 0; y < benchX; y += benchC {
			for x := 0; x < benchX; x += benchC {
				all = append(all, fmt.Sprintf("s0/%d-%d_%d-%d_%d-%d", x, x+benchC, y, y+benchC, z, z+benchCZ))
			}
		}
	}
	t := benchViewTree(b, dir, DefaultCacheBytes)
	buf := make([]byte, 1<<20) // the FUSE adapter's largest read
	var size int64
	for _, f := range all {
		size += readFile(b, t, f, buf)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range all {
			readFile(b, t, f, buf)
		}
	}
}

// BenchmarkChunkLookup looks up every chunk file of the benchmark volume
// by name in its key directory, without reading any: what a listing with
// attributes (serve's PROPFIND, a READDIRPLUS) costs per entry. A lookup
// makes no loader (chunkFile.loader: made at the first read).
func BenchmarkChunkLookup(b *testing.B) {
	dir := benchVolume(b)
	t := benchViewTree(b, dir, DefaultCacheBytes)
	n, err := t.Resolve(context.Background(), "s0")
	if err != nil {
		b.Fatal(err)
	}
	d := n.(Dir)
	l, err := d.List(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for i := range l.Len() {
		if name, isDir := l.Entry(i); !isDir {
			names = append(names, name)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, name := range names {
			if _, err := d.Lookup(context.Background(), name); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(names)), "ns/lookup")
}
