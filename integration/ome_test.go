package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
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

// TestOMESpacing writes OME-Zarr images with known scales and
// translations: NGFF 0.4 with zarr-python 2 (on each level and on the
// image; space axes without a unit; an image affine with a shear), NGFF
// 0.5 and 0.6 in Zarr v3 groups with zarrita (0.6: a scale-and-translation
// sequence, and an affine with a rotation), and a precomputed layer with
// resolution [4, 4, 40] and a voxel offset. Through a mount, teem's NRRD
// parser, ITK (plastimatch) on the MetaImage headers and tifffile on the
// TIFF resolution tags and ImageJ description must find the voxel size and
// the position of voxel 0 that the metadata give, in nm (or with no unit
// where the axes have none); the images whose transforms do not reduce
// have unit spacing, one log line each, and `volfs info` says why. ImageJ
// opens volume.tif with the same voxel size and position of pixel 0.
func TestOMESpacing(t *testing.T) {
	requireViewTools(t)
	src, tmp := t.TempDir(), t.TempDir()
	run(t, python, "testdata/omespacing.py", "write", src)
	run(t, "node", zarritaScript(t, "omespacing.mjs"), "write", src)
	run(t, python, "testdata/mkprecomputed.py", filepath.Join(src, "pre"))
	var logs logBuffer
	mnt := mountSource(t, src, fs.Options{Log: newLogger(&logs)})
	t.Log(strings.TrimSpace(run(t, python, "testdata/omespacing.py", "verify", src, mnt, tmp)))
	// ImageJ itself: the voxel size in µm and where pixel 0 lies
	// (v04 level 0: image and level transforms composed; the
	// precomputed scale: voxel_offset times resolution).
	if _, err := os.Stat(imageJJar); err != nil {
		testenv.Unavailable(t, "ImageJ (Debian's imagej) unavailable: %v", err)
	}
	ij := run(t, "java", "-Djava.awt.headless=true", "-cp", imageJJar, "testdata/IJCalibration.java",
		filepath.Join(mnt, "v04.ome.zarr/0/volume.tif"), filepath.Join(mnt, "pre/s0/volume.tif"), filepath.Join(mnt, "nounit.ome.zarr/0/volume.tif"))
	for _, want := range []string{
		"v04.ome.zarr/0/volume.tif voxel=0.250000,0.250000,1.00000 unit=µm at0=-1.75000,-2.00000,13.0000",
		"pre/s0/volume.tif voxel=0.00400000,0.00400000,0.0400000 unit=µm at0=-0.0520000,0.0200000,-0.120000",
		"nounit.ome.zarr/0/volume.tif voxel=2.00000,2.00000,3.00000 unit=pixel at0=1.00000,0.00000,6.00000",
	} {
		if !strings.Contains(ij, want) {
			t.Errorf("ImageJ reads no %q:\n%s", want, ij)
		}
	}
	for _, dir := range []string{"/shear.ome.zarr", "/rot06.ome.zarr"} {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "OME-Zarr transforms not used") && strings.Contains(line, "dir="+dir+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d log lines say that %s's transforms are not used, want 1:\n%s", n, dir, logs.String())
		}
	}

	out := run(t, volfsBin, "info", src)
	for _, want := range []string{
		"TRANSLATION", "13,-2,-1.75", "13.5,-1.875,-1.625", // v04: image and level transforms composed, µm
		"-20,20,-52", "0.002x0.001x0.001", "3x2x2", "resolution=no-unit",
		"OME-Zarr image shear.ome.zarr: transforms not used", "OME-Zarr image rot06.ome.zarr: transforms not used",
		"a rotation, shear or axis permutation",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
}

// imageJJar is Debian's ImageJ (.ci/run installs it).
const imageJJar = "/usr/share/java/ij.jar"

// zarritaScript copies testdata/name into a new directory beside a link to
// the npm packages .ci/run installs (node resolves an ES module's imports
// from its own directory) and returns its path; it skips (or, with
// VOLFS_REQUIRE_FUSE, fails) without zarrita.
func zarritaScript(t *testing.T, name string) string {
	t.Helper()
	modules, err := filepath.Abs(zarritaModules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "zarrita")); err != nil {
		testenv.Unavailable(t, "zarrita is not installed in %s (bash .ci/run installs it): %v", modules, err)
	}
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}
