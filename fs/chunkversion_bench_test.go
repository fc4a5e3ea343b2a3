package fs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// BenchmarkChunkHandleHit opens every chunk file of the benchmark volume
// (benchVolume) as a front end does (a Handle), reads it whole in 1 MiB
// reads and closes it, from a warm memory cache: the cost per open of
// checking what memory holds (chunkversion.go). ttl=0 reads the source
// as unchanging (memory never checked); ttl=1m is a mount with
// --metadata-ttl within the TTL (each open looks up the value's record,
// no check); expired is a TTL shorter than a pass, so that every open
// checks the chunk object's identity (one stat of a local file).
func BenchmarkChunkHandleHit(b *testing.B) {
	dir := benchVolume(b)
	var all []string
	for z := 0; z < benchZ; z += benchCZ {
		for y := 0; y < benchX; y += benchC {
			for x := 0; x < benchX; x += benchC {
				all = append(all, fmt.Sprintf("s0/%d-%d_%d-%d_%d-%d", x, x+benchC, y, y+benchC, z, z+benchCZ))
			}
		}
	}
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"ttl=0", 0}, {"ttl=1m", time.Minute}, {"expired", time.Nanosecond}} {
		b.Run(c.name, func(b *testing.B) {
			src, err := fetcher.Open(dir, fetcher.Options{})
			if err != nil {
				b.Fatal(err)
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			t, err := New(context.Background(), src, Options{CacheBytes: DefaultCacheBytes, MetadataTTL: c.ttl, Log: quiet})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			buf := make([]byte, 1<<20)
			read := func() int64 {
				var size int64
				for _, p := range all {
					n, err := t.Resolve(ctx, p)
					if err != nil {
						b.Fatal(err)
					}
					h, err := t.Open(ctx, n.(File), p, 1)
					if err != nil {
						b.Fatal(err)
					}
					for off := int64(0); off < h.Size(); off += int64(len(buf)) {
						if _, err := h.ReadAt(ctx, buf, off); err != nil {
							b.Fatal(err)
						}
					}
					h.Close()
					size += h.Size()
				}
				return size
			}
			b.SetBytes(read())
			b.ReportAllocs()
			for b.Loop() {
				read()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(all)), "ns/open")
		})
	}
}
