package disk

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes a Cache's counters as Prometheus metrics (names under
// volfs_disk_cache_), read at each scrape. The caller registers it.
type Collector struct {
	c       *Cache
	metrics []metric
}

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(Stats) int64
}

// NewCollector returns a collector of c.
func NewCollector(c *Cache) *Collector {
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	m := func(name, help string, kind prometheus.ValueType, value func(Stats) int64) metric {
		return metric{prometheus.NewDesc(name, help, nil, nil), kind, value}
	}
	return &Collector{c: c, metrics: []metric{
		m("volfs_disk_cache_hits_total", "Objects read from the disk cache.", counter, func(s Stats) int64 { return s.Hits }),
		m("volfs_disk_cache_misses_total", "Disk cache lookups that found nothing usable.", counter, func(s Stats) int64 { return s.Misses }),
		m("volfs_disk_cache_puts_total", "Objects written to the disk cache.", counter, func(s Stats) int64 { return s.Puts }),
		m("volfs_disk_cache_evictions_total", "Files deleted to stay within the disk cache's bound.", counter, func(s Stats) int64 { return s.Evictions }),
		m("volfs_disk_cache_corrupt_total", "Disk cache files found damaged, forged or not regular files, and deleted.", counter, func(s Stats) int64 { return s.Corrupt }),
		m("volfs_disk_cache_stale_total", "Disk cache entries made from another version of the source, deleted.", counter, func(s Stats) int64 { return s.Stale }),
		m("volfs_disk_cache_errors_total", "Disk cache writes and deletions that failed.", counter, func(s Stats) int64 { return s.Errors }),
		m("volfs_disk_cache_bytes", "Bytes of files in the disk cache.", gauge, func(s Stats) int64 { return s.Bytes }),
		m("volfs_disk_cache_files", "Files in the disk cache.", gauge, func(s Stats) int64 { return s.Files }),
	}}
}

// Describe implements prometheus.Collector.
func (col *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range col.metrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector.
func (col *Collector) Collect(ch chan<- prometheus.Metric) {
	s := col.c.Stats()
	for _, m := range col.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, float64(m.value(s)))
	}
}
