package integration

import (
	"regexp"
	"testing"

	"github.com/volfs/volfs/fs"
)

// TestObjectViews writes a precomputed segmentation with unsharded
// skeletons (an anisotropic transform with translation, a radius and a
// uint8 attribute, edges stored child first, a forest) and objects whose
// counts lie, mounts it, and reads skeletons.swc with an SWC parser of
// its own: the listing names exactly the objects, every parent comes
// before its children, positions and radii are the transformed ones in
// micrometres to 0.01 nm, the edges as sets are those written, the
// attribute survives in comments, the pass-through directory is
// unchanged. Its legacy meshes (two fragments merged) read through
// meshio as the positions and offset triangles written, and assimp counts
// their faces and converts them to STL with the same positions. Each
// lying object (counts past the stored size, fragment names outside the
// mesh directory, a manifest of 10^6 fragments) reads as EIO within
// seconds. A LINE annotation directory shows annotations.csv, read with
// Python's csv module: the header, coordinates, enum labels, rgb, the
// int16 and float32 stored before the uint8 and the relationship ids; a
// record shorter than its type reads as EIO.
func TestObjectViews(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write", src)
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/ngobjcheck.py", "verify", src, mnt)
}

// TestShardedObjectViews writes a segmentation whose skeletons are
// sharded (murmurhash3, preshift, gzip minishard indexes and data, up to four
// shard files, ids up to 2^64-1) and annotation layers whose by_id index
// is sharded, with the project's shard writer built from sharded.md, and
// reads the views through a mount: skeletons.swc lists exactly the ids
// the shards hold (not the README beside them), each SWC parses to what
// was written, an id no shard holds is ENOENT, the lying objects read as
// EIO within seconds; annotations.csv has one row per annotation as
// written, and a short record in a shard reads as EIO. A multi-resolution
// (Draco) mesh directory beside them passes through, its views empty, and
// `volfs info` lists each object directory with its type, whether it is
// sharded and what converts it.
func TestShardedObjectViews(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write-sharded", src)
	info := run(t, volfsBin, "info", src)
	for _, want := range []string{
		`(?m)^segsh/skel +neuroglancer_skeletons +sharded\(preshift=1,hash=murmurhash3_x86_128,minishard_bits=2,shard_bits=2,index=gzip,data=gzip\) +skeletons\.swc$`,
		`(?m)^segsh/mesh +neuroglancer_multilod_draco +sharded\(preshift=0,hash=identity,minishard_bits=1,shard_bits=1,index=raw,data=gzip\) +not converted \(multi-resolution Draco meshes\), passed through$`,
	} {
		if !regexp.MustCompile(want).MatchString(info) {
			t.Errorf("volfs info has no line matching %s:\n%s", want, info)
		}
	}
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/ngobjcheck.py", "verify-sharded", src, mnt)
}
