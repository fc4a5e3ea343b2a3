package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
)

// requireZarr skips (or, with VOLFS_REQUIRE_FUSE, fails) without Debian's
// python3-zarr.
func requireZarr(t *testing.T) {
	t.Helper()
	requirePython(t)
	if out, err := runErr(python, "-c", "import zarr, numcodecs, PIL"); err != nil {
		testenv.Unavailable(t, "python3-zarr, python3-numcodecs or python3-pil unavailable: %v\n%s", err, out)
	}
}

// TestZarrFixtures mounts every fixture written by zarr-python, zarrita,
// z5py and tensorstore and checks, with zarr-python and a numpy reader of
// the rewritten metadata, that each reads as the values its README lists,
// with no codec left for the reader to apply.
func TestZarrFixtures(t *testing.T) {
	requireZarr(t)
	mnt := mountSource(t, testenv.Fixtures(t), fs.Options{})
	t.Log(strings.TrimSpace(run(t, python, "testdata/zarrcheck.py", "fixtures", mnt)))
}

// TestZarrWrittenByZarrPython writes arrays with every compressor (blosc
// with each inner codec and shuffle), both orders, both separators, missing
// chunks, non-zero and NaN fills, and N5 through zarr.N5Store; mounts them;
// and compares every chunk file with zarr-python's own decode and every
// mounted array with its source.
func TestZarrWrittenByZarrPython(t *testing.T) {
	requireZarr(t)
	src := t.TempDir()
	run(t, python, "testdata/zarrcheck.py", "write", src, "7")
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/zarrcheck.py", "verify", src, mnt)
}

// TestBloscCompat mounts each c-blosc 1.3 to 1.18 buffer of the fixtures as
// the one chunk of a zarr array and reads it: int32 0..999999 every time.
func TestBloscCompat(t *testing.T) {
	requirePython(t)
	cdata, err := filepath.Glob(filepath.Join(testenv.Fixtures(t), "blosc-compat", "*.cdata"))
	if err != nil || len(cdata) == 0 {
		t.Fatalf("no blosc-compat fixtures: %v", err)
	}
	src := t.TempDir()
	for _, f := range cdata {
		dir := filepath.Join(src, strings.TrimSuffix(filepath.Base(f), ".cdata"))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		meta := `{"zarr_format": 2, "shape": [1000000], "chunks": [1000000], "dtype": "<i4", "order": "C",
			"compressor": {"id": "blosc", "cname": "lz4", "clevel": 9, "shuffle": 1}, "fill_value": 0, "filters": null}`
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".zarray"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mnt := mountSource(t, src, fs.Options{})
	script := `
import sys, numpy as np
bad = [p for p in sys.argv[1:] if not np.array_equal(np.fromfile(p + "/0", "<i4"), np.arange(1000000, dtype="<i4"))]
print(" ".join(bad)); sys.exit(1 if bad else 0)`
	args := []string{"-c", script}
	for _, f := range cdata {
		args = append(args, filepath.Join(mnt, strings.TrimSuffix(filepath.Base(f), ".cdata")))
	}
	if out, err := runErr(python, args...); err != nil {
		t.Errorf("blosc buffers that do not read as 0..999999: %s (%v)", out, err)
	}
	fmt.Fprintln(os.Stderr, "blosc-compat:", len(cdata), "buffers")
}

// zarritaModules is where .ci/run installs the npm package zarrita, relative
// to this package's directory.
const zarritaModules = "../.ci/node/node_modules"

// TestZarrita writes Zarr v3 arrays with zarrita (transpose, big-endian
// bytes, both separators, fill values, unwritten chunks), mounts them, and
// reads the mount back with zarrita, which must find plain little-endian
// bytes and the values written. zarrita 0.7 cannot write sharded arrays:
// TestZarr3Sharded packs shards of zarrita-encoded chunks.
func TestZarrita(t *testing.T) {
	modules, err := filepath.Abs(zarritaModules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "zarrita")); err != nil {
		testenv.Unavailable(t, "zarrita is not installed in %s (bash .ci/run installs it): %v", modules, err)
	}
	// Node resolves an ES module's imports from its own directory.
	dir := t.TempDir()
	script, err := os.ReadFile("testdata/zarrita.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zarrita.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	run(t, "node", filepath.Join(dir, "zarrita.mjs"), "write", src)
	mnt := mountSource(t, src, fs.Options{})
	run(t, "node", filepath.Join(dir, "zarrita.mjs"), "check", mnt)
	// And with the numpy reader of zarrcheck.py: the rewritten metadata
	// says bytes, little-endian.
	requireZarr(t)
	run(t, python, "-c", `
import sys; sys.path.insert(0, "testdata"); import zarrcheck
for name in ("t.int16", "f.float32", "u.uint32", "b.uint8"):
    zarrcheck.read_v3(sys.argv[1] + "/" + name)
if zarrcheck.failures: print(zarrcheck.failures); sys.exit(1)`, mnt)
}
