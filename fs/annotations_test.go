package fs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/volfs/volfs/decode/ngobj"
	"github.com/volfs/volfs/internal/testenv"
)

// TestAnnotationCSVBound: the stored bytes annotations.csv reads are
// bounded by maxAnnotationBytes, the object past the bound refused before
// it counts (before, the last object was taken while any room was left,
// so the CSV read up to one object more). A sharded by_id index of three
// 12-byte POINT records, written by decode/testdata/precomputed_writer.py's
// shard writer, converts under a bound of 36 bytes and is refused under
// one of 35.
func TestAnnotationCSVBound(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testenv.Unavailable(t, "%s unavailable: %v", python, err)
	}
	src := t.TempDir()
	writer, err := filepath.Abs("../decode/testdata")
	if err != nil {
		t.Fatal(err)
	}
	script := `
import json, os, struct, sys
sys.path.insert(0, sys.argv[1])
import precomputed_writer as w
src = sys.argv[2]
spec = {'@type': 'neuroglancer_uint64_sharded_v1', 'hash': 'identity', 'preshift_bits': 0,
        'minishard_bits': 1, 'shard_bits': 0, 'minishard_index_encoding': 'raw', 'data_encoding': 'raw'}
os.makedirs(os.path.join(src, 'ann', 'by_id'))
with open(os.path.join(src, 'ann', 'info'), 'w') as f:
    json.dump({'@type': 'neuroglancer_annotations_v1',
               'dimensions': {'x': [4e-9, 'm'], 'y': [4e-9, 'm'], 'z': [4e-8, 'm']},
               'lower_bound': [0, 0, 0], 'upper_bound': [10, 10, 10], 'annotation_type': 'POINT',
               'properties': [], 'relationships': [], 'by_id': {'key': 'by_id', 'sharding': spec}, 'spatial': []}, f)
for name, data in w.shard_files(spec, {i: struct.pack('<3f', i, i, i) for i in (1, 2, 3)})[0].items():
    with open(os.path.join(src, 'ann', 'by_id', name), 'wb') as f:
        f.write(data)
`
	if out, err := exec.Command(python, "-c", script, writer, src).CombinedOutput(); err != nil {
		t.Fatalf("writing the shards: %v\n%s", err, out)
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(src, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { maxAnnotationBytes = old }(maxAnnotationBytes)
	for _, c := range []struct {
		bound int64
		ok    bool
	}{{36, true}, {35, false}} {
		maxAnnotationBytes = c.bound
		tree, _ := newTree(t, files, Options{})
		got, err := readAll(t, tree, "ann/"+AnnotationCSV)
		switch {
		case c.ok && (err != nil || strings.Count(string(got), "\n") != 4):
			t.Errorf("bound %d: got %q, %v; want a header and 3 rows", c.bound, got, err)
		case !c.ok && !errors.Is(err, ngobj.ErrCorrupt):
			t.Errorf("bound %d: got %d bytes, %v; want the index refused as more than the bound", c.bound, len(got), err)
		}
	}
}
