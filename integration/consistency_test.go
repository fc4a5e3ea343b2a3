package integration

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// The cases of issue 28 ("one version per read") that this file holds,
// each through a volfs process mounted for real and read by a subprocess:
// a metadata edit between two mounts that share a disk cache or a shared
// tier (the recipe fingerprint), and a shard rewritten during a mount
// (memoised indexes pinned to the object's version).

// deltaArray writes a Zarr v2 array of four uint8 whose one chunk "0"
// stores 01 01 01 01 (zlib-compressed, so that the chunk is decoded and
// kept by the tiers rather than passed through), with filters (a JSON
// value) as given: with a delta filter it decodes to 01 02 03 04, without
// one to 01 01 01 01. The chunk is written only when absent: its identity
// stays the same across edits of the metadata.
func deltaArray(t *testing.T, dir, filters string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, ".zarray"), []byte(`{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": {"id": "zlib", "level": 1}, "fill_value": 0, "order": "C", "filters": `+filters+`}`))
	if _, err := os.Stat(filepath.Join(dir, "0")); err == nil {
		return
	}
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	if _, err := w.Write([]byte{1, 1, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "0"), b.Bytes())
}

// TestRecipeEditBetweenMounts: a Zarr v2 array's delta filter removed from
// its .zarray between two mounts that share a disk cache (--cache-dir) or
// a shared tier (redis-server) reads as the new metadata decodes it,
// 01 01 01 01, not as the chunk decoded under the old metadata and kept
// by the tier, 01 02 03 04 (issue 28, item 1).
func TestRecipeEditBetweenMounts(t *testing.T) {
	for _, tier := range []string{"disk", "shared"} {
		t.Run(tier, func(t *testing.T) {
			src := t.TempDir()
			deltaArray(t, src, `[{"id": "delta", "dtype": "|u1"}]`)
			var args []string
			switch tier {
			case "disk":
				args = []string{"--cache-dir", t.TempDir()}
			case "shared":
				args = []string{"--shared-cache", "redis://" + testenv.StartRedis(t).Addr + loaded}
			}
			mount := func() *serving { return startVolfs(t, append(append([]string{"mount"}, args...), src)...) }
			s := mount()
			if got := run(t, "cat", filepath.Join(s.mnt, "0")); got != "\x01\x02\x03\x04" {
				t.Fatalf("with the delta filter: got % x, want 01 02 03 04", got)
			}
			stopVolfs(t, s)

			deltaArray(t, src, `null`)
			s = mount()
			if got := run(t, "cat", filepath.Join(s.mnt, "0")); got != "\x01\x01\x01\x01" {
				t.Errorf("after the filter was removed, through the %s tier: got % x, want 01 01 01 01", tier, got)
			}
			stopVolfs(t, s)
		})
	}
}

// oneShard writes a Zarr v3 array of four uint8 stored as one shard
// "c/0" of two inner chunks of two, with the index (crc32c) at its end:
// inner chunk i holds chunks[i] at offset offs[i].
func oneShard(t *testing.T, dir string, data []byte, offs [2]uint64) {
	t.Helper()
	writeFileAll(t, filepath.Join(dir, "zarr.json"), []byte(`{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0,
  "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": [{"name": "bytes"}],
    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}], "index_location": "end"}}]}`))
	writeFileAll(t, filepath.Join(dir, "c", "0"), shardBytes(data, offs))
}

