package cache

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkReadAhead reads 16 chunks in order, one at a time, as `cat` of
// the chunk files would: for each, Store.GetHit, then a copy-out of the
// decoded bytes (what a FUSE read does), with read-ahead off and on (a
// Tracker feeding Store.Prefetch). Both modes run side by side in each
// iteration, on a fresh store each, and the benchmark reports the time per
// pass of each and on/off.
func BenchmarkReadAhead(b *testing.B) {
	const n = 16
	for _, d := range decoders(b) {
		if d.name == "none" {
			continue
		}
		b.Run(d.name, func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprint(i)
			}
			load := func(int) Loader {
				return func(context.Context) ([]byte, error) { return d.decode() }
			}
			out := make([]byte, chunkBytes)
			pass := func(readAhead bool) time.Duration {
				s := NewStore(Options{MaxBytes: 64 * chunkBytes})
				defer s.Close()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				tr := NewTracker(TrackerConfig{Len: n, ChunkBytes: chunkBytes, MaxBytes: 8 * chunkBytes})
				start := time.Now()
				for pos := range n {
					v, hit, err := s.GetHit(ctx, keys[pos], load(pos))
					if err != nil {
						b.Fatal(err)
					}
					if readAhead {
						adv := tr.Touch(int64(pos), !hit)
						ahead := make([]string, len(adv.Prefetch))
						for i, p := range adv.Prefetch {
							ahead[i] = keys[p]
						}
						s.Prefetch(ctx, ahead, load)
					}
					copy(out, v)
				}
				return time.Since(start)
			}
			var off, on time.Duration
			b.SetBytes(2 * n * chunkBytes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					off += pass(false)
					on += pass(true)
				} else {
					on += pass(true)
					off += pass(false)
				}
				i++
			}
			b.ReportMetric(float64(off.Microseconds())/1e3/float64(i), "off-ms")
			b.ReportMetric(float64(on.Microseconds())/1e3/float64(i), "on-ms")
			b.ReportMetric(float64(off)/float64(on), "off/on")
		})
	}
}
