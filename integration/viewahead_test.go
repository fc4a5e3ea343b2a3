package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeViewLayer writes a raw uint8 precomputed layer of 256 x 256 x 128
// voxels in chunks of 64 x 64 x 16 (128 chunks of 64 KiB; its volume.raw
// is 8 MiB, 8 read-ahead blocks of 1 MiB) under dir/layer, and returns the
// bytes its volume.raw must read as.
func writeViewLayer(t *testing.T, dir string) []byte {
	t.Helper()
	return writeRawLayer(t, filepath.Join(dir, "layer"), 256, 256, 128, 64, 64, 16)
}

// writeRawLayer writes a raw uint8 precomputed layer of nx x ny x nz
// voxels in chunks of cx x cy x cz (which divide it) in dir, and returns
// the bytes its volume.raw must read as (x fastest).
func writeRawLayer(t *testing.T, dir string, nx, ny, nz, cx, cy, cz int) []byte {
	t.Helper()
	vol := make([]byte, nx*ny*nz)
	for i := range vol {
		vol[i] = byte(i*7 + i/nx/3)
	}
	if err := os.MkdirAll(filepath.Join(dir, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "info"), fmt.Appendf(nil, `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
		"scales": [{"key": "s0", "size": [%d, %d, %d], "resolution": [4, 4, 40], "chunk_sizes": [[%d, %d, %d]], "encoding": "raw"}]}`,
		nx, ny, nz, cx, cy, cz))
	for z0 := 0; z0 < nz; z0 += cz {
		for y0 := 0; y0 < ny; y0 += cy {
			for x0 := 0; x0 < nx; x0 += cx {
				var chunk []byte
				for z := z0; z < z0+cz; z++ {
					for y := y0; y < y0+cy; y++ {
						chunk = append(chunk, vol[(z*ny+y)*nx+x0:(z*ny+y)*nx+x0+cx]...)
					}
				}
				writeFile(t, filepath.Join(dir, "s0", fmt.Sprintf("%d-%d_%d-%d_%d-%d", x0, x0+cx, y0, y0+cy, z0, z0+cz)), chunk)
			}
		}
	}
	return vol
}

// scrapeSeries returns the value of each series in /metrics at addr.
func scrapeSeries(t *testing.T, addr string, series ...string) []float64 {
	t.Helper()
	body := scrapeMetrics(t, addr)
	out := make([]float64, len(series))
	for i, s := range series {
		v, ok := metricValue(body, s)
		if !ok {
			t.Fatalf("/metrics lacks %s", s)
		}
		out[i] = v
	}
	return out
}

// readBlocks reads blocks of 1 MiB of a file in order, with the kernel's
// own read-ahead off (POSIX_FADV_RANDOM), and prints their bytes' hex
// digest.
const readBlocks = `
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
h = hashlib.sha256()
for b in range(int(sys.argv[2])):
    h.update(os.pread(fd, 1 << 20, b << 20))
print(h.hexdigest())
`

// TestViewReadAheadTracker: a stitched view's reader reads ahead under the same
// read-ahead as chunk files' readers, through a real mount: its
// prefetches show in the read-ahead and prefetch metrics, never hold more
// than the global --read-ahead budget, and are cancelled, their budget
// returned, once the reader goes.
func TestViewReadAheadTracker(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	vol := writeViewLayer(t, src)
	addr := freeAddr(t)
	const budget = 4 << 20
	s := startVolfs(t, "mount", "--metrics-addr", addr, "--read-ahead", "4MiB", src)
	raw := filepath.Join(s.mnt, "layer", "s0", "volume.raw")
	series := []string{"volfs_readahead_issued_total", "volfs_readahead_used_total", "volfs_readahead_wasted_total",
		"volfs_readahead_bytes", "volfs_prefetch_issued_total", "volfs_prefetch_used_total"}

	// Three of the eight blocks, then the reader exits.
	out, err := runBounded(t, time.Minute, python, "-c", readBlocks, raw, "3")
	if want := sha256hex(vol[:3<<20]); err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("3 MiB of volume.raw: %v %s, want digest %s", err, out, want)
	}
	m := scrapeSeries(t, addr, series...)
	t.Logf("after 3 blocks: %v = %v", series, m)
	if m[0] == 0 || m[4] == 0 || m[5] == 0 {
		t.Errorf("a reader of volume.raw: %v read-ahead positions issued, %v chunks prefetched, %v of them read; want some of each", m[0], m[4], m[5])
	}
	if m[3] > budget {
		t.Errorf("the read-ahead holds %v bytes, over --read-ahead %d", m[3], budget)
	}
	// The reader is gone: its prefetches are cancelled once it idles, the
	// blocks it did not read counted wasted and their bytes given back.
	deadline := time.Now().Add(time.Minute)
	for m = scrapeSeries(t, addr, series...); m[3] != 0 && time.Now().Before(deadline); m = scrapeSeries(t, addr, series...) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("once the reader went: %v = %v", series, m)
	if m[3] != 0 || m[2] == 0 || m[1]+m[2] != m[0] {
		t.Errorf("a minute after the reader went: %v bytes held, %v of %v positions wasted, %v used; want 0 bytes, some wasted, every position used or wasted", m[3], m[2], m[0], m[1])
	}

	// The whole file read in order reads right, its read-ahead inside the
	// budget.
	out, err = runBounded(t, time.Minute, python, "-c", readBlocks, raw, "8")
	if want := sha256hex(vol); err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("volume.raw: %v %s, want digest %s", err, out, want)
	}
	if m := scrapeSeries(t, addr, series...); m[3] > budget {
		t.Errorf("the read-ahead holds %v bytes, over --read-ahead %d", m[3], budget)
	}
	if got := catC(t, raw); !bytes.Equal(got, vol) {
		t.Errorf("cat volume.raw: %d bytes differ from the volume's %d", len(got), len(vol))
	}
}

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
