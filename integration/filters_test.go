package integration

import (
	"os"
	"path/filepath"
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
// and an xz stream with an x86 filter pass through byte for byte, each
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
	for _, name := range []string{"pass_categorize", "pass_xz_x86"} {
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

// TestUndecodedPassesThrough mounts sources whose root volfs cannot decode
// (the Zarr v3 draft layout; a Zarr v2 array with a codec volfs lacks):
// the mount comes up, every object reads byte for byte (by cat), and one
// log line says why the root is not decoded.
func TestUndecodedPassesThrough(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		why   string
	}{
		{"v3 draft", map[string]string{
			"zarr.json":              `{"zarr_format": "https://purl.org/zarr/spec/protocol/core/3.0", "metadata_encoding": "https://purl.org/zarr/spec/protocol/core/3.0", "metadata_key_suffix": ".json", "extensions": []}`,
			"meta/root.group.json":   `{"attributes": {}}`,
			"meta/root/a.array.json": `{"shape": [4], "data_type": "<u2", "chunk_grid": {"type": "regular", "chunk_shape": [4], "separator": "/"}, "chunk_memory_layout": "C", "compressor": null, "fill_value": 0, "extensions": [], "attributes": {}}`,
			"data/root/a/c0":         "\x01\x00\x02\x00\x03\x00\x04\x00",
		}, "Zarr v3 draft layout"},
		{"unknown codec", map[string]string{
			".zarray": `{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<u2", "compressor": {"id": "zfpy", "mode": 4}, "filters": null, "fill_value": 0, "order": "C"}`,
			"0":       "not zfp",
		}, `codec \"zfpy\"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			for name, data := range c.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(src, name), []byte(data))
			}
			var logs logBuffer
			mnt := mountSource(t, src, fs.Options{Log: newLogger(&logs)})
			for name, data := range c.files {
				if got := run(t, "cat", filepath.Join(mnt, name)); got != data {
					t.Errorf("%s reads %q, want %q", name, got, data)
				}
			}
			n := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "pass through undecoded") {
					n++
					if !strings.Contains(line, c.why) {
						t.Errorf("log line %q does not say %q", line, c.why)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d log lines saying the root passes through, want 1:\n%s", n, logs.String())
			}
		})
	}
}
