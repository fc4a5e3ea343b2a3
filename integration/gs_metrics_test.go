package integration

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// TestGCSMetrics: a gs:// mount serves the same fetch metrics as an HTTP
// one (`--metrics-addr`), counted by the GCS fetcher: the objects it read,
// their bytes, the connections of its client, and a chunk that is not in
// the bucket as not_found.
func TestGCSMetrics(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 2, nil)
	if err := os.Remove(filepath.Join(src, filepath.FromSlash(keys[1]))); err != nil {
		t.Fatal(err)
	}
	e := startGCSEmulator(t)
	const bucket = "vols"
	e.Store.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	putLayer(t, e, bucket, "", src, false)

	addr := freeAddr(t)
	s := startVolfs(t, "mount", "--anonymous", "--metrics-addr", addr, "gs://"+bucket)
	if got := catC(t, filepath.Join(s.mnt, keys[0])); !bytes.Equal(got, chunks[0]) {
		t.Fatalf("cat %s: %d bytes differ from the chunk written", keys[0], len(got))
	}
	if got := catC(t, filepath.Join(s.mnt, keys[1])); !bytes.Equal(got, make([]byte, len(chunks[1]))) {
		t.Fatalf("cat %s, absent from the bucket: want %d zero bytes, got %d bytes", keys[1], len(chunks[1]), len(got))
	}

	body := scrapeMetrics(t, addr)
	for _, tc := range []struct {
		series string
		min    float64
	}{
		{"volfs_fetch_objects_total", 2}, // info and the chunk at least
		{"volfs_fetch_bytes_total", float64(len(chunks[0]))},
		{"volfs_fetch_dials_total", 1},
		{"volfs_fetch_retries_total", 0},
		{`volfs_fetch_errors_total{kind="not_found"}`, 1}, // the chunk not in the bucket
		{`volfs_fetch_errors_total{kind="gave_up"}`, 0},
		{`volfs_fetch_errors_total{kind="other"}`, 0},
	} {
		v, ok := metricValue(body, tc.series)
		switch {
		case !ok:
			t.Errorf("/metrics lacks %s", tc.series)
		case v < tc.min:
			t.Errorf("%s = %v, want at least %v", tc.series, v, tc.min)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// scrapeMetrics returns the body of http://addr/metrics, failing the test
// unless it answers 200.
func scrapeMetrics(t *testing.T, addr string) []byte {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %v %v", resp.Status, err)
	}
	return body
}

// metricValue returns the value of the series (name with its labels, as
// Prometheus' text format writes it) in body.
func metricValue(body []byte, series string) (float64, bool) {
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}