// TestShardRewrittenDuringMount: a Zarr v3 shard holding inner chunks
// [10 11] at offset 0 and [20 21] at 2, whose index the mount memoised
// when inner chunk 0 was read, is rewritten (same size) with chunk 1 =
// [40 41] at 0 and chunk 0 = [30 31] at 2: inner chunk 1 then reads
// [40 41] (or ESTALE), never [30 31], which neither version holds; for a
// local directory (rewritten in place), a gs:// bucket (a new
// generation, on fake-gcs-server) and an s3:// bucket (a new ETag, on
// SeaweedFS's S3 gateway) (issue 28, items 2 and 4).
func TestShardRewrittenDuringMount(t *testing.T) {
	for _, kind := range []string{"file", "gs", "s3"} {
		t.Run(kind, func(t *testing.T) {
			src := t.TempDir()
			oneShard(t, src, []byte{10, 11, 20, 21}, [2]uint64{0, 2})
			source, rewrite := src, func() { oneShard(t, src, []byte{40, 41, 30, 31}, [2]uint64{2, 0}) }
			args := []string{"mount", "--read-ahead", "0", "--log-level", "debug"}
			switch kind {
			case "gs":
				e := startGCSEmulator(t)
				putLayer(t, e, "bkt", "vol", src, false)
				source = "gs://bkt/vol"
				rewrite = func() { e.Put("bkt", "vol/c/0", shardBytes([]byte{40, 41, 30, 31}, [2]uint64{2, 0}), "") }
			case "s3":
				requireBoto3(t)
				w := startWeed(t, "pub")
				s3Env(t, "", "")
				w.s3put(t, "put", "pub", "vol", src)
				source, args = "s3://pub/vol", append(args, "--endpoint-url", w.Endpoint)
				rewrite = func() {
					oneShard(t, src, []byte{40, 41, 30, 31}, [2]uint64{2, 0})
					w.s3put(t, "put", "pub", "vol", src)
				}
			}
			s := startVolfs(t, append(args, source)...)
			if got := run(t, "cat", filepath.Join(s.mnt, "c", "0")); got != "\x0a\x0b" {
				t.Fatalf("inner chunk 0: got % x, want 0a 0b", got)
			}
			time.Sleep(10 * time.Millisecond) // a modification time the file system can tell apart
			rewrite()
			out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "c", "1"))
			switch {
			case err != nil && strings.Contains(out+err.Error(), "Stale file handle"):
				t.Logf("inner chunk 1 after the rewrite: ESTALE")
			case err != nil:
				t.Errorf("inner chunk 1 after the rewrite: %v (%q), want 28 29 or ESTALE", err, out)
			case out != "\x28\x29":
				t.Errorf("inner chunk 1 after the rewrite: got % x, want 28 29 (the new version's), never 1e 1f (the old index over the new bytes)", out)
			}
			stopVolfs(t, s)
			for _, line := range strings.Split(s.stderr.String(), "\n") {
				if strings.Contains(line, "loading it again") {
					t.Log(line) // says whether the source refused (a 412) or the reply's identity told
				}
			}
		})
	}
}

// shardBytes is the object oneShard writes: data, then the index of two
// inner chunks of two bytes at offs, then its crc32c.
func shardBytes(data []byte, offs [2]uint64) []byte {
	shard := append([]byte(nil), data...)
	var index []byte
	for _, off := range offs {
		index = binary.LittleEndian.AppendUint64(index, off)
		index = binary.LittleEndian.AppendUint64(index, 2)
	}
	shard = append(shard, index...)
	return binary.LittleEndian.AppendUint32(shard, crc32.Checksum(index, crc32.MakeTable(crc32.Castagnoli)))
}

