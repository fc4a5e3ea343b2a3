package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
)

// TestReferenceSetWarm: `volfs warm` of a JSON reference set over HTTP
// reports as "from the origin" the bytes the HDF5 file sent, which are
// about the referenced bytes (at least them, at most those and the gaps
// coalescing reads across), not 0 B.
func TestReferenceSetWarm(t *testing.T) {
	requireH5py(t)
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write", dir)
	b, err := os.ReadFile(filepath.Join(dir, "chunks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var chunks map[string][2]int64
	if err := json.Unmarshal(b, &chunks); err != nil {
		t.Fatal(err)
	}
	var referenced int64
	for _, c := range chunks {
		referenced += c[1]
	}
	var sent atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/data.h5" {
			w = &refsCountingWriter{ResponseWriter: w, n: &sent}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", t.TempDir(), srv.URL+"/refs.json")
	t.Logf("warm:\n%s", out)
	if err != nil {
		t.Fatalf("warm: %v", err)
	}
	m := regexp.MustCompile(`; ([0-9.]+ [KMG]?i?B) from the origin`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no bytes from the origin in the summary:\n%s", out)
	}
	got, err := humanize.ParseBytes(m[1])
	if err != nil {
		t.Fatal(err)
	}
	s := sent.Load()
	t.Logf("referenced %d B, data.h5 sent %d B, warm reports %s", referenced, s, m[1])
	if s < referenced || s > 2*referenced+64<<10 {
		t.Errorf("data.h5 sent %d B for %d B referenced", s, referenced)
	}
	if d := float64(got) - float64(s); d < -0.1*float64(s) || d > 0.1*float64(s) {
		t.Errorf("warm reports %s from the origin; data.h5 sent %d B", m[1], s)
	}
}
