package integration

import (
	"testing"

	"github.com/volfs/volfs/fs"
)

// TestSkeletonSWC writes a precomputed segmentation with unsharded
// skeletons (an anisotropic transform with translation, a radius and a
// uint8 attribute, edges stored child first, a forest) and objects whose
// counts lie, mounts it, and reads skeletons.swc with an SWC parser of
// its own: the listing names exactly the objects, every parent comes
// before its children, positions and radii are the transformed ones in
// micrometres to 0.01 nm, the edges as sets are those written, the
// attribute survives in comments, the pass-through directory is
// unchanged, and each lying object reads as EIO within seconds.
func TestSkeletonSWC(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write", src)
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/ngobjcheck.py", "verify", src, mnt)
}
