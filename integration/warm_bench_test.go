package integration

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// warmBenchLayer writes a precomputed scale of 256 chunks of 64^3 uint8
// (64 MiB decoded), each a smooth field under noise stored as K.gz
// (CloudVolume's convention), and returns the stored keys and bytes.
func warmBenchLayer(b *testing.B, src string) (keys []string, stored int64) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [512, 512, 256], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[64, 64, 64]], "encoding": "raw"}]}`), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 64*64*64)
	for z := 0; z < 256; z += 64 {
		for y := 0; y < 512; y += 64 {
			for x := 0; x < 512; x += 64 {
				for i := range data {
					data[i] = byte((x+y+z+i%64+i/4096)/4 + rng.IntN(24))
				}
				var buf bytes.Buffer
				w, _ := gzip.NewWriterLevel(&buf, 6)
				w.Write(data)
				w.Close()
				key := fmt.Sprintf("s0/%d-%d_%d-%d_%d-%d.gz", x, x+64, y, y+64, z, z+64)
				if err := os.WriteFile(filepath.Join(src, key), buf.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
				keys = append(keys, key)
				stored += int64(buf.Len())
			}
		}
	}
	return keys, stored
}

// BenchmarkWarm compares `volfs warm` of a scale (256 gzip chunks, 64 MiB
// decoded, over loopback HTTP, into a fresh --cache-dir) with the origin's
// own rate: the same objects fetched by 16 concurrent Go clients, bodies
// discarded. It reports both in MB/s of stored bytes, and warm's in MB/s
// decoded. It measures; it never fails on a slow machine.
func BenchmarkWarm(b *testing.B) {
	src := b.TempDir()
	keys, stored := warmBenchLayer(b, src)
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	b.Cleanup(srv.Close)
	summary := regexp.MustCompile(`warmed (\d+) chunks .*: (\d+) fetched`)
	var origin, warm time.Duration
	for range b.N {
		start := time.Now()
		jobs := make(chan string)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range jobs {
					resp, err := http.Get(srv.URL + "/" + k)
					if err != nil {
						b.Error(err)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		for _, k := range keys {
			jobs <- k
		}
		close(jobs)
		wg.Wait()
		origin += time.Since(start)

		start = time.Now()
		out, err := runErr(volfsBin, "warm", "--cache-dir", b.TempDir(), "--cache-size", "64MiB", srv.URL, "s0")
		warm += time.Since(start)
		if m := summary.FindStringSubmatch(out); err != nil || m == nil || m[2] != "256" {
			b.Fatalf("warm: %v\n%s", err, out)
		}
	}
	mb := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / (d.Seconds() / float64(b.N)) }
	b.ReportMetric(mb(stored, origin), "origin-stored-MB/s")
	b.ReportMetric(mb(stored, warm), "warm-stored-MB/s")
	b.ReportMetric(mb(256*64*64*64, warm), "warm-decoded-MB/s")
}
