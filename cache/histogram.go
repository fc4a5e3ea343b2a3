package cache

import "sync/atomic"

// batchBuckets are the upper bounds of the batch-size histogram, in loads:
// the k of BenchmarkGate and one bucket above.
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64}

// batchHistogram counts batch sizes without a lock, for the collector.
type batchHistogram struct {
	counts [8]atomic.Int64 // per bucket of batchBuckets, then +Inf
	sum    atomic.Int64
	n      atomic.Int64
}

func (h *batchHistogram) observe(size int) {
	i := len(batchBuckets)
	for j, ub := range batchBuckets {
		if float64(size) <= ub {
			i = j
			break
		}
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(size))
	h.n.Add(1)
}

// snapshot returns the cumulative counts by upper bound, the count and sum,
// as prometheus.MustNewConstHistogram takes them.
func (h *batchHistogram) snapshot() (buckets map[float64]uint64, count uint64, sum float64) {
	buckets = make(map[float64]uint64, len(batchBuckets))
	var cum uint64
	for j, ub := range batchBuckets {
		cum += uint64(h.counts[j].Load())
		buckets[ub] = cum
	}
	return buckets, uint64(h.n.Load()), float64(h.sum.Load())
}