// TestShardSwappedBetweenRequests: an HTTP origin whose shard c/0 (strong
// ETags, If-Match honoured by net/http) is replaced right after volfs read
// its index, before it reads the inner chunk: the chunk request carries
// If-Match, the origin answers 412, and inner chunk 1 reads as the new
// version's [40 41], never [30 31] (the old index over the new bytes).
// When the shard changes after every index read, the read fails with
// ESTALE (issue 28, item 4).
func TestShardSwappedBetweenRequests(t *testing.T) {
	for _, mode := range []string{"once", "always"} {
		t.Run(mode, func(t *testing.T) {
			src := t.TempDir()
			oneShard(t, src, []byte{10, 11, 20, 21}, [2]uint64{0, 2})
			meta, err := os.ReadFile(filepath.Join(src, "zarr.json"))
			if err != nil {
				t.Fatal(err)
			}
			versions := [][]byte{shardBytes([]byte{10, 11, 20, 21}, [2]uint64{0, 2}), shardBytes([]byte{40, 41, 30, 31}, [2]uint64{2, 0})}
			var mu sync.Mutex
			current, swaps, refused := 0, 0, 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/zarr.json":
					http.ServeContent(w, r, "zarr.json", time.Time{}, bytes.NewReader(meta))
				case "/c/0":
					mu.Lock()
					v := current
					index := strings.HasPrefix(r.Header.Get("Range"), "bytes=4-")
					if index && (mode == "always" || swaps == 0) {
						current, swaps = 1-current, swaps+1 // after this reply
					}
					if m := r.Header.Get("If-Match"); m != "" && m != fmt.Sprintf(`"v%d"`, v) {
						refused++
					}
					mu.Unlock()
					w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, v))
					http.ServeContent(w, r, "0", time.Time{}, bytes.NewReader(versions[v]))
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)

			s := startVolfs(t, "mount", "--read-ahead", "0", srv.URL)
			out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "c", "1"))
			stopVolfs(t, s)
			mu.Lock()
			t.Logf("%s: %d swaps, %d requests refused by If-Match", mode, swaps, refused)
			if refused == 0 {
				t.Errorf("no chunk request carried an If-Match of the version whose index was read")
			}
			mu.Unlock()
			switch mode {
			case "once":
				if err != nil || out != "\x28\x29" {
					t.Errorf("inner chunk 1, the shard replaced once: %v, % x; want 28 29 (the new version's)", err, out)
				}
			case "always":
				if err == nil || !strings.Contains(out+err.Error(), "Stale file handle") {
					t.Errorf("inner chunk 1, the shard replaced at every read of its index: %v, % x; want ESTALE", err, out)
				}
			}
		})
	}
}

