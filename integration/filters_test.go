package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
)

// TestNumcodecsFilters writes Zarr v2 arrays with every numcodecs filter,
// checksum and lzma format (zarr-python 2), Zarr v3 arrays with the codec
// names zarr-python 3 writes (numcodecs.*, by hand from the spec) and N5
// datasets with n5-java's lz4 framing; mounts them; and compares every
// chunk file with numcodecs' own decode of the stored chunk. A chunk whose
// checksum is damaged reads as EIO; categorize (which decodes to strings)
// and an xz stream with a delta filter pass through byte for byte, each
// with a log line.
func TestNumcodecsFilters(t *testing.T) {
	requireZarr(t)
	if out, err := runErr(python, "-c", "import lz4.block"); err != nil {
		if os.Getenv("VOLFS_REQUIRE_FUSE") != "" {
			t.Fatalf("python3-lz4 required: %v\n%s", err, out)
		}
		t.Skipf("python3-lz4 unavailable: %v", err)
	}
	src, expect := t.TempDir(), t.TempDir()
	run(t, python, "testdata/filtercheck.py", "write", src, expect)
	var logs logBuffer
	mnt := mountSource(t, src, fs.Options{Log: newLogger(&logs)})
	t.Log(run(t, python, "testdata/filtercheck.py", "verify", src, expect, mnt))
	for _, name := range []string{"pass_categorize", "pass_xz_delta"} {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "pass through undecoded") && strings.Contains(line, "/"+name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d log lines saying it passes through undecoded, want 1", name, n)
		}
	}
}
