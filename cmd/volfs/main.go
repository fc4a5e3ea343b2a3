// Command volfs mounts chunked image volumes (Neuroglancer precomputed) from
// local disk or HTTP(S) as a read-only directory tree in which every chunk
// is a file of decoded voxels.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

func main() {
	if err := app().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "volfs:", err)
		os.Exit(1)
	}
}

func app() *cli.App {
	treeFlags := []cli.Flag{
		&cli.StringFlag{Name: "cache-size", Value: "512MiB", Usage: "memory for decoded chunks (e.g. 256MiB, 2GiB)"},
		&cli.StringFlag{Name: "missing", Value: "fill", Usage: "a chunk the source lacks reads as the fill value (fill) or fails to open with ENOENT (error)"},
		&cli.IntFlag{Name: "workers", Value: 16, Usage: "concurrent requests per host (the size of its connection pool)"},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		&cli.BoolFlag{Name: "anonymous", Usage: "gs:// sources: send no credentials, even when Application Default Credentials are found"},
	}
	mountFlags := append([]cli.Flag{
		&cli.BoolFlag{Name: "allow-other", Usage: "let other users read the mount (needs user_allow_other in /etc/fuse.conf unless root)"},
		&cli.IntFlag{Name: "uid", Value: os.Getuid(), Usage: "owner uid shown for every file"},
		&cli.IntFlag{Name: "gid", Value: os.Getgid(), Usage: "owner gid shown for every file"},
		&cli.BoolFlag{Name: "debug-fuse", Usage: "log every FUSE request"},
	}, treeFlags...)
	return &cli.App{
		Name:  "volfs",
		Usage: "mount chunked image volumes as decompressed files",
		Commands: []*cli.Command{
			{
				Name:      "mount",
				Usage:     "serve SOURCE at MOUNTPOINT until SIGINT, SIGTERM or umount",
				ArgsUsage: "SOURCE MOUNTPOINT",
				Flags:     mountFlags,
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return errors.New("usage: volfs mount SOURCE MOUNTPOINT")
					}
					return serve(c, c.Args().Get(0), c.Args().Get(1), nil)
				},
			},
			{
				Name:      "demo",
				Usage:     "mount a built-in sample volume, served over loopback HTTP by this process",
				ArgsUsage: "[MOUNTPOINT]",
				Flags:     mountFlags,
				Action:    runDemo,
			},
			{
				Name:      "info",
				Usage:     "list the volumes and scales under SOURCE",
				ArgsUsage: "SOURCE",
				Flags:     treeFlags,
				Action:    runInfo,
			},
			{
				Name:      "cat",
				Usage:     "write the bytes of the mounted file PATH to stdout, without FUSE",
				ArgsUsage: "SOURCE PATH",
				Flags:     treeFlags,
				Action:    runCat,
			},
		},
	}
}

// minCacheBytes is the smallest --cache-size accepted.
const minCacheBytes = 16 << 20

