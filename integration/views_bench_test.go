package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/fs/fuse"
)

// BenchmarkViewsMount reads the demo's image/8_8_8 (300 x 256 x 96 uint8,
// 60 chunks of 64 x 64 x 32, gzip over loopback HTTP) through a real
// mount with cat, a new mount and a cold cache per pass:
//
//   - section: one section (z048) against section-chunks, the 20 chunk
//     files under it, read one by one;
//   - volume.raw against volume-chunks, all 60 chunk files;
//   - walk: every section in z order, with the default cache and with
//     walk-row-cache, a cache of two chunk rows.
//
// fetches/chunk is the chunk objects fetched per chunk of the volume
// (GETs counted at the server, the metadata's excluded): the
// amplification of walking sections is walk's figure.
func BenchmarkViewsMount(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to mount")
	}
	srv, err := demo.Serve(demo.Objects())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	const scale, chunks = "image/8_8_8", 60
	var sections, layer, all []string
	for z := range 96 {
		sections = append(sections, fmt.Sprintf("%s/sections/z%02d.tif", scale, z))
	}
	for z := 0; z < 96; z += 32 {
		for y := 0; y < 256; y += 64 {
			for x := 0; x < 300; x += 64 {
				name := fmt.Sprintf("%s/%d-%d_%d-%d_%d-%d", scale, x, min(x+64, 300), y, y+64, z, z+32)
				all = append(all, name)
				if z == 32 {
					layer = append(layer, name)
				}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		files []string
		cache int64
	}{
		{"section", []string{scale + "/sections/z48.tif"}, fs.DefaultCacheBytes},
		{"section-chunks", layer, fs.DefaultCacheBytes},
		{"volume.raw", []string{scale + "/volume.raw"}, fs.DefaultCacheBytes},
		{"volume-chunks", all, fs.DefaultCacheBytes},
		{"walk", sections, fs.DefaultCacheBytes},
		{"walk-row-cache", sections, 2 * 5 * 64 * 64 * 32},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var fetches, size int64
			for b.Loop() {
				b.StopTimer()
				f, err := fetcher.Open(srv.URL, fetcher.Options{})
				if err != nil {
					b.Fatal(err)
				}
				quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
				tree, err := fs.New(context.Background(), f, fs.Options{CacheBytes: tc.cache, Log: quiet})
				if err != nil {
					b.Fatal(err)
				}
				mnt := b.TempDir()
				m, err := fuse.Mount(mnt, tree, fuse.MountOptions{})
				if err != nil {
					b.Fatal(err)
				}
				// The lookups fetch the metadata: stat first, untimed and
				// from a subprocess, as every read of the mount is.
				var paths []string
				for _, p := range tc.files {
					paths = append(paths, filepath.Join(mnt, p))
				}
				st, err := exec.Command("stat", append([]string{"-c", "%s"}, paths...)...).Output()
				if err != nil {
					b.Fatal(err)
				}
				size = 0
				for _, f := range strings.Fields(string(st)) {
					n, _ := strconv.ParseInt(f, 10, 64)
					size += n
				}
				before := srv.Requests()
				b.StartTimer()
				out, err := exec.Command("cat", paths...).Output()
				b.StopTimer()
				fetches += srv.Requests() - before
				if uerr := m.Unmount(); uerr != nil {
					b.Fatal(uerr)
				}
				if err != nil || int64(len(out)) != size {
					b.Fatalf("cat: %v, %d bytes, want %d", err, len(out), size)
				}
				b.StartTimer()
			}
			b.SetBytes(size)
			b.ReportMetric(float64(fetches)/float64(b.N)/chunks, "fetches/chunk")
		})
	}
}
