package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
)

// requireViewTools skips (or, with VOLFS_REQUIRE_FUSE, fails) without the
// programs that check the views: zarr-python, tifffile and PIL, libtiff's
// tools, GDAL, teem and plastimatch (.ci/run installs them).
func requireViewTools(t *testing.T) {
	t.Helper()
	requireZarr(t)
	missing := ""
	if out, err := runErr(python, "-c", "import tifffile"); err != nil {
		missing = "python3-tifffile: " + out
	}
	for _, tool := range []string{"tiffinfo", "tiffdump", "gdalinfo", "teem-unu", "plastimatch", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing += " " + tool
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("VOLFS_REQUIRE_FUSE") != "" {
		t.Fatalf("view checkers required: missing %s", missing)
	}
	t.Skipf("view checkers missing: %s", missing)
}

// TestViewsThroughMount writes precomputed (8-bit; 16-bit with two
// channels), zarr (C and F order, 2-byte big-endian 4-D, non-zero fills)
// and N5 volumes with numpy and zarr-python, each with missing chunks,
// mounts them, and checks every section, volume.tif, volume.raw and slab
// with tifffile, PIL, tiffinfo, tiffdump, gdalinfo, teem-unu,
// plastimatch, numpy.memmap and ImageJ against numpy's arrays; then
// random-offset dd reads, and a corrupt chunk that fails only the reads
// that touch it, with one log line naming the chunk object.
func TestViewsThroughMount(t *testing.T) {
	requireViewTools(t)
	src := t.TempDir()
	run(t, python, "testdata/viewvolumes.py", "write", src)
	var logs logBuffer
	mnt := mountSource(t, src, fs.Options{Log: newLogger(&logs)})
	out := run(t, python, "testdata/viewvolumes.py", "check", src, mnt, t.TempDir())
	t.Log(strings.TrimSpace(out))
	if !strings.Contains(logs.String(), "bad/6.0.0") {
		t.Errorf("no log line names the corrupt chunk bad/6.0.0:\n%s", logs.String())
	}
}

// TestViewsStatWithoutFetching lists and stats every view of a mounted
// volume whose chunks are all gone: sizes come from the metadata alone.
func TestViewsStatWithoutFetching(t *testing.T) {
	requireViewTools(t)
	src := t.TempDir()
	run(t, python, "testdata/viewvolumes.py", "write", src)
	// Remove every chunk of pc8: a stat that fetched would see nothing, and
	// the sizes must still be those of the full volume.
	chunks, _ := filepath.Glob(filepath.Join(src, "pc8", "s0", "*"))
	for _, c := range chunks {
		os.Remove(c)
	}
	mnt := mountSource(t, src, fs.Options{})
	out := run(t, "stat", "-c", "%n %s", filepath.Join(mnt, "pc8/s0/volume.raw"), filepath.Join(mnt, "pc8/s0/sections/z19.tif"),
		filepath.Join(mnt, "pc8/s0/slabs/z16-19.raw"))
	var sizes []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		sizes = append(sizes, n)
	}
	if want := []int64{100 * 70 * 20, -1, 100 * 70 * 4}; len(sizes) != 3 || sizes[0] != want[0] || sizes[2] != want[2] || sizes[1] < 100*70 {
		t.Errorf("stat sizes %v, want volume.raw %d, a section of more than %d, slab %d", sizes, want[0], 100*70, want[2])
	}
	ls := run(t, "ls", filepath.Join(mnt, "pc8/s0/sections"))
	if n := len(strings.Fields(ls)); n != 20 {
		t.Errorf("sections lists %d files, want 20", n)
	}
	// The only chunk reads are of the listing: the data is gone, so a
	// section reads as zeros after its header.
	run(t, python, "-c", fmt.Sprintf(`
import sys, numpy as np, tifffile
a = tifffile.imread(%q)
assert a.shape == (70, 100) and not a.any(), (a.shape, a.max())`, filepath.Join(mnt, "pc8/s0/sections/z03.tif")))
}