// precomputedShard writes a precomputed layer of one sharded scale s0 of
// 4 x 1 x 1 uint8 voxels in chunks of two (chunk ids 0 and 1), one shard
// "s0/0.shard" of one minishard: data, then the minishard index that puts
// chunk i at offs[i] (two bytes each, offsets increasing with the id).
func precomputedShard(t *testing.T, dir string, data []byte, offs [2]uint64) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [4, 1, 1], "resolution": [1, 1, 1], "chunk_sizes": [[2, 1, 1]], "encoding": "raw",
  "sharding": {"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0, "minishard_bits": 0, "shard_bits": 0,
   "minishard_index_encoding": "raw", "data_encoding": "raw"}}]}`))
	// Minishard index: ids (delta), offsets (the first from the end of the
	// shard index, the next from the end of the previous chunk), sizes.
	idx := make([]byte, 48)
	binary.LittleEndian.PutUint64(idx[0:], 0)
	binary.LittleEndian.PutUint64(idx[8:], 1)
	binary.LittleEndian.PutUint64(idx[16:], offs[0])
	binary.LittleEndian.PutUint64(idx[24:], offs[1]-offs[0]-2)
	binary.LittleEndian.PutUint64(idx[32:], 2)
	binary.LittleEndian.PutUint64(idx[40:], 2)
	shardIndex := make([]byte, 16)
	binary.LittleEndian.PutUint64(shardIndex[0:], uint64(len(data)))
	binary.LittleEndian.PutUint64(shardIndex[8:], uint64(len(data)+len(idx)))
	writeFileAll(t, filepath.Join(dir, "s0", "0.shard"), append(append(shardIndex, data...), idx...))
}

// TestPrecomputedShardRewrittenDuringMount: the precomputed form of
// TestShardRewrittenDuringMount. A shard with chunk 0 = [10 11] at 0 and
// chunk 1 = [20 21] at 2, whose shard and minishard indexes the mount
// memoised when chunk 0 was read, is rewritten with chunk 0 = [30 31] at
// 2 and chunk 1 = [40 41] at 4: chunk 1 reads [40 41] (or ESTALE), never
// [30 31], the old index over the new bytes (issue 28, item 2).
func TestPrecomputedShardRewrittenDuringMount(t *testing.T) {
	src := t.TempDir()
	precomputedShard(t, src, []byte{10, 11, 20, 21}, [2]uint64{0, 2})
	s := startVolfs(t, "mount", "--read-ahead", "0", src)
	if got := run(t, "cat", filepath.Join(s.mnt, "s0", "0-2_0-1_0-1")); got != "\x0a\x0b" {
		t.Fatalf("chunk 0: got % x, want 0a 0b", got)
	}
	time.Sleep(10 * time.Millisecond)
	precomputedShard(t, src, []byte{99, 98, 30, 31, 40, 41}, [2]uint64{2, 4})
	out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "s0", "2-4_0-1_0-1"))
	switch {
	case err != nil && strings.Contains(out+err.Error(), "Stale file handle"):
		t.Logf("chunk 1 after the rewrite: ESTALE")
	case err != nil:
		t.Errorf("chunk 1 after the rewrite: %v (%q), want 28 29 or ESTALE", err, out)
	case out != "\x28\x29":
		t.Errorf("chunk 1 after the rewrite: got % x, want 28 29 (the new version's), never 1e 1f (the old index over the new bytes)", out)
	}
	stopVolfs(t, s)
}

// largeIndexChunks is the inner chunk count of largeShard: an index of
// more than 1 MiB, which volfs reads in blocks of 4096 entries with its
// crc32c checked once over the whole (decode's large-index path).
const largeIndexChunks = 70000

// largeShard writes a Zarr v3 array of largeIndexChunks uint8 in one
// shard "c/0" of one-byte inner chunks, index (crc32c) at the end: inner
// chunk i at offset i holding byte i%200+1, except that chunks 0 and 1
// hold first[0] and first[1] and, when swapped, sit at offsets 1 and 0.
func largeShard(t *testing.T, dir string, first [2]byte, swapped bool) {
	t.Helper()
	const n = largeIndexChunks
	writeFileAll(t, filepath.Join(dir, "zarr.json"), []byte(fmt.Sprintf(`{"zarr_format": 3, "node_type": "array", "shape": [%d], "data_type": "uint8",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [%d]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0,
  "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1], "codecs": [{"name": "bytes"}],
    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}], "index_location": "end"}}]}`, n, n)))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i%200 + 1)
	}
	data[0], data[1] = first[0], first[1]
	index := make([]byte, 16*n)
	for i := range n {
		binary.LittleEndian.PutUint64(index[16*i:], uint64(i))
		binary.LittleEndian.PutUint64(index[16*i+8:], 1)
	}
	if swapped {
		data[0], data[1] = data[1], data[0]
		binary.LittleEndian.PutUint64(index[0:], 1)
		binary.LittleEndian.PutUint64(index[16:], 0)
	}
	shard := append(data, index...)
	shard = binary.LittleEndian.AppendUint32(shard, crc32.Checksum(index, crc32.MakeTable(crc32.Castagnoli)))
	writeFileAll(t, filepath.Join(dir, "c", "0"), shard)
}

// TestLargeIndexShardRewrittenDuringMount: TestShardRewrittenDuringMount
// on decode's large-index path (an index of more than 1 MiB, memoised in
// blocks after one crc32c check). Inner chunks 0 and 1 ([0a], [14]) swap
// places and take new bytes ([1e] at 1, [28] at 0) after chunk 0 was
// read: chunk 1 reads [28] (or ESTALE), never [1e].
func TestLargeIndexShardRewrittenDuringMount(t *testing.T) {
	src := t.TempDir()
	largeShard(t, src, [2]byte{10, 20}, false)
	s := startVolfs(t, "mount", "--read-ahead", "0", src)
	if got := run(t, "cat", filepath.Join(s.mnt, "c", "0")); got != "\x0a" {
		t.Fatalf("inner chunk 0: got % x, want 0a", got)
	}
	time.Sleep(10 * time.Millisecond)
	largeShard(t, src, [2]byte{30, 40}, true)
	out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "c", "1"))
	switch {
	case err != nil && strings.Contains(out+err.Error(), "Stale file handle"):
		t.Logf("inner chunk 1 after the rewrite: ESTALE")
	case err != nil:
		t.Errorf("inner chunk 1 after the rewrite: %v (%q), want 28 or ESTALE", err, out)
	case out != "\x28":
		t.Errorf("inner chunk 1 after the rewrite: got % x, want 28 (the new version's), never 1e (the old index over the new bytes)", out)
	}
	stopVolfs(t, s)
}
