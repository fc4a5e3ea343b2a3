package integration

import (
	"bytes"
	"io/fs"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestS3FakeMount mounts a bucket of gofakes3 (in process, so that it runs
// where SeaweedFS is not built) with the volfs binary: a precomputed layer
// uploaded gzip-encoded as CloudVolume does, and the same layer with its
// ".gz" objects as they are on disk, both read exactly.
func TestS3FakeMount(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithIntegrityCheck(false)).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("fake"); err != nil {
		t.Fatal(err)
	}
	for _, enc := range []bool{true, false} {
		prefix := map[bool]string{true: "encoded", false: "gzobjects"}[enc]
		err := filepath.WalkDir(vol, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(vol, p)
			key, meta := path.Join(prefix, filepath.ToSlash(rel)), map[string]string{}
			if plain, ok := strings.CutSuffix(key, ".gz"); ok && enc {
				key, meta["Content-Encoding"] = plain, "gzip"
			}
			_, err = backend.PutObject("fake", key, meta, bytes.NewReader(data), int64(len(data)), nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s3Env(t, "", "")
	addr := freeAddr(t)
	s := startVolfs(t, "mount", "--endpoint-url", srv.URL, "--metrics-addr", addr, "s3://fake")
	check(t, truth, filepath.Join(s.mnt, "encoded"), vol)
	check(t, truth, filepath.Join(s.mnt, "gzobjects"), vol)
	run(t, "diff", "-r", filepath.Join(s.mnt, "encoded"), filepath.Join(s.mnt, "gzobjects"))

	// The same fetch metrics as every source, counted by the S3 fetcher,
	// over one pooled client: at most --workers (16) connections.
	body := scrapeMetrics(t, addr)
	for _, tc := range []struct {
		series   string
		min, max float64
	}{
		{"volfs_fetch_objects_total", 40, 1e9},
		{"volfs_fetch_bytes_total", 10 << 10, 1e12},
		{"volfs_fetch_dials_total", 1, 16},
		{`volfs_fetch_errors_total{kind="gave_up"}`, 0, 0},
	} {
		if v, ok := metricValue(body, tc.series); !ok || v < tc.min || v > tc.max {
			t.Errorf("%s = %v (found %v), want %v to %v", tc.series, v, ok, tc.min, tc.max)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
