package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/zarr3shard"
)

// shardArray is a sharded Zarr v3 array as the tests describe it to the
// writers and to zarr3shard.mjs (its manifest). Element g holds
// zarr3shard.Value(g) (masked to the data type) unless its innermost chunk c is
// absent (sum of c's coordinates % Absent[0] == Absent[1]) or its shard is
// one of Missing: then it holds Fill.
type shardArray struct {
	Name    string    `json:"name"`
	DType   string    `json:"dtype"` // uint8 or uint16
	Shape   []int64   `json:"shape"`
	Shard   []int64   `json:"shard"`
	Inner   []int64   `json:"inner"` // innermost chunk shape
	Fill    int       `json:"fill"`
	Absent  []int64   `json:"absent"`
	Missing [][]int64 `json:"missing"`

	levels []zarr3shard.Level
	gz     bool // innermost chunks gzipped (else bytes only)
}

func (a *shardArray) elemSize() int64 { return map[string]int64{"uint8": 1, "uint16": 2}[a.DType] }

// absent reports whether the innermost chunk at c is left out of its shard.
func (a *shardArray) absent(c []int64) bool {
	s := int64(0)
	for _, x := range c {
		s += x
	}
	return len(a.Absent) == 2 && s%a.Absent[0] == a.Absent[1]
}

// missing reports whether the shard at s is never written.
func (a *shardArray) missing(s []int64) bool {
	for _, m := range a.Missing {
		if fmt.Sprint(m) == fmt.Sprint(s) {
			return true
		}
	}
	return false
}

// chunk returns what the mount must serve for the innermost chunk at c:
// its elements, C order, little-endian, at full chunk size.
func (a *shardArray) chunk(c []int64) []byte {
	n := int64(1)
	origin := make([]int64, len(c))
	shard := make([]int64, len(c))
	for d, s := range a.Inner {
		n *= s
		origin[d] = c[d] * s
		shard[d] = origin[d] / a.Shard[d]
	}
	es := a.elemSize()
	out := make([]byte, es*n)
	fill := a.absent(c) || a.missing(shard)
	g := make([]int64, len(c))
	for i := range n {
		v := uint16(a.Fill)
		if !fill {
			r := i
			for d := len(c) - 1; d >= 0; d-- {
				g[d] = origin[d] + r%a.Inner[d]
				r /= a.Inner[d]
			}
			v = zarr3shard.Value(g)
		}
		if es == 1 {
			out[i] = byte(v)
		} else {
			binary.LittleEndian.PutUint16(out[2*i:], v)
		}
	}
	return out
}

// encode returns the stored bytes of the shard at origin
// (zarr3shard.Encode).
func (a *shardArray) encode(origin []int64) []byte {
	return zarr3shard.Encode(a.levels, origin, a.Shard, func(o []int64) ([]byte, bool) {
		c := make([]int64, len(o))
		for d := range o {
			c[d] = o[d] / a.Inner[d]
		}
		if a.absent(c) {
			return nil, false
		}
		b := a.chunk(c)
		if a.gz {
			b = zarr3shard.Gzip(b)
		}
		return b, true
	})
}

// write writes the array under dir: its zarr.json and every shard that is
// not missing.
func (a *shardArray) write(t *testing.T, dir string) {
	t.Helper()
	meta, err := json.MarshalIndent(map[string]any{
		"zarr_format": 3, "node_type": "array", "shape": a.Shape, "data_type": a.DType,
		"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": a.Shard}},
		"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
		"fill_value":         a.Fill, "codecs": zarr3shard.Codecs(a.levels, a.gz), "attributes": map[string]any{"writer": "volfs test, by hand"},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFileAll(t, filepath.Join(dir, a.Name, "zarr.json"), meta)
	for _, s := range a.grid(a.Shard) {
		if a.missing(s) {
			continue
		}
		origin := make([]int64, len(s))
		for d := range s {
			origin[d] = s[d] * a.Shard[d]
		}
		writeFileAll(t, filepath.Join(dir, a.Name, a.key(s)), a.encode(origin))
	}
}

// grid lists the coordinates of every chunk of shape over the array, in C
// order.
func (a *shardArray) grid(shape []int64) [][]int64 {
	nd := len(shape)
	g := make([]int64, nd)
	n := int64(1)
	for d := range nd {
		g[d] = (a.Shape[d] + shape[d] - 1) / shape[d]
		n *= g[d]
	}
	var out [][]int64
	for i := range n {
		c := make([]int64, nd)
		r := i
		for d := nd - 1; d >= 0; d-- {
			c[d] = r % g[d]
			r /= g[d]
		}
		out = append(out, c)
	}
	return out
}

// key is the default chunk key of grid coordinates c.
func (a *shardArray) key(c []int64) string {
	parts := []string{"c"}
	for _, x := range c {
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, "/")
}

