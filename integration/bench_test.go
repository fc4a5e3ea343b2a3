package integration

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/fs/fuse"
)

// benchScale is the demo scale the read benchmarks read whole: 60 chunks,
// 7.4 MB decoded, gzip on the wire.
const benchScale = "image/8_8_8"

// benchSource serves the demo over loopback HTTP and returns its URL, the
// scale's chunk names and their total decoded size.
func benchSource(b *testing.B) (url string, names []string, bytes int64) {
	b.Helper()
	objs := demo.Objects()
	srv, err := demo.Serve(objs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	for k := range objs {
		if path.Dir(k) == benchScale {
			names = append(names, path.Base(k))
		}
	}
	sort.Strings(names)
	data, _, _ := demo.Volume("image", 0)
	return srv.URL, names, int64(len(data))
}

func benchTree(b *testing.B, url string, cacheBytes int64) *fs.Tree {
	b.Helper()
	src, err := fetcher.Open(url, fetcher.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// The cold benchmarks use a cache too small on purpose: discard the
	// warning about it.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tree, err := fs.New(context.Background(), src, fs.Options{CacheBytes: cacheBytes, Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return tree
}

func readChunk(ctx context.Context, tree *fs.Tree, name string, buf []byte) error {
	n, err := tree.Resolve(ctx, benchScale+"/"+name)
	if err != nil {
		return err
	}
	f := n.(fs.File)
	for off := int64(0); off < f.Size(); off += int64(len(buf)) {
		if _, err := f.ReadAt(ctx, buf, off); err != nil {
			return err
		}
	}
	return nil
}

func dials(tree *fs.Tree) int64 {
	if s, ok := tree.Source().(fetcher.Statser); ok {
		return s.Stats().Conns
	}
	return 0
}

// BenchmarkReadScale reads every chunk of one demo scale, in 128 KiB reads
// as the kernel sends them, through the in-process read path:
//
//   - gunzip: only inflating the stored chunks, the floor for any reader;
//   - cold: each read misses the cache: HTTP fetch, gunzip, size check;
//   - cold-disk: the same from .gz files on local disk, without HTTP;
//   - cold-parallel: the same with GOMAXPROCS readers on distinct chunks;
//   - warm: each read hits the decoded-chunk cache.
//
// dials/op counts TCP connections opened per pass: 0 in steady state.
func BenchmarkReadScale(b *testing.B) {
	url, names, size := benchSource(b)
	ctx := context.Background()
	b.Run("gunzip", func(b *testing.B) {
		objs := demo.Objects()
		b.SetBytes(size)
		b.ReportAllocs()
		tree := benchTree(b, url, 1)
		for b.Loop() {
			for _, name := range names {
				n, err := tree.Resolve(ctx, benchScale+"/"+name)
				if err != nil {
					b.Fatal(err)
				}
				size := int(n.(fs.File).Size())
				if _, err := decode.Gunzip(objs[benchScale+"/"+name], size, size); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	// passes times b.N reads of the whole scale from tree, after an
	// untimed pass per reader that warms what the tree keeps (chunks, HTTP
	// connections); with
	// parallel, GOMAXPROCS readers share out each pass's chunks.
	passes := func(b *testing.B, tree *fs.Tree, parallel bool) {
		readers := 1
		if parallel {
			readers = runtime.GOMAXPROCS(0) // as RunParallel
		}
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				for _, name := range names {
					if err := readChunk(ctx, tree, name, make([]byte, 128<<10)); err != nil {
						b.Error(err)
					}
				}
			})
		}
		wg.Wait()
		before := dials(tree)
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		var next atomic.Int64
		read := func(buf []byte) {
			for range names {
				name := names[next.Add(1)%int64(len(names))]
				if err := readChunk(ctx, tree, name, buf); err != nil {
					b.Error(err)
					return
				}
			}
		}
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 128<<10)
				for pb.Next() {
					read(buf)
				}
			})
		} else {
			buf := make([]byte, 128<<10)
			for i := 0; i < b.N; i++ {
				read(buf)
			}
		}
		b.ReportMetric(float64(dials(tree)-before)/float64(b.N), "dials/op")
	}
	const keepNothing = 1
	b.Run("cold", func(b *testing.B) { passes(b, benchTree(b, url, keepNothing), false) })
	// cold-disk is cold with the chunks as .gz files on local disk (page
	// cache), without HTTP: what the read path itself adds to gunzip.
	b.Run("cold-disk", func(b *testing.B) {
		dir := b.TempDir()
		for k, v := range demo.Objects() {
			if path.Base(k) != "info" {
				k += ".gz"
			}
			p := filepath.Join(dir, filepath.FromSlash(k))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, v, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		passes(b, benchTree(b, dir, keepNothing), false)
	})
	b.Run("cold-parallel", func(b *testing.B) { passes(b, benchTree(b, url, keepNothing), true) })
	b.Run("warm", func(b *testing.B) { passes(b, benchTree(b, url, 1<<30), false) })
}

// BenchmarkMountScale reads the same scale through a real mount with one
// cat process, cold: every pass mounts a new tree, so neither the page
// cache nor the chunk cache holds anything. Compare with
// BenchmarkMountScale/inprocess, the same work without FUSE (a new tree
// per pass, read as cat reads), to see what FUSE and the subprocess cost,
// and with fuse-cat-warm, whose chunk cache is full, to see how much of
// that is waiting for loads rather than moving bytes through FUSE.
func BenchmarkMountScale(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to mount")
	}
	url, names, size := benchSource(b)
	ctx := context.Background()
	// mountAndRun mounts a new tree, runs script in sh with the chunk
	// paths as arguments, and unmounts. With warm, the tree's chunk cache
	// is filled first, untimed: the kernel's page cache is still empty, so
	// every byte still crosses FUSE, but no read waits for a load.
	mountAndRun := func(b *testing.B, script string, warm bool) {
		tree := benchTree(b, url, fs.DefaultCacheBytes)
		if warm {
			b.StopTimer()
			for _, name := range names {
				if err := readChunk(ctx, tree, name, make([]byte, 128<<10)); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
		mnt := b.TempDir()
		srv, err := fuse.Mount(mnt, tree, fuse.MountOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", script, "sh")
		for _, n := range names {
			cmd.Args = append(cmd.Args, filepath.Join(mnt, benchScale, n))
		}
		out, err := cmd.CombinedOutput()
		if uerr := srv.Unmount(); uerr != nil {
			b.Fatal(uerr)
		}
		if err != nil {
			b.Fatalf("%s: %v %s", script, err, out)
		}
	}
	b.Run("fuse-cat", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			mountAndRun(b, `cat "$@" > /dev/null`, false)
		}
	})
	b.Run("fuse-cat-warm", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			mountAndRun(b, `cat "$@" > /dev/null`, true)
		}
	})
	// The fixed cost in fuse-cat: mount, start sh, unmount.
	b.Run("fuse-mount-only", func(b *testing.B) {
		for b.Loop() {
			mountAndRun(b, `true`, false)
		}
	})
	b.Run("inprocess", func(b *testing.B) {
		b.SetBytes(size)
		buf := make([]byte, 128<<10)
		for b.Loop() {
			tree := benchTree(b, url, fs.DefaultCacheBytes)
			for _, name := range names {
				if err := readChunk(ctx, tree, name, buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
