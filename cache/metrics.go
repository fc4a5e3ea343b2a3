package cache

import "github.com/prometheus/client_golang/prometheus"

// metric is one series of the collector: how to read its value.
type metric struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	labels []string
	value  func() float64
}

// Collector exposes the counters of a Store and a read-ahead Budget as
// Prometheus metrics (names under volfs_; the disk cache has its own,
// disk.NewCollector). It reads them at each scrape; nothing is registered
// globally: the caller registers it.
type Collector struct {
	metrics []metric
	store   *Store
	batches *prometheus.Desc
}

// NewCollector returns a collector of whichever of s and b are not nil.
func NewCollector(s *Store, b *Budget) *Collector {
	col := &Collector{store: s}
	add := func(name, help string, kind prometheus.ValueType, value func() float64, labels ...string) {
		var names []string
		for i := 0; i < len(labels); i += 2 {
			names = append(names, labels[i])
		}
		var values []string
		for i := 1; i < len(labels); i += 2 {
			values = append(values, labels[i])
		}
		col.metrics = append(col.metrics, metric{prometheus.NewDesc(name, help, names, nil), kind, values, value})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	if s != nil {
		cs := func(f func(Stats) int64) func() float64 {
			return func() float64 { return float64(f(s.c.Stats())) }
		}
		add("volfs_cache_hits_total", "Chunk reads answered from memory.", counter, cs(func(s Stats) int64 { return s.Hits }))
		add("volfs_cache_misses_total", "Chunk reads that started a load.", counter, cs(func(s Stats) int64 { return s.Misses }))
		add("volfs_cache_shared_total", "Chunk reads that joined a load in flight.", counter, cs(func(s Stats) int64 { return s.Shared }))
		add("volfs_cache_evictions_total", "Chunks dropped from memory to stay within the bound.", counter, cs(func(s Stats) int64 { return s.Evictions }))
		add("volfs_cache_recycled_total", "Chunks whose memory was given back for reuse once nothing could read them.", counter, cs(func(s Stats) int64 { return s.Recycled }))
		add("volfs_cache_abandoned_total", "Loads cancelled because every waiter left.", counter, cs(func(s Stats) int64 { return s.Abandoned }))
		add("volfs_cache_bytes", "Bytes of chunks held in memory.", gauge, cs(func(s Stats) int64 { return s.Bytes }))
		add("volfs_cache_probation_bytes", "Bytes of prefetched chunks held in memory and not read yet.", gauge, cs(func(s Stats) int64 { return s.ProbationBytes }))
		add("volfs_prefetch_issued_total", "Chunk loads started by prefetches.", counter, cs(func(s Stats) int64 { return s.PrefetchIssued }))
		add("volfs_prefetch_used_total", "Prefetched chunks a reader then read.", counter, cs(func(s Stats) int64 { return s.PrefetchUsed }))
		add("volfs_prefetch_wasted_total", "Prefetched chunks evicted or cancelled before any reader came.", counter, cs(func(s Stats) int64 { return s.PrefetchWasted }))
		add("volfs_prefetch_dropped_total", "Prefetches not started because the pool's queue was full.", counter, func() float64 { return float64(s.prefetchDropped.Load()) })
		add("volfs_prefetch_throttled_total", "Prefetch loads that decoded in a CPU slot (one per core) rather than beside every other load.", counter, func() float64 { return float64(s.throttled.Load()) })
		add("volfs_prefetch_decoding", "CPU slots held by prefetch loads now.", gauge, func() float64 { return float64(len(s.cpu)) })
		add("volfs_store_batches_total", "Batches of chunk loads, by where they ran.", counter, func() float64 { return float64(s.batchesInline.Load()) }, "mode", "inline")
		add("volfs_store_batches_total", "Batches of chunk loads, by where they ran.", counter, func() float64 { return float64(s.batchesPooled.Load()) }, "mode", "pooled")
		for i, t := range s.tiers {
			ts := func(f func(TierStats) int64) func() float64 {
				return func() float64 { return float64(f(s.TierStats()[i])) }
			}
			name := t.Name()
			add("volfs_tier_hits_total", "Chunk loads served by a tier below memory.", counter, ts(func(s TierStats) int64 { return s.Hits }), "tier", name)
			add("volfs_tier_misses_total", "Chunk loads a tier below memory could not serve.", counter, ts(func(s TierStats) int64 { return s.Misses }), "tier", name)
			add("volfs_tier_writes_total", "Chunks written to a tier behind loads, by why: promoted from a lower tier or loaded from the origin.", counter, ts(func(s TierStats) int64 { return s.Promoted }), "tier", name, "from", "tier")
			add("volfs_tier_writes_total", "Chunks written to a tier behind loads, by why: promoted from a lower tier or loaded from the origin.", counter, ts(func(s TierStats) int64 { return s.Kept }), "tier", name, "from", "origin")
			add("volfs_tier_write_waits_total", "Loads that waited for a free writer of a tier (back-pressure).", counter, ts(func(s TierStats) int64 { return s.Waits }), "tier", name)
		}
		col.batches = prometheus.NewDesc("volfs_store_batch_loads", "Loads a batch had to run (chunks neither in memory nor in flight).", nil, nil)
	}
	if b != nil {
		bs := func(f func(BudgetStats) int64) func() float64 {
			return func() float64 { return float64(f(b.Stats())) }
		}
		add("volfs_readahead_issued_total", "Chunks the read-ahead trackers advised to prefetch.", counter, bs(func(s BudgetStats) int64 { return s.Issued }))
		add("volfs_readahead_used_total", "Advised chunks their reader then read.", counter, bs(func(s BudgetStats) int64 { return s.Used }))
		add("volfs_readahead_wasted_total", "Advised chunks released unread (passed, cancelled, stopped).", counter, bs(func(s BudgetStats) int64 { return s.Wasted }))
		add("volfs_readahead_exhausted_total", "Windows cut short by the global read-ahead budget.", counter, bs(func(s BudgetStats) int64 { return s.Exhausted }))
		add("volfs_readahead_cancels_total", "Advices to cancel prefetches (jumps, closes, idleness).", counter, bs(func(s BudgetStats) int64 { return s.Cancels }))
		add("volfs_readahead_bytes", "Bytes prefetched and not yet read.", gauge, bs(func(s BudgetStats) int64 { return s.Bytes }))
		add("volfs_readahead_max_bytes", "The global read-ahead budget.", gauge, bs(func(s BudgetStats) int64 { return s.Max }))
	}
	return col
}

// Describe implements prometheus.Collector.
func (col *Collector) Describe(ch chan<- *prometheus.Desc) {
	seen := make(map[*prometheus.Desc]bool)
	for _, m := range col.metrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
	if col.batches != nil {
		ch <- col.batches
	}
}

// Collect implements prometheus.Collector.
func (col *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range col.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(), m.labels...)
	}
	if col.batches != nil {
		buckets, count, sum := col.store.batchSizes.snapshot()
		ch <- prometheus.MustNewConstHistogram(col.batches, count, sum, buckets)
	}
}
