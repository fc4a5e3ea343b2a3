package integration

import (
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
)

// TestOMEZarr writes an NGFF 0.4 image (zarr-python 2; axes t, c, z, y, x
// in micrometres, two levels, omero channels) and an NGFF 0.5 one (Zarr
// v3; c, z, y, x in nanometres, with a scale on the image as well as on
// the level), mounts them, and checks with zarr-python and tifffile that
// the image is still OME-Zarr over the decoded arrays, and that each
// level's volume.tif is an ImageJ hyperstack with the channel axis as
// channels, time as frames and the level's voxel size (µm), its sections
// are named by axis, and its NRRD header has the spacing in nm. `volfs
// info` shows each image once, with its axes, units and levels.
func TestOMEZarr(t *testing.T) {
	requireZarr(t)
	if out, err := runErr(python, "-c", "import tifffile"); err != nil {
		t.Skipf("python3-tifffile unavailable: %v\n%s", err, out)
	}
	src := t.TempDir()
	run(t, python, "testdata/omecheck.py", "write", src)
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/omecheck.py", "verify", src, mnt)

	out := run(t, volfsBin, "info", src)
	for _, want := range []string{
		"OME-ZARR IMAGE", "cells", "v05", "t(time second) c(channel) z(space micrometer) y(space micrometer) x(space micrometer)",
		"1x1x0.5x0.25x0.25", "1x1x1x0.5x0.5", "c(channel) z(space nanometer)", "1x40x8x8",
		"1x1x500x250x250", // level 0's voxel size in nm (the RESOLUTION column)
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
}
