package fs

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestLoadStatsLabels: encodings named by metadata become bounded label
// values: short, valid UTF-8, and few, the rest counted as "other".
func TestLoadStatsLabels(t *testing.T) {
	var s loadStats
	long := "blosc(" + strings.Repeat("é", 5000) + ", shuffle)"
	encs := []string{"raw", "gzip", long, long, "bad \xff utf8"}
	for i := range 100 {
		encs = append(encs, fmt.Sprintf("zlib | %d", i))
	}
	for _, e := range encs {
		s.observe(e, time.Millisecond, nil)
	}
	ch := make(chan prometheus.Metric, 1000)
	s.Collect(ch)
	close(ch)
	values := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Desc().String(), "volfs_chunk_loads_total") {
			continue
		}
		v := pb.GetLabel()[0].GetValue()
		if len(v) > maxLabelBytes || !utf8.ValidString(v) {
			t.Errorf("label value %q: want at most %d bytes of valid UTF-8", v, maxLabelBytes)
		}
		values[v] = pb.GetCounter().GetValue()
	}
	if len(values) > maxEncodings {
		t.Errorf("label values: got %d, want at most %d", len(values), maxEncodings)
	}
	total := 0.0
	for _, v := range values {
		total += v
	}
	if total != float64(len(encs)) {
		t.Errorf("loads counted: got %v, want %d", total, len(encs))
	}
	if values[label(long)] != 2 || values["raw"] != 1 || values[otherEncoding] == 0 {
		t.Errorf("counts: long %v, raw %v, other %v; want 2, 1, more than 0", values[label(long)], values["raw"], values[otherEncoding])
	}
}
