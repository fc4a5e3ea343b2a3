package fetcher

import (
	"testing"
	"time"
)

func TestRangeLength(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int64
	}{
		{"bytes=0-0", 1},
		{"bytes=100-199", 100},
		{"bytes=100-", -1},
		{"bytes=-100", -1},
		{"bytes=5-4", -1},
		{"", -1},
		{"bytes=0-9,20-29", -1},
	} {
		if got := rangeLength(tc.header); got != tc.want {
			t.Errorf("rangeLength(%q): got %d, want %d", tc.header, got, tc.want)
		}
	}
}

// TestGCSCallBound: a gs:// call may take what six attempts of the HTTP
// deadline and the back-off between them take, at most CallTimeout.
func TestGCSCallBound(t *testing.T) {
	g := &GCS{opts: GCSOptions{StallTimeout: 1500 * time.Millisecond, MinRate: 1 << 20}.withDefaults()}
	for _, tc := range []struct {
		n    int64
		want time.Duration
	}{
		{0, 6*1500*time.Millisecond + 5*5*time.Second},
		{1 << 20, 6*2500*time.Millisecond + 5*5*time.Second},
		{1 << 40, 5 * time.Minute},
	} {
		if got := g.callBound(tc.n); got != tc.want {
			t.Errorf("callBound(%d): got %v, want %v", tc.n, got, tc.want)
		}
	}
}
