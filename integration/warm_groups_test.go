package integration

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// zarrGroupScript writes, with zarr-python, a Zarr v2 hierarchy: a root
// group with attributes, a subgroup "labels" with attributes holding the
// array "a" (64x64 uint8, raw), and the array "b" (32 uint16, blosc) at the
// root; with "consolidate" as its second argument, also .zmetadata.
const zarrGroupScript = `
import sys, zarr, numpy as np
g = zarr.open_group(sys.argv[1], mode="w")
g.attrs["title"] = "root"
sub = g.create_group("labels")
sub.attrs["kind"] = "sub"
a = sub.create_dataset("a", shape=(64, 64), chunks=(32, 32), dtype="u1", compressor=None)
a[:] = np.arange(64 * 64).reshape(64, 64) % 251
b = g.create_dataset("b", shape=(32,), chunks=(16,), dtype="u2")
b[:] = np.arange(32)
if sys.argv[2:] == ["consolidate"]:
    zarr.consolidate_metadata(sys.argv[1])
`

// zarrGroupCheck opens the hierarchy at argv[1] from its root with
// zarr-python and prints what a reader sees of it.
const zarrGroupCheck = `
import sys, zarr
g = zarr.open(sys.argv[1], mode="r")
print("root", dict(g.attrs), "labels", dict(g["labels"].attrs))
print("a", int(g["labels/a"][:].astype("u8").sum()), "b", int(g["b"][:].sum()))
`

// TestWarmGroupsOffline: a warm of a Zarr v2 hierarchy's root keeps the
// groups' metadata above the arrays (.zgroup, .zattrs) as well as the
// arrays', so that with the origin gone a mount with the same --cache-dir
// lets zarr-python open the hierarchy from the root and read every array.
func TestWarmGroupsOffline(t *testing.T) {
	requireFUSE(t)
	requireZarr(t)
	src := t.TempDir()
	if out, err := runBounded(t, time.Minute, python, "-c", zarrGroupScript, src); err != nil {
		t.Fatalf("writing the hierarchy: %v\n%s", err, out)
	}
	want, err := runBounded(t, time.Minute, python, "-c", zarrGroupCheck, src)
	if err != nil {
		t.Fatalf("reading the hierarchy: %v\n%s", err, want)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	defer srv.Close()
	cacheDir := t.TempDir()
	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, srv.URL)
	t.Logf("warm:\n%s", out)
	if f, _, _, x := warmSummaryOf(t, out); err != nil || f != 6 || x != 0 {
		t.Fatalf("warm: %v, %d fetched, %d failed; want 6, 0", err, f, x)
	}
	srv.Close()

	s := startVolfs(t, "mount", "--cache-dir", cacheDir, srv.URL)
	got, err := runBounded(t, 2*time.Minute, python, "-c", zarrGroupCheck, s.mnt)
	if err != nil || got != want {
		t.Errorf("zarr.open of the mount's root with the origin gone: %v\n%s\nwant\n%s", err, got, want)
	}
	if !strings.Contains(s.stderr.String(), "the origin cannot be reached") {
		t.Errorf("the mount did not go offline:\n%s", s.stderr.String())
	}
}

// TestWarmConsolidated: a consolidated Zarr v2 group (.zmetadata naming
// every array) given as SOURCE is warmed whole, from a local directory and
// over HTTP with and without directory listings: --dry-run counts the 6
// chunks of its two arrays, and a warm fetches them.
func TestWarmConsolidated(t *testing.T) {
	requireZarr(t)
	src := t.TempDir()
	if out, err := runBounded(t, time.Minute, python, "-c", zarrGroupScript, src, "consolidate"); err != nil {
		t.Fatalf("writing the hierarchy: %v\n%s", err, out)
	}
	files := http.FileServer(http.Dir(src))
	listed := httptest.NewServer(files)
	defer listed.Close()
	unlisted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer unlisted.Close()
	for _, tc := range []struct{ name, source string }{
		{"local", src},
		{"http", listed.URL},
		{"http-unlisted", unlisted.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--dry-run", tc.source)
			if err != nil || !strings.Contains(out, "dry run: 6 chunks: 6 would be fetched") {
				t.Errorf("warm --dry-run: %v\n%s", err, out)
			}
			out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", t.TempDir(), tc.source)
			if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 6 || c != 0 || m != 0 || x != 0 {
				t.Errorf("warm: %v, %d fetched, %d cached, %d missing, %d failed; want 6, 0, 0, 0\n%s", err, f, c, m, x, out)
			}
		})
	}
}
