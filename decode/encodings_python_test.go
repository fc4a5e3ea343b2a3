package decode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/volfs/volfs/decode/codec"
	"github.com/volfs/volfs/internal/testenv"
)

// debianPython is Debian's interpreter, which has numpy and PIL; a pyenv shim on
// PATH may not.
const debianPython = "/usr/bin/python3"

// pythonManifest is what testdata/precomputed_writer.py writes.
type pythonManifest struct {
	Images []struct {
		Kind, File, Expect string
		Extent             [3]int64
		Channels, Elem     int
	}
	Cseg []struct {
		File, Expect   string
		Extent, Block  [3]int64
		Channels, Elem int
	}
	Shards []struct {
		Dir      string
		Sharding json.RawMessage
		Grid     []int64
		Chunks   []struct {
			Pos     []int64
			ID      uint64
			Missing bool
			Expect  string
			Cseg    *struct {
				Extent, Block  [3]int64
				Channels, Elem int
			}
		}
	}
}

// writeWithPython runs testdata/precomputed_writer.py into a temporary
// directory and returns the directory and its manifest. It skips when
// Debian's python3 with numpy and PIL is missing, unless
// VOLFS_REQUIRE_FUSE is set (as in CI), where it fails.
func writeWithPython(t *testing.T) (string, *pythonManifest) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import numpy, PIL").Run(); err != nil {
		testenv.Unavailable(t, "%s with numpy and PIL unavailable: %v", debianPython, err)
	}
	dir := t.TempDir()
	if out, err := exec.Command(debianPython, "testdata/precomputed_writer.py", dir).CombinedOutput(); err != nil {
		t.Fatalf("precomputed_writer.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m pythonManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Images) == 0 || len(m.Cseg) == 0 || len(m.Shards) == 0 {
		t.Fatalf("manifest lists %d images, %d cseg chunks, %d sharded scales", len(m.Images), len(m.Cseg), len(m.Shards))
	}
	return dir, &m
}

// TestWrittenByPython checks the decoders and the shard reader against
// data that testdata/precomputed_writer.py writes with numpy and PIL, once
// for all three subtests.
func TestWrittenByPython(t *testing.T) {
	dir, m := writeWithPython(t)
	t.Run("encodings", func(t *testing.T) { testEncodingsWrittenByPython(t, dir, m) })
	t.Run("shards", func(t *testing.T) { testShardsWrittenByPython(t, dir, m) })
	t.Run("ranged", func(t *testing.T) { testShardReadsAreRanged(t, dir, m) })
}

func readTestFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testEncodingsWrittenByPython decodes jpeg and png chunks written by PIL
// (and 16-bit multi-channel PNGs by a writer in the script) and
// compressed_segmentation chunks written by the script's own encoder, and
// compares them with numpy's arrays: png and compressed_segmentation
// exactly; jpeg against PIL's (libjpeg's) decode of the same bytes, with
// under 2% of samples more than 1 off, and none more than 2 off for
// grayscale, 3 for colour. image/jpeg's IDCT rounds differently from
// libjpeg's islow one (±1 per sample); in colour a ±1 in Cb becomes ±1.8
// in blue, so an isolated sample can land 3 off.
func testEncodingsWrittenByPython(t *testing.T, dir string, m *pythonManifest) {
	for _, c := range m.Images {
		t.Run(c.File, func(t *testing.T) {
			stored, want := readTestFile(t, dir, c.File), readTestFile(t, dir, c.Expect)
			var got []byte
			var err error
			tolerance := 0
			switch {
			case c.Kind == "png":
				got, err = codec.PNG(nil, stored, c.Extent, c.Channels, c.Elem)
			case c.Channels == 1:
				got, err = codec.JPEG(nil, stored, c.Extent, c.Channels)
				tolerance = 2
			default:
				got, err = codec.JPEG(nil, stored, c.Extent, c.Channels)
				tolerance = 3
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("decoded %d bytes, want %d", len(got), len(want))
			}
			worst, off := 0, 0
			for i := range got {
				d := absInt(int(got[i]) - int(want[i]))
				worst = max(worst, d)
				if d > 1 {
					off++
				}
			}
			if worst > tolerance {
				t.Errorf("decoded bytes differ from numpy's by up to %d, want at most %d", worst, tolerance)
			}
			if off*50 > len(got) {
				t.Errorf("%d of %d decoded bytes differ from numpy's by more than 1, want under 2%%", off, len(got))
			}
		})
	}
	for _, c := range m.Cseg {
		t.Run(c.File, func(t *testing.T) {
			stored, want := readTestFile(t, dir, c.File), readTestFile(t, dir, c.Expect)
			got, err := codec.CompressedSegmentation(nil, stored, c.Extent, c.Channels, c.Elem, c.Block)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("decoded %d bytes differ from numpy's %d", len(got), len(want))
			}
		})
	}
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// filesUnder loads every file below dir into a map keyed by its
// slash-separated path relative to dir.
func filesUnder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// testShardsWrittenByPython reads every chunk of sharded scales written by
// the script's sharded writer (both hashes, gzip on and off for indexes and
// data, shard_bits 0 to 5, minishard_bits 0 to 13, preshift, missing
// chunks, compressed_segmentation chunks inside shards). Chunk ids are the
// compressed Morton codes of the grid positions, computed here and checked
// against the script's; written chunks must equal numpy's bytes, missing
// ones must be ErrMissing or, when their whole shard was never written,
// the source's not-found error.
func testShardsWrittenByPython(t *testing.T, dir string, m *pythonManifest) {
	src := newMemSource(filesUnder(t, dir))
	ctx := context.Background()
	for _, sc := range m.Shards {
		t.Run(sc.Dir, func(t *testing.T) {
			s, field, err := parseSharding(sc.Sharding)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			if compressedMortonBits(sc.Grid) > 64 {
				t.Fatalf("grid %v needs more than 64 bits", sc.Grid)
			}
			read, missing := 0, 0
			for _, c := range sc.Chunks {
				id := compressedMortonCode(c.Pos, sc.Grid)
				if id != c.ID {
					t.Errorf("chunk %v: compressed Morton code %d, python's %d", c.Pos, id, c.ID)
					continue
				}
				got, err := s.readChunk(ctx, src, sc.Dir, id, 1<<20)
				if c.Missing {
					missing++
					if !errors.Is(err, ErrMissing) && !errors.Is(err, errNoObject) {
						t.Errorf("missing chunk %v (id %d): got %d bytes, %v", c.Pos, id, len(got), err)
					}
					continue
				}
				if err != nil {
					t.Errorf("chunk %v (id %d): %v", c.Pos, id, err)
					continue
				}
				if cs := c.Cseg; cs != nil {
					got, err = codec.CompressedSegmentation(nil, got, cs.Extent, cs.Channels, cs.Elem, cs.Block)
					if err != nil {
						t.Errorf("chunk %v (id %d): %v", c.Pos, id, err)
						continue
					}
				}
				if want := readTestFile(t, dir, c.Expect); !slices.Equal(got, want) {
					t.Errorf("chunk %v (id %d): %d bytes differ from numpy's %d", c.Pos, id, len(got), len(want))
				}
				read++
			}
			if read == 0 || missing == 0 {
				t.Errorf("read %d chunks and %d missing ones: the case checks too little", read, missing)
			}
		})
	}
}

// testShardReadsAreRanged reads from the python-written scales through the
// counting source: one chunk moves a small fraction of its shard and no
// whole object, and reading every chunk of a minishard loads its index
// once.
func testShardReadsAreRanged(t *testing.T, dir string, m *pythonManifest) {
	files := filesUnder(t, dir)
	ctx := context.Background()
	for _, sc := range m.Shards {
		s, _, err := parseSharding(sc.Sharding)
		if err != nil {
			t.Fatal(err)
		}
		// Group the written chunks by shard file and minishard, and pick
		// the fullest minishard.
		type place struct {
			shard     string
			minishard uint64
		}
		groups := map[place][]uint64{}
		perShard := map[string]int{}
		var big place
		for _, c := range sc.Chunks {
			if c.Missing {
				continue
			}
			name, ms := s.shardFile(c.ID)
			p := place{name, ms}
			groups[p] = append(groups[p], c.ID)
			perShard[name]++
			if len(groups[p]) > len(groups[big]) {
				big = p
			}
		}
		shardKey := sc.Dir + "/" + big.shard
		shardSize := int64(len(files[shardKey]))

		src := newMemSource(files)
		if _, err := s.readChunk(ctx, src, sc.Dir, groups[big][0], 1<<20); err != nil {
			t.Fatal(err)
		}
		moved, gets, _ := src.stats()
		if gets != 0 {
			t.Errorf("%s: one chunk read made %d whole-object reads", sc.Dir, gets)
		}
		// The shard index (at most 64 KiB, else one entry), one minishard
		// index and one chunk; every scale here has several chunks a shard.
		if perShard[big.shard] > 1 && moved*2 > shardSize {
			t.Errorf("%s: one chunk moved %d bytes of a %d-byte shard", sc.Dir, moved, shardSize)
		}
		for _, id := range groups[big] {
			if _, err := s.readChunk(ctx, src, sc.Dir, id, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		src.mu.Lock()
		for key, n := range src.loads {
			if n != 1 {
				t.Errorf("%s: %s loaded %d times", sc.Dir, key, n)
			}
			if !strings.HasPrefix(key, shardKey+"#") {
				t.Errorf("%s: memo key %q is not the shard's key plus a suffix", sc.Dir, key)
			}
		}
		if len(src.loads) != 2 {
			t.Errorf("%s: reading minishard %d of %s loaded %v, want its shard index and its minishard index", sc.Dir, big.minishard, big.shard, src.loads)
		}
		src.mu.Unlock()
	}
}