// openTree opens source with the tree flags of c. Network work starts here.
func openTree(c *cli.Context, source string) (*fs.Tree, error) {
	log, err := newLogger(c.String("log-level"))
	if err != nil {
		return nil, err
	}
	slog.SetDefault(log)
	opts := fs.Options{Log: log}
	if opts.CacheBytes, err = parseSize(c.String("cache-size")); err != nil {
		return nil, fmt.Errorf("--cache-size: %w", err)
	}
	if opts.CacheBytes < minCacheBytes {
		// The kernel reads a chunk file in 128 KiB pieces: a chunk that
		// the cache cannot hold is fetched and decoded again for each.
		return nil, fmt.Errorf("--cache-size: at least %s, got %s", formatSize(minCacheBytes), c.String("cache-size"))
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cache.MemoryLimit(opts.CacheBytes))
	}
	switch c.String("missing") {
	case "fill":
	case "error":
		opts.Missing = fs.MissingError
	default:
		return nil, fmt.Errorf("--missing: want fill or error, got %q", c.String("missing"))
	}
	if opts.Format, source, err = splitFormat(source); err != nil {
		return nil, err
	}
	src, err := fetcher.Open(source, fetcher.Options{
		HTTP: fetcher.HTTPOptions{Conns: c.Int("workers")},
		GCS:  fetcher.GCSOptions{Conns: c.Int("workers"), Anonymous: c.Bool("anonymous")},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	return fs.New(ctx, src, opts)
}

// splitFormat strips a neuroglancer-style format prefix such as
// "precomputed://" from a source.
func splitFormat(source string) (format, rest string, err error) {
	for _, f := range []string{"precomputed", "zarr", "zarr2", "zarr3", "n5"} {
		if r, ok := strings.CutPrefix(source, f+"://"); ok {
			if f != "precomputed" {
				return "", "", fmt.Errorf("format %s is not supported yet", f)
			}
			return f, r, nil
		}
	}
	return "", source, nil
}

// serve mounts source at mountpoint and blocks until it is unmounted by a
// signal or from outside. ready, if set, runs once the mount is up.
func serve(c *cli.Context, source, mountpoint string, ready func()) error {
	// Refuse a bad mountpoint before any network work.
	if err := fs.CheckMountpoint(mountpoint); err != nil {
		return err
	}
	tree, err := openTree(c, source)
	if err != nil {
		return err
	}
	srv, err := fs.Mount(mountpoint, tree, fs.MountOptions{
		AllowOther: c.Bool("allow-other"),
		UID:        uint32(c.Int("uid")),
		GID:        uint32(c.Int("gid")),
		Debug:      c.Bool("debug-fuse"),
	})
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	slog.Info("mounted", "source", tree.Source().String(), "mountpoint", mountpoint)
	if ready != nil {
		ready()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	for {
		select {
		case <-done:
			slog.Info("unmounted", "mountpoint", mountpoint)
			return nil
		case s := <-sig:
			slog.Info("unmounting", "signal", s.String())
			if err := srv.Unmount(); err != nil {
				// Busy: a process still has a file open or its cwd
				// inside. Keep serving; another signal tries again.
				slog.Error("unmount failed; still serving (close what uses the mount, then signal again)", "err", err)
			}
		}
	}
}

func runDemo(c *cli.Context) error {
	mountpoint := c.Args().First()
	if mountpoint != "" {
		// Unlike mount, the demo makes its mountpoint: it is a place to try
		// things, not a path that a typo should not create.
		if err := os.MkdirAll(mountpoint, 0o755); err != nil {
			return err
		}
	} else {
		dir, err := os.MkdirTemp("", "volfs-demo-")
		if err != nil {
			return err
		}
		defer os.Remove(dir)
		mountpoint = dir
	}
	srv, err := demo.Serve(demo.Objects())
	if err != nil {
		return err
	}
	defer srv.Close()
	return serve(c, srv.URL, mountpoint, func() {
		fmt.Printf(`volfs demo: a sample volume served from %s is mounted at %s

Try, in another terminal:
  ls %[2]s %[2]s/image %[2]s/image/8_8_8 | head
  cat %[2]s/image/info
  /usr/bin/python3 -c 'import numpy as np; a = np.fromfile("%[2]s/image/8_8_8/0-64_0-64_0-32", np.uint8).reshape(32, 64, 64); print(a.shape, a.min(), a.max(), a.mean())'
  /usr/bin/python3 -c 'import numpy as np; s = np.fromfile("%[2]s/segmentation/16_16_16/0-64_0-64_0-32", "<u4"); print(np.unique(s))'

Press Ctrl-C (or run: umount %[2]s) to stop.
`, srv.URL, mountpoint)
	})
}

func runInfo(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("usage: volfs info SOURCE")
	}
	tree, err := openTree(c, c.Args().First())
	if err != nil {
		return err
	}
	vols, err := tree.Volumes(c.Context, 4)
	if err != nil {
		return err
	}
	if len(vols) == 0 {
		fmt.Printf("no volumes found under %s\n", tree.Source())
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tARRAY\tFORMAT\tDTYPE\tCHANNELS\tSIZE\tOFFSET\tRESOLUTION\tCHUNK\tENCODING\tCHUNKS\tDECODED")
	for _, v := range vols {
		for _, a := range v.Arrays {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n",
				orDot(v.Dir), a.Name, v.Format, a.DType.Name, a.Channels, dims(a.Shape), dims(a.Offset),
				resolution(a), dims(a.Chunk), a.Encoding, a.NumChunks(), formatSize(decodedBytes(a)))
		}
	}
	return w.Flush()
}

func runCat(c *cli.Context) error {
	if c.NArg() != 2 {
		return errors.New("usage: volfs cat SOURCE PATH")
	}
	tree, err := openTree(c, c.Args().Get(0))
	if err != nil {
		return err
	}
	n, err := tree.Resolve(c.Context, c.Args().Get(1))
	if err != nil {
		return err
	}
	f, ok := n.(fs.File)
	if !ok {
		return fmt.Errorf("%s is a directory", c.Args().Get(1))
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < f.Size(); {
		n, err := f.ReadAt(c.Context, buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: ends at %d bytes, want %d", c.Args().Get(1), off, f.Size())
		}
		if _, err := os.Stdout.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// parseSize reads a byte count such as "512MiB", "2G" or "1048576".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}}
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if r, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(r), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return int64(n * float64(mult)), nil
}

func formatSize(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/1024, 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, units[i])
}

func dims(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, "x")
}

func resolution(a *decode.Array) string {
	if a.Resolution == nil {
		return "-"
	}
	s := make([]string, len(a.Resolution))
	for i, x := range a.Resolution {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, "x")
}

func decodedBytes(a *decode.Array) int64 {
	n := int64(a.DType.Size * a.Channels)
	for _, s := range a.Shape {
		n *= s
	}
	return n
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}
