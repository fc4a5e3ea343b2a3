package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An array's metadata rewritten during a mount (fs/metawatch.go,
// docs/CONSISTENCY.md "An array rewritten whole during a mount").

// metaRewriteScript writes, rewrites and reads the zarr v2 arrays of
// TestArrayRewrittenDuringMount with zarr-python; argv: the command, the
// source directory, the mount.
const metaRewriteScript = `
import errno, sys
import numpy as np, zarr
cmd, src, mnt = sys.argv[1:4]
data = (np.arange(8 * 16).reshape(8, 16) * 3 + 1000).astype("<u2")
grown = (np.arange(12 * 16).reshape(12, 16) * 5 + 7).astype("<u2")
grown[:7] = data[:7]
if cmd == "write":
    zarr.open(src + "/swapped", mode="w", shape=(8, 16), chunks=(2, 16), dtype="<u2", compressor=None)[:] = data
    zarr.open(src + "/appended", mode="w", shape=(7, 16), chunks=(2, 16), dtype="<u2")[:] = data[:7]
elif cmd == "read-before":
    assert (zarr.open(mnt + "/swapped", mode="r")[0:2] == data[0:2]).all(), "swapped, chunk 0"
    # Chunks 0.0, 1.0 only: 2.0 and the edge chunk 3.0 are loaded after
    # the append.
    assert (zarr.open(mnt + "/appended", mode="r")[0:4] == data[0:4]).all(), "appended"
elif cmd == "rewrite":
    # The same values, stored big-endian: every chunk's bytes differ.
    zarr.open(src + "/swapped", mode="w", shape=(8, 16), chunks=(2, 16), dtype=">u2", compressor=None)[:] = data.astype(">u2")
    z = zarr.open(src + "/appended", mode="r+")
    z.append(grown[7:])  # rewrites the edge chunk 3.0 (rows 6, 7), adds 4.0, 5.0
elif cmd == "read-swapped":
    # zarr-python reads the mount's .zarray ("<u2", read at the mount) and
    # a chunk loaded after the rewrite: its values, or an error.
    try:
        got = zarr.open(mnt + "/swapped", mode="r")[2:4]
    except OSError as e:
        print("error", errno.errorcode.get(e.errno, e.errno))
        sys.exit(0)
    if (got == data[2:4]).all():
        print("values")
    else:
        print("wrong values", got[0, :4].tolist(), "want", data[2, :4].tolist())
elif cmd == "read-appended":
    z = zarr.open(mnt + "/appended", mode="r")
    assert z.shape == (7, 16), z.shape
    assert (z[:] == data[:7]).all(), "appended, after the append"
    with open(mnt + "/appended/3.0", "rb") as f:
        assert f.read() == grown[6:8].tobytes(), "edge chunk 3.0, rewritten by the append"
    print("ok")
`

// TestArrayRewrittenDuringMount: with --metadata-ttl 1s, a zarr v2 array
// rewritten whole under the mount by zarr-python as ">u2" (the same
// values, other bytes) is never read as the new chunks under the old
// metadata: zarr-python reading through the mount 2 s later gets the
// values, or an error (ESTALE) with one log line that names the array's
// .zarray and says to remount. An array that zarr-python appends to (a
// resize along axis 0, the same dtype and codec, its partial edge chunk
// rewritten) goes on reading correctly, at the shape it was mounted with.
func TestArrayRewrittenDuringMount(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	py := func(cmd, mnt string) string {
		t.Helper()
		out, err := runBounded(t, time.Minute, python, "-c", metaRewriteScript, cmd, src, mnt)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(out)
	}
	py("write", "")
	s := startVolfs(t, "mount", "--metadata-ttl", "1s", src)
	py("read-before", s.mnt)
	py("rewrite", "")
	time.Sleep(2 * time.Second)

	got := py("read-swapped", s.mnt)
	t.Logf("zarr-python read the array rewritten as >u2: %s", got)
	log := s.stderr.String()
	switch got {
	case "values":
	case "error ESTALE", "error EIO":
		if n := strings.Count(log, "swapped/.zarray"); n != 1 || !strings.Contains(log, "remount") {
			t.Errorf("%s: want one log line naming swapped/.zarray and saying to remount, got %d:\n%s", got, n, log)
		}
	default:
		t.Errorf("a chunk of the array rewritten as >u2, read 2 s later: %s; want its values or ESTALE\nvolfs log:\n%s", got, log)
	}
	// cat of a chunk not read before: the new version's bytes (big-endian)
	// or ESTALE, never the old metadata's decoding of new bytes.
	out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "swapped", "3.0"))
	if err == nil {
		t.Logf("cat swapped/3.0 read %d bytes", len(out))
	} else if !strings.Contains(out, "Stale file handle") {
		t.Errorf("cat swapped/3.0: %v %q, want its bytes or ESTALE", err, out)
	}

	if got := py("read-appended", s.mnt); got != "ok" {
		t.Errorf("the appended array: %s", got)
	}
	if log := s.stderr.String(); strings.Contains(log, "appended/.zarray") && !strings.Contains(log, "grew") {
		t.Errorf("the appended array was refused:\n%s", log)
	}
}
