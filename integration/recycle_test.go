package integration

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/fs/fuse"
)

// recycleRead is a Python program that reads every file named in argv[3:]
// under the mount argv[1] with 8 threads, each in its own order and in
// reads of its own sizes, twice, and compares each read with the same
// bytes of the file of that name under argv[2]. It prints the mismatches
// and exits 1 if there are any.
const recycleRead = `
import os, random, sys, threading
mnt, want, names = sys.argv[1], sys.argv[2], sys.argv[3:]
expect = {n: open(os.path.join(want, n), "rb").read() for n in names}
bad = []
def work(seed):
    rng = random.Random(seed)
    for _ in range(2):
        order = names[:]
        rng.shuffle(order)
        for n in order:
            fd = os.open(os.path.join(mnt, n), os.O_RDONLY)
            try:
                size, off = len(expect[n]), 0
                while off < size:
                    k = rng.choice([4096, 65536, 131072, 300000, 1 << 20])
                    b = os.pread(fd, k, off)
                    if b != expect[n][off:off + len(b)] or not b:
                        bad.append("%s at %d: %d bytes differ" % (n, off, len(b)))
                        break
                    off += len(b)
            finally:
                os.close(fd)
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for b in bad[:10]:
    print(b)
sys.exit(1 if bad else 0)
`

// TestRecycledChunksExact: decoded chunks whose memory is given back for
// reuse once the cache lets them go (cache's "Values given back for
// reuse") read exactly through a mount whose cache holds 4 of 24 chunks,
// by 8 threads reading every chunk file in orders and read sizes of their
// own, twice, each read a FUSE read (DirectIO): the chunks are evicted and their memory reused while other
// reads of them are in flight. Both ways a chunk comes to own its memory
// are read: a codec's output (Zarr v2, zlib: decoded into a pooled
// buffer) and a raw chunk's stored bytes (precomputed raw stored as
// ".gz": the transport gzip's output). The pools are poisoned
// (testenv.Main), so that a buffer reused while a reply still refers to
// it reads as poison, not as a plausible chunk.
func TestRecycledChunksExact(t *testing.T) {
	requirePython(t)
	const nz, chunk = 24, 32 * 128 * 128 // 512 KiB chunks
	chunks := make([][]byte, nz)
	for i := range chunks {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		chunks[i] = make([]byte, chunk)
		for j := range chunks[i] {
			chunks[i][j] = byte(i*16) + byte(rng.IntN(16))
		}
	}
	for _, format := range []string{"zarr-zlib", "precomputed-gz"} {
		t.Run(format, func(t *testing.T) {
			src, want := t.TempDir(), t.TempDir()
			var names []string
			for i, c := range chunks {
				var buf bytes.Buffer
				var name, stored string
				if format == "zarr-zlib" {
					w := zlib.NewWriter(&buf)
					w.Write(c)
					w.Close()
					name = fmt.Sprintf("%d.0.0", i)
					stored = name
				} else {
					w := gzip.NewWriter(&buf)
					w.Write(c)
					w.Close()
					name = fmt.Sprintf("s0/0-128_0-128_%d-%d", 32*i, 32*(i+1))
					stored = name + ".gz"
				}
				if err := os.MkdirAll(filepath.Dir(filepath.Join(src, stored)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(src, stored), buf.Bytes())
				if err := os.MkdirAll(filepath.Dir(filepath.Join(want, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(want, name), c) // a chunk file reads as the bytes written
				names = append(names, name)
			}
			if format == "zarr-zlib" {
				writeFile(t, filepath.Join(src, ".zarray"), []byte(fmt.Sprintf(`{"zarr_format": 2, "shape": [%d, 128, 128],
 "chunks": [32, 128, 128], "dtype": "|u1", "compressor": {"id": "zlib", "level": 1}, "fill_value": 0,
 "order": "C", "filters": null}`, 32*nz)))
			} else {
				writeFile(t, filepath.Join(src, "info"), []byte(fmt.Sprintf(`{"@type": "neuroglancer_multiscale_volume",
 "type": "image", "data_type": "uint8", "num_channels": 1, "scales": [{"key": "s0", "size": [128, 128, %d],
 "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[128, 128, 32]], "encoding": "raw"}]}`, 32*nz)))
			}
			// Without the page cache (DirectIO), so that every read
			// of every thread is a FUSE read of the chunk.
			m := mountTreeWith(t, src, fs.Options{CacheBytes: 4*chunk + 4096}, fuse.MountOptions{DirectIO: true})
			cmd := exec.Command(python, append([]string{"-c", recycleRead, m.mnt, want}, names...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("reads through the mount differ from the chunks written: %v\n%s", err, out)
			}
			s := m.tree.StoreStats()
			t.Logf("store: %+v", s)
			if s.Recycled == 0 {
				t.Fatalf("no chunk given back for reuse in %d evictions: the reads tested nothing of it", s.Evictions)
			}
		})
	}
}
