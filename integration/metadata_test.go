package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/zarr3shard"
)

// writeMixedMetadata writes a tree of directories holding metadata of two
// formats, and consolidated metadata of both Zarr versions:
//
//	same/     .zarray and zarr.json (chunk key encoding v2) describe the
//	          same gzip chunks "0.0" ... of <u2: both are served rewritten
//	keys/     .zarray (keys "0.0") and zarr.json (default keys "c/0/0"):
//	          zarr.json is hidden behind zarr.json.orig
//	layout/   .zarray >u2 and zarr.json (keys "0.0", bytes big): the same
//	          stored chunks, decoded to other bytes: zarr.json hidden
//	v2a/      a v2 gzip array, v3a/ a v3 gzip array, v3s/ a sharded one
//	.zgroup, .zmetadata, zarr.json: the root group, consolidated by both
//	          versions; both are rewritten
//
// It returns the root and the values of every 8x8 array (i*3+1).
func writeMixedMetadata(t *testing.T) (string, []uint16) {
	t.Helper()
	root := t.TempDir()
	vals := make([]uint16, 64)
	for i := range vals {
		vals[i] = uint16(i*3 + 1)
	}
	chunk := func(cy, cx int, big bool) []byte {
		b := make([]byte, 0, 32)
		for y := range 4 {
			for x := range 4 {
				v := vals[(cy*4+y)*8+cx*4+x]
				if big {
					b = binary.BigEndian.AppendUint16(b, v)
				} else {
					b = binary.LittleEndian.AppendUint16(b, v)
				}
			}
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	zarray := func(dtype string) string {
		return `{"zarr_format": 2, "shape": [8, 8], "chunks": [4, 4], "dtype": "` + dtype + `", "order": "C",
			"compressor": {"id": "gzip", "level": 1}, "filters": null, "fill_value": 0, "dimension_separator": "."}`
	}
	zarrJSON := func(keys, endian string) string {
		return `{"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "uint16",
			"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
			"chunk_key_encoding": ` + keys + `, "fill_value": 0,
			"codecs": [{"name": "bytes", "configuration": {"endian": "` + endian + `"}}, {"name": "gzip", "configuration": {"level": 1}}]}`
	}
	v2keys := `{"name": "v2", "configuration": {"separator": "."}}`
	defkeys := `{"name": "default", "configuration": {"separator": "/"}}`
	put := func(p, s string) { writeFileAll(t, filepath.Join(root, p), []byte(s)) }
	for _, d := range []struct {
		dir, zarray, zarrJSON string
		big, v2, v3           bool // chunk byte order; chunks at "0.0", at "c/0/0"
	}{
		{"same", zarray("<u2"), zarrJSON(v2keys, "little"), false, true, false},
		{"keys", zarray("<u2"), zarrJSON(defkeys, "little"), false, true, false},
		{"layout", zarray(">u2"), zarrJSON(v2keys, "big"), true, true, false},
		{"v2a", zarray("<u2"), "", false, true, false},
		{"v3a", "", zarrJSON(defkeys, "little"), false, false, true},
	} {
		if d.zarray != "" {
			put(d.dir+"/.zarray", d.zarray)
		}
		if d.zarrJSON != "" {
			put(d.dir+"/zarr.json", d.zarrJSON)
		}
		for cy := range 2 {
			for cx := range 2 {
				if d.v2 {
					writeFileAll(t, filepath.Join(root, d.dir, strings.Join([]string{itoa(cy), itoa(cx)}, ".")), chunk(cy, cx, d.big))
				}
				if d.v3 {
					writeFileAll(t, filepath.Join(root, d.dir, "c", itoa(cy), itoa(cx)), chunk(cy, cx, d.big))
				}
			}
		}
	}
	sharded := &shardArray{Name: "v3s", DType: "uint16", Shape: []int64{12, 20, 18}, Shard: []int64{8, 20, 18}, Inner: []int64{4, 10, 6},
		Fill: 3, Absent: []int64{5, 1}, gz: true, levels: []zarr3shard.Level{{Inner: []int64{4, 10, 6}, AtEnd: true, CRC: true}}}
	sharded.write(t, root)

	// The root: a v2 group consolidated in .zmetadata, and a v3 group
	// consolidated inline, each naming the arrays of its version.
	read := func(p string) json.RawMessage {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put(".zgroup", `{"zarr_format": 2}`)
	zmeta, err := json.Marshal(map[string]any{"zarr_consolidated_format": 1, "metadata": map[string]any{
		".zgroup": map[string]any{"zarr_format": 2}, "v2a/.zarray": read("v2a/.zarray"), "same/.zarray": read("same/.zarray")}})
	if err != nil {
		t.Fatal(err)
	}
	put(".zmetadata", string(zmeta))
	group, err := json.Marshal(map[string]any{"zarr_format": 3, "node_type": "group", "attributes": map[string]any{},
		"consolidated_metadata": map[string]any{"kind": "inline", "must_understand": false, "metadata": map[string]any{
			"v3a": read("v3a/zarr.json"), "v3s": read("v3s/zarr.json"), "same": read("same/zarr.json")}}})
	if err != nil {
		t.Fatal(err)
	}
	put("zarr.json", string(group))
	return root, vals
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestMixedMetadata mounts writeMixedMetadata's tree: metadata that
// describes the chunks served is rewritten, metadata that does not is
// hidden behind its .orig name with a log line, consolidated metadata of
// both versions matches the arrays' rewritten metadata, and zarr-python
// (v2) and zarrita (v3, with and without the consolidated metadata) read
// the values written.
func TestMixedMetadata(t *testing.T) {
	requireZarr(t)
	modules := requireZarrita(t)
	root, _ := writeMixedMetadata(t)
	var logs logBuffer
	mnt := mountSource(t, root, fs.Options{Log: newLogger(&logs)})

	ls := func(dir string) []string { return strings.Fields(run(t, "ls", "-A", filepath.Join(mnt, dir))) }
	for _, tc := range []struct {
		dir        string
		want, hide []string
	}{
		{"same", []string{".zarray", ".zarray.orig", "zarr.json", "zarr.json.orig"}, nil},
		{"keys", []string{".zarray", ".zarray.orig", "zarr.json.orig"}, []string{"zarr.json"}},
		{"layout", []string{".zarray", ".zarray.orig", "zarr.json.orig"}, []string{"zarr.json"}},
		{".", []string{".zmetadata", ".zmetadata.orig", "zarr.json", "zarr.json.orig"}, nil},
	} {
		got := ls(tc.dir)
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%s lists %q, want %s in it", tc.dir, got, w)
			}
		}
		for _, h := range tc.hide {
			if contains(got, h) {
				t.Errorf("%s lists %q, want %s hidden", tc.dir, got, h)
			}
			if _, err := runErr("cat", filepath.Join(mnt, tc.dir, h)); err == nil {
				t.Errorf("cat %s/%s succeeded, want it hidden", tc.dir, h)
			}
			if !strings.Contains(logs.String(), "/"+tc.dir+"/"+h) {
				t.Errorf("no log line names the hidden %s/%s", tc.dir, h)
			}
		}
	}
	orig, err := os.ReadFile(filepath.Join(root, "keys", "zarr.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, "cat", filepath.Join(mnt, "keys", "zarr.json.orig")); got != string(orig) {
		t.Errorf("keys/zarr.json.orig is %q, want the stored zarr.json", got)
	}
	run(t, python, "testdata/metacheck.py", mnt)

	// Readers by others: zarr-python opens the v2 metadata, zarrita the v3
	// (consolidated and not).
	run(t, python, "-c", `
import sys, numpy as np, zarr
want = np.arange(64, dtype="<u2").reshape(8, 8) * 3 + 1
for d in ("same", "keys", "layout", "v2a"):
    got = zarr.open_array(sys.argv[1] + "/" + d, mode="r")[:]
    assert (got == want).all(), (d, got)
    assert zarr.open_array(sys.argv[1] + "/" + d, mode="r").compressor is None, d
g = zarr.open_consolidated(sys.argv[1], mode="r")
for d in ("same", "v2a"):
    assert g[d].compressor is None and (g[d][:] == want).all(), d
print("ok")
`, mnt)
	script := nodeScript(t, modules, "zarr3shard.mjs")
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	mj, err := json.Marshal([]*shardArray{{Name: "v3s", DType: "uint16", Shape: []int64{12, 20, 18}, Shard: []int64{8, 20, 18},
		Inner: []int64{4, 10, 6}, Fill: 3, Absent: []int64{5, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifest, mj)
	run(t, "node", script, "check", mnt, manifest)
	run(t, "node", script, "check-consolidated", mnt, manifest)
}

// TestMetadataDescribesChunks walks every mounted tree of the integration
// test data (precomputed volumes and encodings, Zarr v2 and N5 written by
// zarr-python, Zarr v3 by zarrita, sharded v3 by hand, the mixed-format
// tree, and ../shared/fixtures when it is there) and fails on any
// metadata file that names a codec over chunk files volfs decoded.
func TestMetadataDescribesChunks(t *testing.T) {
	requireZarr(t)
	modules := requireZarrita(t)
	trees := map[string]string{}
	trees["precomputed"], _ = writeVolume(t)
	trees["encodings"], _ = writeEncodings(t)
	trees["mixed"], _ = writeMixedMetadata(t)
	zp := t.TempDir()
	run(t, python, "testdata/zarrcheck.py", "write", zp, "7")
	trees["zarr-python"] = zp
	zr := t.TempDir()
	run(t, "node", nodeScript(t, modules, "zarrita.mjs"), "write", zr)
	trees["zarrita"] = zr
	sh := t.TempDir()
	(&shardArray{Name: "nested", DType: "uint16", Shape: []int64{22, 40, 33}, Shard: []int64{8, 40, 36}, Inner: []int64{4, 10, 6},
		Fill: 1, Absent: []int64{7, 3}, gz: true,
		levels: []zarr3shard.Level{{Inner: []int64{8, 20, 18}}, {Inner: []int64{4, 10, 6}, AtEnd: true, CRC: true}}}).write(t, sh)
	trees["sharded"] = sh
	if dir, err := filepath.Abs("../../shared/fixtures"); err == nil {
		if _, err := os.Stat(dir); err == nil {
			trees["fixtures"] = dir
		}
	}
	for name, dir := range trees {
		t.Run(name, func(t *testing.T) {
			mnt := mountSource(t, dir, fs.Options{})
			t.Log(strings.TrimSpace(run(t, python, "testdata/metacheck.py", mnt)))
		})
	}
}