// hashFiles prints the sha256 of each file named on the command line, one
// a line, reading through the mount in another process.
const hashFiles = `
import hashlib, sys
for p in sys.argv[1:]:
    with open(p, "rb") as f:
        print(hashlib.sha256(f.read()).hexdigest())
`

// storedEntry returns the (offset, nbytes) of inner chunk i in a
// one-level shard file with its index (n entries, crc32c) at the end.
func storedEntry(t *testing.T, file string, n, i int) (uint64, uint64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	e := b[len(b)-4-16*n+16*i:]
	return binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:])
}

// TestZarr3Sharded mounts, over a loopback HTTP origin that counts the
// bytes it serves, sharded Zarr v3 arrays written by two writers: by hand
// in this test following the sharding_indexed spec (an 80 MiB shard of
// 256 KiB uint16 chunks, 75 MB stored, its index at the end with crc32c;
// a nested array with gzip chunks, its outer index at the start), and by
// zarrita (inner chunks zstd-encoded by zarrita, packed into a 96 MiB
// shard, 78 MB stored, by zarr3shard.mjs, which zarrita reads back before
// the mount). Each has
// absent inner chunks and a missing shard. Through the mount:
//
//   - the rewritten zarr.json has the inner chunk shape and no sharding;
//   - reading one inner chunk moves exactly its stored bytes plus the
//     shard's index, and the next chunk of that shard only its own bytes;
//   - every inner chunk file is exact (fill where absent or missing);
//   - volfs's peak memory after reading chunks of both shards stays far
//     below the shard size (16 MiB over its size at mount, 48 under
//     the race detector);
//   - the nested array's volume.raw view holds every element;
//   - zarrita reopens every mounted array and finds the values written.
func TestZarr3Sharded(t *testing.T) {
	modules := requireZarrita(t)
	requirePython(t)
	src := t.TempDir()
	arrays := []*shardArray{
		{Name: "go.u16", DType: "uint16", Shape: []int64{48, 1024, 1024}, Shard: []int64{40, 1024, 1024}, Inner: []int64{8, 128, 128},
			Fill: 7, Absent: []int64{9, 4}, Missing: [][]int64{{1, 0, 0}}, levels: []zarr3shard.Level{{Inner: []int64{8, 128, 128}, AtEnd: true, CRC: true}}},
		{Name: "go.nested", DType: "uint16", Shape: []int64{22, 40, 33}, Shard: []int64{8, 40, 36}, Inner: []int64{4, 10, 6},
			Fill: 65535, Absent: []int64{7, 3}, Missing: [][]int64{{1, 0, 0}}, gz: true,
			levels: []zarr3shard.Level{{Inner: []int64{8, 20, 18}}, {Inner: []int64{4, 10, 6}, AtEnd: true, CRC: true}}},
		// Written by zarr3shard.mjs; keep in step with its zs.
		{Name: "zs.u8", DType: "uint8", Shape: []int64{256, 512, 1536}, Shard: []int64{256, 512, 768}, Inner: []int64{64, 128, 128},
			Fill: 9, Absent: []int64{7, 3}, Missing: [][]int64{{0, 0, 1}}},
	}
	for _, a := range arrays[:2] {
		a.write(t, src)
	}
	script := nodeScript(t, modules, "zarr3shard.mjs")
	run(t, "node", script, "write", src)
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	mj, err := json.Marshal(arrays)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifest, mj)

	origin, log := serveCounted(t, src)
	s := startVolfs(t, "mount", "--cache-size", "16MiB", origin.URL)
	base := peakRSS(t, s.cmd.Process.Pid)

	for _, a := range arrays {
		var meta struct {
			ChunkGrid struct {
				Configuration struct {
					ChunkShape []int64 `json:"chunk_shape"`
				}
			} `json:"chunk_grid"`
			Codecs []map[string]any
		}
		b, err := os.ReadFile(filepath.Join(s.mnt, a.Name, "zarr.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(meta.ChunkGrid.Configuration.ChunkShape) != fmt.Sprint(a.Inner) || len(meta.Codecs) != 1 || meta.Codecs[0]["name"] != "bytes" {
			t.Errorf("%s: mounted zarr.json has chunk shape %v and codecs %v, want %v and bytes only",
				a.Name, meta.ChunkGrid.Configuration.ChunkShape, meta.Codecs, a.Inner)
		}
	}

	// Bytes moved per inner chunk read.
	for _, tc := range []struct {
		array  string
		n      int     // inner chunks a shard
		first  []int64 // a chunk, then another of the same shard
		second []int64
	}{
		{"go.u16", 5 * 8 * 8, []int64{0, 0, 0}, []int64{0, 1, 0}},
		{"zs.u8", 4 * 4 * 6, []int64{0, 0, 0}, []int64{1, 1, 0}},
	} {
		var a *shardArray
		for _, x := range arrays {
			if x.Name == tc.array {
				a = x
			}
		}
		key := "/" + tc.array + "/c/0/0/0"
		file := filepath.Join(src, tc.array, "c", "0", "0", "0")
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		index := int64(16*tc.n + 4)
		for i, c := range [][]int64{tc.first, tc.second} {
			if a.absent(c) {
				t.Fatalf("%s: chunk %v is absent; pick another", tc.array, c)
			}
			before, _ := log.snapshot(key)
			got := []byte(run(t, "cat", filepath.Join(s.mnt, tc.array, a.key(c))))
			after, ranges := log.snapshot(key)
			if !bytes.Equal(got, a.chunk(c)) {
				t.Errorf("%s: chunk %v: %d bytes differ from those written", tc.array, c, len(got))
			}
			grid := []int64{a.Shard[0] / a.Inner[0], a.Shard[1] / a.Inner[1], a.Shard[2] / a.Inner[2]}
			_, stored := storedEntry(t, file, tc.n, int((c[0]*grid[1]+c[1])*grid[2]+c[2]))
			want := int64(stored)
			if i == 0 {
				want += index
			}
			moved := after - before
			if moved != want {
				t.Errorf("%s: reading chunk %v moved %d bytes of the %d-byte shard, want %d (its %d stored bytes%s); ranges %q",
					tc.array, c, moved, fi.Size(), want, stored, map[bool]string{true: " and the index"}[i == 0], ranges)
			}
			t.Logf("%s: chunk %v (%d bytes decoded, %d stored): %d bytes moved of the %d-byte shard (%.3f%%)",
				tc.array, c, len(got), stored, moved, fi.Size(), 100*float64(moved)/float64(fi.Size()))
		}
	}

	// One chunk costs a chunk, not a shard.
	peak := peakRSS(t, s.cmd.Process.Pid)
	t.Logf("volfs peak resident memory: %.1f MiB at mount, %.1f MiB after reading 4 chunks of 75 MB and 78 MB shards",
		float64(base)/(1<<20), float64(peak)/(1<<20))
	// The race detector's shadow memory triples what the reads allocate.
	grow := int64(map[bool]int{false: 16, true: 48}[raceEnabled]) << 20
	if limit := base + grow; peak > limit {
		t.Errorf("volfs peak resident memory %d MiB after reading 4 inner chunks, want at most %d MiB (at mount %d MiB + %d)",
			peak>>20, limit>>20, base>>20, grow>>20)
	}

	// Every inner chunk, exact.
	for _, a := range arrays {
		cs := a.grid(a.Inner)
		paths := make([]string, len(cs))
		for i, c := range cs {
			paths[i] = filepath.Join(s.mnt, a.Name, a.key(c))
		}
		got := strings.Fields(run(t, python, append([]string{"-c", hashFiles}, paths...)...))
		if len(got) != len(cs) {
			t.Fatalf("%s: %d hashes for %d chunks", a.Name, len(got), len(cs))
		}
		bad := 0
		for i, c := range cs {
			sum := sha256.Sum256(a.chunk(c))
			if got[i] != hex.EncodeToString(sum[:]) {
				if bad++; bad <= 3 {
					t.Errorf("%s: chunk %v differs from what was written (absent %v)", a.Name, c, a.absent(c))
				}
			}
		}
		t.Logf("%s: %d inner chunks read, %d wrong", a.Name, len(cs), bad)
	}
	// The stitched view of the nested array reads through the inner
	// chunks: every element in C order, fill where absent or missing.
	nested := arrays[1]
	var want []byte
	for _, c := range nested.grid([]int64{1, 1, 1}) {
		cc := []int64{c[0] / nested.Inner[0], c[1] / nested.Inner[1], c[2] / nested.Inner[2]}
		sh := []int64{c[0] / nested.Shard[0], c[1] / nested.Shard[1], c[2] / nested.Shard[2]}
		v := zarr3shard.Value(c)
		if nested.absent(cc) || nested.missing(sh) {
			v = uint16(nested.Fill)
		}
		want = binary.LittleEndian.AppendUint16(want, v)
	}
	if got := run(t, "cat", filepath.Join(s.mnt, nested.Name, "volume.raw")); got != string(want) {
		t.Errorf("%s/volume.raw: %d bytes differ from the %d written", nested.Name, len(got), len(want))
	}

	// Reading them all in order: the 16 MiB cache, the read-ahead and
	// the collector's headroom (cache.MemoryLimit), whatever the shards.
	checkPeak(t, s)

	run(t, "node", script, "check", s.mnt, manifest)
}

