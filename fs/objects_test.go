package fs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/volfs/volfs/decode/ngobj"
	"github.com/volfs/volfs/fetcher"
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
	files := writeShardedPython(t, annScript)
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

// annScript writes a sharded annotation by_id index of three 12-byte
// POINT records under ann/ in sys.argv[2].
const annScript = `
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

// writeShardedPython runs script with Debian's python3 and
// decode/testdata (its shard writer, built from neuroglancer's
// sharded.md) as sys.argv[1] and a temporary directory as sys.argv[2],
// and returns the files it wrote there.
func writeShardedPython(t *testing.T, script string) map[string][]byte {
	t.Helper()
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		testenv.Unavailable(t, "%s unavailable: %v", python, err)
	}
	src := t.TempDir()
	writer, err := filepath.Abs("../decode/testdata")
	if err != nil {
		t.Fatal(err)
	}
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
	return files
}

// TestShardedListingMemo: the ids of a sharded skeleton view are memoised
// per shard: listing the view again looks up one memo per shard file
// instead of walking its shard index and every minishard index again.
// When a read finds a shard rewritten, the id lists made from the old
// version go with its indexes: the next listing names the new objects.
func TestShardedListingMemo(t *testing.T) {
	tree, dir, list := skeletonTree(t)
	lookups := func() int64 {
		st := tree.memo.Stats()
		return st.Hits + st.Misses + st.Shared
	}
	first := list()
	if len(first) != 39 {
		t.Fatalf("listed %d objects, want 39: %v", len(first), first)
	}
	before := lookups()
	if again := list(); !slices.Equal(again, first) {
		t.Errorf("listed again: %v, want %v", again, first)
	}
	if n := lookups() - before; n != 2 {
		t.Errorf("listing again looked up %d memos, want 2 (one id list per shard file)", n)
	}

	// The shards rewritten with 20 objects; reading one finds the change.
	rewriteShards(t, dir)
	// One object of each minishard of each shard (identity hash: the
	// minishard is id&3, the shard bit 2), so that every memo made from
	// the old versions meets the new ones.
	for _, id := range []string{"8", "1", "2", "3", "4", "5", "6", "7"} {
		if _, err := readAll(t, tree, "seg/"+SkeletonView+"/"+id+".swc"); err != nil {
			t.Fatalf("reading %s.swc after the rewrite: %v", id, err)
		}
	}
	if got := list(); len(got) != 20 {
		t.Errorf("after the shards were rewritten: listed %d objects, want 20: %v", len(got), got)
	}
}

// skeletonTree writes skelScript's segmentation into a local source and
// returns a tree of it, its directory, and a listing of its skeleton view.
func skeletonTree(t *testing.T) (*Tree, string, func() []string) {
	t.Helper()
	dir := writeFiles(t, writeShardedPython(t, skelScript))
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := New(context.Background(), src, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		t.Helper()
		n, err := tree.Resolve(context.Background(), "seg/"+SkeletonView)
		if err != nil {
			t.Fatal(err)
		}
		return names(t, n.(Dir))
	}
	return tree, dir, list
}

// rewriteShards writes the shards of skelScript with 20 objects instead
// of 39 over those in dir, and returns their keys.
func rewriteShards(t *testing.T, dir string) []string {
	t.Helper()
	var shards []string
	for name, b := range writeShardedPython(t, strings.Replace(skelScript, "range(1, 40)", "range(1, 21)", 1)) {
		if strings.HasSuffix(name, ".shard") {
			shards = append(shards, name)
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return shards
}

// skelScript writes a segmentation whose skeletons, 39 empty ones, are
// in two shard files.
const skelScript = `
import json, os, struct, sys
sys.path.insert(0, sys.argv[1])
import precomputed_writer as w
src = sys.argv[2]
spec = {'@type': 'neuroglancer_uint64_sharded_v1', 'hash': 'identity', 'preshift_bits': 0,
        'minishard_bits': 2, 'shard_bits': 1, 'minishard_index_encoding': 'raw', 'data_encoding': 'raw'}
os.makedirs(os.path.join(src, 'seg', 'skel'))
with open(os.path.join(src, 'seg', 'info'), 'w') as f:
    json.dump({'type': 'segmentation', 'data_type': 'uint64', 'num_channels': 1, 'skeletons': 'skel',
               'scales': [{'key': 's0', 'size': [8, 8, 8], 'resolution': [8, 8, 40], 'voxel_offset': [0, 0, 0],
                           'chunk_sizes': [[8, 8, 8]], 'encoding': 'raw'}]}, f)
with open(os.path.join(src, 'seg', 'skel', 'info'), 'w') as f:
    json.dump({'@type': 'neuroglancer_skeletons', 'sharding': spec}, f)
files, _ = w.shard_files(spec, {i: struct.pack('<II', 0, 0) for i in range(1, 40)})
assert len(files) == 2, files.keys()
for name, data in files.items():
    with open(os.path.join(src, 'seg', 'skel', name), 'wb') as f:
        f.write(data)
`

// TestMemoHitLearnsNothing: a memo hit replays the identities its value
// was made from, to pin the load to them, but does not teach them to the
// tree as if read now: a newer version the tree has learnt since (here by
// a Stat after the shards were rewritten) stays the one it knows, so tier
// entries and memos made from the old one are found stale.
func TestMemoHitLearnsNothing(t *testing.T) {
	tree, dir, list := skeletonTree(t)
	list()
	shards := rewriteShards(t, dir)
	newer := map[string]fetcher.Identity{}
	for _, key := range shards {
		_, id, err := tree.origin.Stat(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		newer[key] = id
	}
	list() // the id lists' memos answer, made from the old shards
	for _, key := range shards {
		if id, _ := tree.origin.Known(key); id != newer[key] {
			t.Errorf("%s: the tree knows %q after a memo hit, want the newer %q it learnt before", key, id, newer[key])
		}
	}
}
