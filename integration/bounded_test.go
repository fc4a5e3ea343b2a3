package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Memory beyond the cache under hostile input (issue 16, item 10): every
// buffer a load or a reader holds beside the cache draws on the budget
// that --cache-size sets, and readers wait for room rather than exceed it.
// Each test mounts for real, reads through subprocesses and asserts the
// volfs process's peak resident memory.

// writeMinishardShard writes a precomputed layer of one sharded scale,
// 2^23 x 1 x 1 one-voxel chunks in one shard of 8 minishards (identity
// hash, so chunk x lies in minishard x%8), whose every minishard index
// lists perMinishard chunks: 24 bytes each, stored raw or gzipped. Chunk
// x = m + 8k holds the byte k%251+1.
func writeMinishardShard(t *testing.T, src string, perMinishard int, gz bool) {
	t.Helper()
	enc := "raw"
	if gz {
		enc = "gzip"
	}
	writeFile(t, filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [8388608, 1, 1], "resolution": [1, 1, 1], "chunk_sizes": [[1, 1, 1]], "encoding": "raw",
  "sharding": {"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0, "minishard_bits": 3, "shard_bits": 0,
   "minishard_index_encoding": "`+enc+`", "data_encoding": "raw"}}]}`))
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, perMinishard)
	for k := range data {
		data[k] = byte(k%251 + 1)
	}
	// Chunk k of every minishard is byte k of the data: ids m, m+8, ...
	// (delta coded), each starting where the previous ends, one byte.
	var indexes [][]byte
	for m := range 8 {
		idx := make([]byte, 24*perMinishard)
		for k := range perMinishard {
			id := uint64(8)
			if k == 0 {
				id = uint64(m)
			}
			binary.LittleEndian.PutUint64(idx[8*k:], id)
			binary.LittleEndian.PutUint64(idx[8*(2*perMinishard+k):], 1)
		}
		if gz {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(idx)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			idx = b.Bytes()
		}
		indexes = append(indexes, idx)
	}
	f, err := os.Create(filepath.Join(src, "s0", "0.shard"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shardIndex := make([]byte, 16*8)
	at := uint64(len(data))
	for m, idx := range indexes {
		binary.LittleEndian.PutUint64(shardIndex[16*m:], at)
		at += uint64(len(idx))
		binary.LittleEndian.PutUint64(shardIndex[16*m+8:], at)
	}
	for _, b := range append([][]byte{shardIndex, data}, indexes...) {
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// minishardPeak bounds the peak of TestHostileMinishardIndexes: the
// 16 MiB cache, the buffer pool and one 12 MiB index at a time (stored,
// parsed and the memo's copy).
var minishardPeak = int64(map[bool]int{false: 150, true: 420}[raceEnabled]) << 20

// TestHostileMinishardIndexes: eight readers, each of a chunk in its own
// minishard whose index is 12 MiB (half a million entries), with a 16 MiB
// cache. Every index is read, parsed and copied into the memo (too large
// to keep there), so each reader's load held three times its index at
// once: before the load budget the eight peaked together. Now each index
// reserves its bytes from the store's budget of loads (8 MiB here, so a
// 36 MiB index runs alone) and the loads wait their turn; every byte is
// checked, raw and gzipped indexes alike.
func TestHostileMinishardIndexes(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "raw", true: "gzip"}[gz], func(t *testing.T) {
			src := t.TempDir()
			const perMinishard = 1 << 19
			writeMinishardShard(t, src, perMinishard, gz)
			s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
			var wg sync.WaitGroup
			start := time.Now()
			for m := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := 1000*m + 7
					x := m + 8*k
					p := filepath.Join(s.mnt, "s0", fmt.Sprintf("%d-%d_0-1_0-1", x, x+1))
					out, err := runBounded(t, 3*time.Minute, "cat", p)
					if want := string([]byte{byte(k%251 + 1)}); err != nil || out != want {
						t.Errorf("chunk %d (minishard %d): %v %q, want %q", x, m, err, out, want)
					}
				}()
			}
			wg.Wait()
			t.Logf("8 readers: %v", time.Since(start).Round(time.Millisecond))
			checkPeakBelow(t, s, minishardPeak)
		})
	}
}

// walkPeak bounds the peak of TestHostileDirectoryWalk: measured 85.5 MiB
// with 8192 directories and files kept, 103.5 MiB when every directory
// was kept (about 330 bytes each, growing with the tree).
const walkPeak = 96 << 20

// TestHostileDirectoryWalk: find over a Zarr v3 array of 2^16 x 1
// one-sample chunks with nested keys (c/I/0: 65 536 key directories of
// one chunk file each) looks up every directory. Each directory inode
// was kept for the life of the mount; now directories share the bound of
// files looked up (8192), beyond which the kernel is asked to drop them.
// Every chunk is still found, and reads after the walk.
//
// It runs in .ci/run's second pass, without the race detector: under it
// the 200 000 lookups take more than five minutes on the shared machine.
func TestHostileDirectoryWalk(t *testing.T) {
	if raceEnabled {
		t.Skip("memory is measured without the race detector")
	}
	src := t.TempDir()
	const n = 1 << 16
	if err := os.MkdirAll(filepath.Join(src, "arr", "c", "12345"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "arr", "zarr.json"), []byte(fmt.Sprintf(`{"zarr_format": 3, "node_type": "array", "shape": [%d, 1], "data_type": "uint8",
 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1]}},
 "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
 "fill_value": 0, "codecs": [{"name": "bytes"}]}`, n)))
	writeFile(t, filepath.Join(src, "arr", "c", "12345", "0"), []byte{9})
	s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
	start := time.Now()
	out, err := runBounded(t, 5*time.Minute, "find", filepath.Join(s.mnt, "arr", "c"), "-type", "f")
	t.Logf("find over %d directories: %v", n, time.Since(start).Round(time.Millisecond))
	if got := strings.Count(out, "\n"); err != nil || got != n {
		t.Fatalf("find: %v, %d files, want %d", err, got, n)
	}
	checkAlive(t, s.mnt, "arr/c/12345/0", []byte{9})
	checkPeakBelow(t, s, walkPeak)
}

// TestHostileInfoWalk: `volfs info` over a tree with a Zarr v2 array of
// 2^40 chunks whose keys share its directory and a volume seven levels
// down. It walked every key of the grid (never ending); it now looks only
// at what the source lists, six levels deep, and says what it skipped.
// (The bound on entries examined, fs.MaxWalkEntries, is checked by
// fs.TestWalkBounded.)
func TestHostileInfoWalk(t *testing.T) {
	src := t.TempDir()
	writeZarray(t, filepath.Join(src, "huge"), []int64{1 << 20, 1 << 20}, []int64{1, 1}, nil)
	writeFile(t, filepath.Join(src, "huge", "0.0"), []byte{1})
	deep := filepath.Join(src, "a", "b", "c", "d", "e", "f", "g")
	writeZarray(t, deep, []int64{4}, []int64{4}, nil)
	start := time.Now()
	out, err := runBounded(t, 2*time.Minute, python, "-c", peakOfChild, volfsBin, "info", src)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("volfs info: %v\n%s", err, out)
	}
	i := strings.LastIndex(out, "\npeak_kb ")
	var peakKB, exit int
	if _, err := fmt.Sscanf(out[i+1:], "peak_kb %d exit %d", &peakKB, &exit); i < 0 || err != nil {
		t.Fatalf("no peak in %q: %v", out, err)
	}
	out = out[:i]
	t.Logf("volfs info: %v, peak %d MiB\n%s", elapsed.Round(time.Millisecond), peakKB>>10, out)
	if exit != 0 {
		t.Errorf("volfs info: exit %d, want 0", exit)
	}
	for _, want := range []string{
		"1099511627776", // the huge array's chunks, counted, not walked
		"not walked: 1 directories 6 levels down",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("volfs info: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "a/b/c/d/e/f/g") {
		t.Errorf("volfs info listed the volume seven levels down:\n%s", out)
	}
	checkRSS(t, int64(peakKB)<<10)
}
