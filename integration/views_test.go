package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
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
	if missing != "" {
		testenv.Unavailable(t, "view checkers missing: %s", missing)
	}
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

// vmHWM returns the peak resident memory of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// Geometry of TestViewsMemory: a 24000 x 24000 x 64 uint8 layer in
// chunks of 256 x 256 x 64 (4 MiB decoded), whose first 16 chunks of
// chunk row 0 exist and the rest is missing.
const (
	memSide, memDepth, memChunk, memReal = 24000, 64, 256, 16
	memCache                             = 32 << 20
	// memBatch is the most decoded data one read's batch holds: a 1 MiB
	// FUSE read spans at most two chunk rows, of which only row 0 has
	// data, memReal chunks of memChunk^2 x memDepth bytes.
	memBatch = memReal * memChunk * memChunk * memDepth
)

// TestViewsMemory reads one 576 MB section of a large, mostly missing
// layer through the volfs binary with a 32 MiB cache, and checks that the
// process's peak resident memory stays under the soft memory limit volfs
// sets for that cache (cache.MemoryLimit: 1.25 x cache + 64 MiB, where the
// collector holds the heap) plus one batch: the section is streamed, never
// held. It runs the binary as a subprocess,
// which the race detector would make many times larger, so it is skipped
// under -race.
func TestViewsMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("memory is measured without the race detector")
	}
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/viewvolumes.py", "big", src, strconv.Itoa(memSide), strconv.Itoa(memSide),
		strconv.Itoa(memDepth), strconv.Itoa(memChunk), strconv.Itoa(memReal))
	s := startVolfs(t, "mount", "--cache-size", strconv.Itoa(memCache>>20)+"MiB", src)
	section := filepath.Join(s.mnt, "big/s0/sections/z00.tif")
	before := vmHWM(t, s.cmd.Process.Pid)
	// Row 0 of the section: memReal copies of the real chunks' first row,
	// then zeros; then the whole file, 1 MiB at a time.
	out := run(t, python, "-c", fmt.Sprintf(`
import numpy as np, tifffile
with tifffile.TiffFile(%q) as tf:
    off = tf.pages[0].dataoffsets[0]
f = open(%q, "rb")
f.seek(off)
row = np.frombuffer(f.read(%d), np.uint8)
want = np.tile((np.arange(%d) %% 251 + 1).astype(np.uint8), %d)
assert np.array_equal(row[:want.size], want), "row 0 of the real chunks differs"
assert not row[want.size:].any(), "missing chunks are not zero"
f.seek(0)
total = 0
while b := f.read(1 << 20):
    total += len(b)
print(total)`, section, section, memSide, memChunk, memReal))
	peak := vmHWM(t, s.cmd.Process.Pid)
	size, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if size < memSide*memSide {
		t.Fatalf("read %d bytes of the section, want more than %d", size, memSide*memSide)
	}
	bound := cache.MemoryLimit(memCache) + memBatch
	t.Logf("section of %d MiB: VmHWM %d MiB before the read, %d MiB after; bound %d MiB (memory limit %d + batch %d)",
		size>>20, before>>20, peak>>20, bound>>20, cache.MemoryLimit(memCache)>>20, memBatch>>20)
	if peak > bound {
		t.Errorf("volfs peak resident memory %d MiB, want at most %d MiB", peak>>20, bound>>20)
	}
}

// TestViewsFixtures reads the views of zarr v2 and v3 arrays written by
// zarr-python and zarrita (sharded, transposed, ragged, with all-fill
// inner chunks absent) and of N5 datasets with padded edge blocks, and
// compares volume.raw and every section, read
// by numpy and tifffile, with the values the fixtures' README lists.
func TestViewsFixtures(t *testing.T) {
	requireViewTools(t)
	mnt := mountSource(t, testenv.Fixtures(t), fs.Options{})
	script := `
import os, sys, numpy as np, tifffile
mnt, bad = sys.argv[1], []
cases = {
    "zarr-v2-zarr-python/data.zarr/2d.chunked.ragged.i2": np.arange(1, 10).reshape(3, 3),
    "zarr-v2-zarr-python/data.zarr/3d.chunked.mixed.i2.C": np.arange(27).reshape(3, 3, 3),
    "zarr-v2-zarr-python/data.zarr/3d.chunked.mixed.i2.F": np.arange(27).reshape(3, 3, 3),
    "zarr-v3-zarrita/data.zarr/2d.chunked.compressed.sharded.filled.i2": np.arange(16).reshape(4, 4),
    "zarr-v3-zarrita/data.zarr/2d.chunked.ragged.compressed.sharded.i2": np.arange(1, 10).reshape(3, 3),
    "zarr-v3-zarrita/data.zarr/3d.chunked.compressed.sharded.i2": np.arange(64).reshape(4, 4, 4),
    "zarr-v3-zarrita/data.zarr/3d.chunked.mixed.compressed.sharded.i2": np.arange(27).reshape(3, 3, 3),
    "zarr-v3-zarrita/data.zarr/3d.chunked.mixed.i2.F": np.arange(27).reshape(3, 3, 3),
}
# N5 (x, y) = 4x + y, x fastest: as (y, x) the transpose of arange(20).reshape(5, 4).
for comp in ("raw", "gzip", "bzip2", "blosc"):
    cases["n5-tensorstore/" + comp] = np.arange(20).reshape(5, 4).T
for name, want in cases.items():
    d = os.path.join(mnt, name)
    raw = np.fromfile(os.path.join(d, "volume.raw"), "<i2")
    if not np.array_equal(raw, want.reshape(-1)):
        bad.append(f"{name}/volume.raw: {raw.tolist()}")
    secs = sorted(os.listdir(os.path.join(d, "sections")))
    got = np.stack([tifffile.imread(os.path.join(d, "sections", s)) for s in secs]).reshape(want.shape)
    if not np.array_equal(got, want):
        bad.append(f"{name}/sections {secs}: {got.tolist()}")
    if not np.array_equal(tifffile.imread(os.path.join(d, "volume.tif")).reshape(want.shape), want):
        bad.append(f"{name}/volume.tif")
print("\n".join(bad) or f"{len(cases)} arrays match")
sys.exit(1 if bad else 0)`
	t.Log(strings.TrimSpace(run(t, python, "-c", script, mnt)))
}
