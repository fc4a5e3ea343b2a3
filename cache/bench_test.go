package cache

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// BenchmarkChurnHeap fills a cache of the default size (512 MiB) with
// 1 MiB chunks and keeps replacing them (twice the budget per op),
// reporting the peak heap against the cache size, with no memory limit and
// with MemoryLimit's.
func BenchmarkChurnHeap(b *testing.B) {
	const budget = 512 << 20
	for _, tc := range []struct {
		name  string
		limit int64
	}{
		{"no-limit", math.MaxInt64},
		{"volfs-limit", MemoryLimit(budget)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(tc.limit))
			runtime.GC()
			var ms runtime.MemStats
			peak := uint64(0)
			c := New(Options{MaxBytes: budget})
			key := 0
			for b.Loop() {
				for range 2 * budget / (1 << 20) {
					key++
					c.Get(context.Background(), fmt.Sprint(key), func(context.Context) ([]byte, error) {
						return make([]byte, 1<<20), nil
					})
					if key%16 == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapAlloc)
					}
				}
			}
			b.ReportMetric(float64(peak)/budget, "peak-heap/cache")
		})
	}
}