// requireZarrita returns the node_modules that holds zarrita, skipping (or,
// with VOLFS_REQUIRE_FUSE, failing) when it is not installed.
func requireZarrita(t *testing.T) string {
	t.Helper()
	modules, err := filepath.Abs(zarritaModules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "zarrita")); err != nil {
		if os.Getenv("VOLFS_REQUIRE_FUSE") != "" {
			t.Fatalf("zarrita is not installed in %s (bash .ci/run installs it): %v", modules, err)
		}
		t.Skipf("zarrita is not installed in %s: %v", modules, err)
	}
	return modules
}

// nodeScript copies testdata/name into a directory beside a link to
// modules (node resolves an ES module's imports from its own directory)
// and returns its path.
func nodeScript(t *testing.T, modules, name string) string {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, name), script)
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// writeFileAll writes p, creating its parent directories.
func writeFileAll(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, data)
}

// TestHostileZarr3HugeInnerGrid: shards whose metadata promises 2^21 to
// 2^26 one-element inner chunks behind a 1 MiB object. An index of more
// than 64 MiB (2^22 chunks and a crc32c) is refused when the metadata is read: the
// array passes through undecoded, its objects byte for byte. Up to that,
// a read costs the chunk's block of the index, or, for an index with a
// crc32c, a pass over the index in 1 MiB pieces: the 1 MiB object cannot
// hold a 64 MiB index, so every read is EIO, at once, with a few MiB of
// memory, and the mount serves on.
func TestHostileZarr3HugeInnerGrid(t *testing.T) {
	src := t.TempDir()
	object := pattern(1<<20, 5)
	cases := []struct {
		name   string
		shape  []int64
		atEnd  bool
		crc    bool
		refuse bool // the array passes through
	}{
		{"2^26 end crc", []int64{1 << 10, 1 << 8, 1 << 8}, true, true, true},
		{"2^24 start", []int64{1 << 8, 1 << 8, 1 << 8}, false, false, true},
		{"2^22 end crc", []int64{1 << 6, 1 << 8, 1 << 8}, true, true, true}, // 4 bytes over
		{"2^21 end crc", []int64{1 << 5, 1 << 8, 1 << 8}, true, true, false},
		{"2^21 start crc", []int64{1 << 5, 1 << 8, 1 << 8}, false, true, false},
		{"2^22 start", []int64{1 << 6, 1 << 8, 1 << 8}, false, false, false},
	}
	names := make([]string, len(cases))
	for i, tc := range cases {
		names[i] = strings.NewReplacer("^", "", " ", "-").Replace(tc.name)
		a := &shardArray{Name: names[i], DType: "uint8", Shape: tc.shape, Shard: tc.shape, Inner: []int64{1, 1, 1},
			levels: []zarr3shard.Level{{Inner: []int64{1, 1, 1}, AtEnd: tc.atEnd, CRC: tc.crc}}}
		meta, err := json.Marshal(map[string]any{
			"zarr_format": 3, "node_type": "array", "shape": a.Shape, "data_type": a.DType,
			"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": a.Shard}},
			"chunk_key_encoding": map[string]any{"name": "default"}, "fill_value": 0, "codecs": zarr3shard.Codecs(a.levels, a.gz),
		})
		if err != nil {
			t.Fatal(err)
		}
		writeFileAll(t, filepath.Join(src, names[i], "zarr.json"), meta)
		writeFileAll(t, filepath.Join(src, names[i], "c", "0", "0", "0"), object)
	}
	s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(s.mnt, names[i])
			if tc.refuse {
				out, err := runBounded(t, time.Minute, "cat", filepath.Join(dir, "c", "0", "0", "0"))
				if err != nil || out != string(object) {
					t.Errorf("the undecoded shard: %v, %d bytes, want its %d bytes as stored", err, len(out), len(object))
				}
				return
			}
			last := filepath.Join(dir, "c", fmt.Sprint(tc.shape[0]-1), fmt.Sprint(tc.shape[1]-1), fmt.Sprint(tc.shape[2]-1))
			for _, p := range []string{filepath.Join(dir, "c", "0", "0", "0"), last} {
				start := time.Now()
				out, err := runBounded(t, time.Minute, "cat", p)
				if err == nil || !strings.Contains(out, "Input/output error") {
					t.Errorf("cat %s: %v %.80q, want EIO", p, err, out)
				}
				t.Logf("cat %s: EIO in %v", strings.TrimPrefix(p, s.mnt), time.Since(start).Round(time.Millisecond))
			}
		})
	}
	checkAlive(t, s.mnt, filepath.Join(names[0], "zarr.json"), func() []byte {
		b, _ := os.ReadFile(filepath.Join(src, names[0], "zarr.json"))
		return b
	}())
	checkPeak(t, s)
}
