package disk

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCollector registers a collector in a pedantic registry (which checks
// descriptions against metrics) and reads back what a few operations did.
func TestCollector(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(c)); err != nil {
		t.Fatal(err)
	}
	c.Put("x", nil, []byte("x"))
	get(c, "x", 1)
	get(c, "y", 1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if m.Counter != nil {
				got[f.GetName()] = m.Counter.GetValue()
			} else {
				got[f.GetName()] = m.Gauge.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"volfs_disk_cache_hits_total":   1,
		"volfs_disk_cache_misses_total": 1,
		"volfs_disk_cache_puts_total":   1,
		"volfs_disk_cache_files":        1,
		"volfs_disk_cache_bytes":        float64(headerSize + 2),
	} {
		if got[name] != want {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}
}
