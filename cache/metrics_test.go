package cache

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestCollector registers a collector in a pedantic registry (which checks
// descriptions against metrics) and reads back what a few operations did.
func TestCollector(t *testing.T) {
	s := NewStore(Options{MaxBytes: 1 << 20, Workers: 1})
	defer s.Close()
	b := NewBudget(1 << 20)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(s, b)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	load := func(int) Loader { return func(context.Context) ([]byte, error) { return []byte("v"), nil } }
	s.Get(ctx, "a", load(0))
	s.Get(ctx, "a", load(0))
	s.getBatch(ctx, []string{"b", "c", "d"}, load, 1)
	s.GetBatch(ctx, []string{"a"}, load)
	tr := NewTracker(TrackerConfig{Len: 10, ChunkBytes: 100, MaxBytes: 1000, Budget: b})
	tr.Touch(0, true)
	tr.Touch(1, true)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = metricValue(m)
		}
	}
	for name, want := range map[string]float64{
		"volfs_cache_hits_total":           2,
		"volfs_cache_misses_total":         4,
		"volfs_store_batches_total/inline": 0, // the batch of a is all hits: not counted
		"volfs_store_batches_total/pooled": 1,
		"volfs_store_batch_loads":          1, // one batch observed
		"volfs_readahead_issued_total":     1,
		"volfs_readahead_bytes":            100,
	} {
		if got[name] != want {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
