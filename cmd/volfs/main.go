// Command volfs mounts chunked image volumes (Neuroglancer precomputed) from
// local disk or HTTP(S) as a read-only directory tree in which every chunk
// is a file of decoded voxels.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// decodeCores is the number of cores volfs decodes on: GOMAXPROCS as the
// runtime chose it (the process's CPUs, or its cgroup's quota), before
// spareProcs raises it.
var decodeCores = runtime.GOMAXPROCS(0)

// spareProcs runs twice as many Ps as cores, unless GOMAXPROCS is set.
// go-fuse serves each request on a goroutine of its own; with one P per
// core and every P busy decoding, a request waits for the next preemption
// (Go's time slice is 10 ms) before it is even read, and the program
// reading the mount stalls with it. Prefetch decodes stay at one per core
// (the chunk store's CPU slots are decodeCores), so the spare Ps only let
// request goroutines run at once, interleaved with the decoders by the
// kernel's scheduler, which favours a thread that just woke. W1 through a
// mount on 2 cores: 0.79-0.85 s with 2 Ps, 0.68-0.70 s with 4
// (docs/PERFORMANCE.md, "Spare Ps").
func spareProcs() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2 * decodeCores)
	}
}

func main() {
	spareProcs()
	args := os.Args
	helper := isMountHelper(os.Args[0])
	if helper {
		call, warnings, err := parseHelperArgs(os.Args[1:], flagsFor(onMount))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
			os.Exit(exitUsage)
		}
		for _, w := range warnings {
			fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(os.Args[0]), w)
		}
		if call.verbose {
			fmt.Fprintf(os.Stderr, "%s: running volfs %s\n", filepath.Base(os.Args[0]), strings.Join(call.args, " "))
		}
		if call.fake {
			// -f: everything but the mount. The mountpoint is the last
			// argument.
			if err := fs.CheckMountpoint(call.args[len(call.args)-1]); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
				os.Exit(exitMountFailure)
			}
			return
		}
		args = append([]string{os.Args[0]}, call.args...)
	}
	rep := newReporter()
	if err := app(rep).Run(args); err != nil {
		rep.failed(err)
		if rep.child {
			// Stderr is the log file or nowhere: log it where the
			// logs go (syslog without a file).
			slog.Error("stopped", "err", err)
		} else {
			fmt.Fprintln(os.Stderr, "volfs:", err)
		}
		if helper {
			os.Exit(exitMountFailure)
		}
		os.Exit(1)
	}
}

// app is the volfs command line. rep receives the readiness of a mount.
func app(rep *reporter) *cli.App {
	a := &cli.App{
		Name:    "volfs",
		Usage:   "mount chunked image volumes as decompressed files",
		Version: version(),
		Description: `volfs shows every chunk of a Neuroglancer precomputed volume, on local disk or behind an
HTTP(S) URL, as a read-only file of decoded voxels.

Every flag can also be set in the environment, as VOLFS_ and the flag's name in upper case
with underscores for dashes: VOLFS_CACHE_SIZE=2GiB is --cache-size=2GiB. A flag on the
command line wins.

Installed as mount.volfs (a symlink), volfs is a mount(8) helper: "mount -t volfs -o
cache_size=2GiB,allow_other SOURCE MOUNTPOINT", or the fstab line "SOURCE MOUNTPOINT volfs
cache_size=2GiB,_netdev 0 0", mounts in the background; every flag of mount is an -o option
by its name with underscores for dashes, and the generic options of mount(8) are ignored.`,
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			{
				Name:      "mount",
				Usage:     "serve SOURCE at MOUNTPOINT until SIGINT, SIGTERM or umount",
				ArgsUsage: "SOURCE MOUNTPOINT",
				Flags:     flagsFor(onMount),
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return errors.New("usage: volfs mount SOURCE MOUNTPOINT")
					}
					if c.Bool("daemon") && !rep.child {
						// Refuse what can be refused here, at once.
						if _, err := newLogger(logFlags(c, false)); err != nil {
							return err
						}
						if err := checkMountpoint(c, c.Args().Get(0), c.Args().Get(1)); err != nil {
							return err
						}
						return daemonize(c.String("log-file"))
					}
					return serve(c, rep, c.Args().Get(0), c.Args().Get(1), nil)
				},
			},
			{
				Name:      "demo",
				Usage:     "mount a built-in sample volume, served over loopback HTTP by this process",
				ArgsUsage: "[MOUNTPOINT]",
				Flags:     flagsFor(onDemo),
				Action:    func(c *cli.Context) error { return runDemo(c, rep) },
			},
			{
				Name:      "info",
				Usage:     "list the volumes and scales under SOURCE",
				ArgsUsage: "SOURCE",
				Flags:     flagsFor(onInfo),
				Action:    runInfo,
			},
			{
				Name:      "cat",
				Usage:     "write the bytes of the mounted files PATH... to stdout in order, without FUSE",
				ArgsUsage: "SOURCE PATH...",
				Flags:     flagsFor(onCat),
				Action:    runCat,
			},
			{
				Name:   "man",
				Usage:  "write volfs's man page (troff) to stdout: volfs man > volfs.1",
				Action: runMan,
			},
			{
				Name:      "completion",
				Usage:     "write a shell completion script to stdout: source <(volfs completion bash)",
				ArgsUsage: "bash|zsh|fish",
				Action:    runCompletion,
			},
		},
	}
	for _, c := range a.Commands {
		// No command has subcommands: without this urfave/cli gives each
		// a "help" one, which shell completion then offers in place of
		// the file names SOURCE and MOUNTPOINT are. --help stays.
		c.HideHelpCommand = true
	}
	return a
}

// minCacheBytes is the smallest --cache-size accepted.
const minCacheBytes = 16 << 20

// logFlags is the log configuration that c's flags ask for.
func logFlags(c *cli.Context, background bool) logConfig {
	return logConfig{level: c.String("log-level"), format: c.String("log-format"), file: c.String("log-file"), background: background}
}

// openTree opens source with the tree flags of c, logging as they say.
// background is set in a --daemon child. Network work starts here.
func openTree(c *cli.Context, source string, background bool) (*fs.Tree, error) {
	log, err := newLogger(logFlags(c, background))
	if err != nil {
		return nil, err
	}
	slog.SetDefault(log)
	opts := fs.Options{Log: log, CPUSlots: decodeCores}
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
	opts.MetadataTTL = c.Duration("metadata-ttl")
	if opts.Formats, source, err = splitFormat(source); err != nil {
		return nil, err
	}
	minRate, err := parseSize(c.String("min-rate"))
	if err != nil || minRate <= 0 {
		return nil, fmt.Errorf("--min-rate: want a positive size per second, got %q", c.String("min-rate"))
	}
	src, err := fetcher.Open(source, fetcher.Options{
		HTTP: fetcher.HTTPOptions{
			Conns: c.Int("workers"), StallTimeout: c.Duration("stall-timeout"), MinRate: minRate,
			FollowRedirects: c.Bool("follow-redirects"), Log: log,
		},
		File: fetcher.FileOptions{FollowSymlinks: c.Bool("follow-symlinks"), Log: log},
		GCS:  fetcher.GCSOptions{Conns: c.Int("workers"), Anonymous: c.Bool("anonymous")},
	})
	if err != nil {
		return nil, err
	}
	opts.Workers = c.Int("workers")
	if opts.ReadAhead, err = parseSize(c.String("read-ahead")); err != nil {
		return nil, fmt.Errorf("--read-ahead: %w", err)
	}
	if dir := c.String("cache-dir"); dir != "" {
		size, err := parseSize(c.String("disk-cache-size"))
		if err != nil || size <= 0 {
			return nil, fmt.Errorf("--disk-cache-size: want a positive size, got %q", c.String("disk-cache-size"))
		}
		if opts.Disk, err = disk.Open(disk.Options{Dir: dir, MaxBytes: size}); err != nil {
			return nil, fmt.Errorf("--cache-dir: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	return fs.New(ctx, src, opts)
}

// serveMetrics serves the tree's Prometheus metrics at addr/metrics, with
// Go's runtime and process metrics, until the process ends. A failure to
// listen is returned at once.
func serveMetrics(addr string, tree *fs.Tree) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(tree.Collectors()...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	slog.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	go http.Serve(ln, mux)
	return nil
}

// splitFormat strips a neuroglancer-style format prefix such as
// "precomputed://" from a source and returns the registered formats it
// allows at the root ("zarr://" allows both Zarr versions).
func splitFormat(source string) (formats []string, rest string, err error) {
	for _, p := range []struct {
		prefix  string
		formats []string
	}{
		{"precomputed", []string{"precomputed"}},
		{"zarr", []string{"zarr3", "zarr2"}},
		{"zarr2", []string{"zarr2"}},
		{"zarr3", []string{"zarr3"}},
		{"n5", []string{"n5"}},
	} {
		if r, ok := strings.CutPrefix(source, p.prefix+"://"); ok {
			return p.formats, r, nil
		}
	}
	return nil, source, nil
}

// checkMountpoint refuses a mountpoint that c's flags cannot mount at:
// missing, not a directory, mounted (or left stale by a dead server), not
// empty without --allow-non-empty, or --allow-other that fusermount3 will
// refuse; and a local source that the mountpoint holds or is held by. It
// touches no network.
func checkMountpoint(c *cli.Context, source, mountpoint string) error {
	if err := fs.CheckMountpoint(mountpoint); err != nil {
		return err
	}
	if _, rest, err := splitFormat(source); err == nil && (!strings.Contains(rest, "://") || strings.HasPrefix(rest, "file://")) {
		if src, err := fetcher.Open(rest, fetcher.Options{}); err == nil {
			if local, ok := src.(interface{ Root() string }); ok {
				if err := fs.CheckApart(local.Root(), mountpoint); err != nil {
					return err
				}
			}
		}
	}
	if !c.Bool("allow-non-empty") {
		if err := fs.CheckEmpty(mountpoint); err != nil {
			return fmt.Errorf("%w; pass --allow-non-empty to mount over it", err)
		}
	}
	if c.Bool("allow-other") {
		if err := fs.CheckAllowOther(); err != nil {
			return fmt.Errorf("--allow-other: %w", err)
		}
	}
	return nil
}

// serve mounts source at mountpoint and blocks until it is unmounted by a
// signal or from outside. Once the mount is up it runs ready, if set, and
// tells rep.
func serve(c *cli.Context, rep *reporter, source, mountpoint string, ready func()) error {
	// Refuse a bad mountpoint before any network work.
	if err := checkMountpoint(c, source, mountpoint); err != nil {
		return err
	}
	tree, err := openTree(c, source, rep.child)
	if err != nil {
		return err
	}
	defer tree.Close()
	if addr := c.String("metrics-addr"); addr != "" {
		if err := serveMetrics(addr, tree); err != nil {
			return err
		}
	}
	srv, err := fs.Mount(mountpoint, tree, fs.MountOptions{
		AllowOther: c.Bool("allow-other"),
		UID:        uint32(c.Int("uid")),
		GID:        uint32(c.Int("gid")),
		Debug:      c.Bool("debug-fuse"),
		DirectIO:   c.Bool("direct-io"),
	})
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	slog.Info("mounted", "source", tree.Source().String(), "mountpoint", mountpoint, "pid", os.Getpid())
	if ready != nil {
		ready()
	}
	rep.ready(mountpoint)
	if rep.child {
		// A daemon must not keep the directory it was started in busy.
		// Nothing below resolves a relative path: the source and the
		// log file are open.
		os.Chdir("/")
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
			sdNotify("STOPPING=1")
			if err := srv.Unmount(); err != nil {
				// Busy: a process still has a file open or its cwd
				// inside. Keep serving; another signal tries again.
				slog.Error("unmount failed; still serving (close what uses the mount, then signal again)", "err", err)
			}
		}
	}
}

func runDemo(c *cli.Context, rep *reporter) error {
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
	return serve(c, rep, srv.URL, mountpoint, func() {
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
	tree, err := openTree(c, c.Args().First(), false)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tARRAY\tFORMAT\tDTYPE\tCHANNELS\tSIZE\tOFFSET\tRESOLUTION\tCHUNK\tENCODING\tCHUNKS\tDECODED\tNOTES")
	found := false
	var images []*decode.OMEImage
	err = tree.Walk(c.Context, 6, func(dir string, v *decode.Volume, refused error) {
		found = true
		if refused != nil {
			fmt.Fprintf(w, "%s\t\t\t\t\t\t\t\t\t\t\t\tnot decoded: %v\n", orDot(dir), refused)
			return
		}
		for _, a := range v.Arrays {
			if a.OME != nil && !slices.Contains(images, a.OME) {
				images = append(images, a.OME)
			}
			var notes []string
			for _, kv := range a.Describe {
				notes = append(notes, kv[0]+"="+kv[1])
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
				orDot(v.Dir), orDot(a.Name), v.Format, a.DType.Name, a.Channels, dims(a.Shape), dims(a.Offset),
				resolution(a), dims(a.Chunk), a.Encoding, a.NumChunks(), formatSize(decodedBytes(a)), strings.Join(notes, " "))
		}
		for _, sk := range v.Skipped {
			fmt.Fprintf(w, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\tnot decoded: %v\n", orDot(v.Dir), sk.Name, v.Format, sk.Err)
		}
	})
	if err != nil {
		return err
	}
	if !found {
		fmt.Printf("no volumes found under %s\n", tree.Source())
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printOME(images)
}

// printOME lists OME-Zarr images, one entry each: the image's group, its
// axes (name, type, unit) and, per level, the array and its scale in the
// axes' units.
func printOME(images []*decode.OMEImage) error {
	if len(images) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nOME-ZARR IMAGE\tNGFF\tNAME\tAXES\tLEVEL\tSCALE")
	for _, img := range images {
		axes := make([]string, len(img.Axes))
		for i, ax := range img.Axes {
			axes[i] = ax.Name
			if ax.Type != "" || ax.Unit != "" {
				axes[i] += "(" + strings.Trim(ax.Type+" "+ax.Unit, " ") + ")"
			}
		}
		for i, l := range img.Levels {
			scale := make([]string, len(l.Scale))
			for k, x := range l.Scale {
				scale[k] = strconv.FormatFloat(x, 'g', -1, 64)
			}
			if i == 0 {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", orDot(img.Dir), orDash(img.Version), orDash(img.Name), strings.Join(axes, " "), l.Path, strings.Join(scale, "x"))
			} else {
				fmt.Fprintf(w, "\t\t\t\t%s\t%s\n", l.Path, strings.Join(scale, "x"))
			}
		}
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runCat writes the files PATH... of SOURCE to stdout in order, as
// cat(1) does, through one tree and so one chunk cache. Every path is
// resolved before the first byte is written, so a missing path writes
// nothing; a read that fails stops the command with the bytes before it
// written.
func runCat(c *cli.Context) error {
	if c.NArg() < 2 {
		return errors.New("usage: volfs cat SOURCE PATH...")
	}
	tree, err := openTree(c, c.Args().Get(0), false)
	if err != nil {
		return err
	}
	defer tree.Close()
	paths := c.Args().Slice()[1:]
	files := make([]fs.File, len(paths))
	var total int64
	for i, p := range paths {
		n, err := tree.Resolve(c.Context, p)
		if err != nil {
			return err
		}
		f, ok := n.(fs.File)
		if !ok {
			return fmt.Errorf("%s is a directory", p)
		}
		files[i] = f
		total += f.Size()
	}
	var out io.Writer = os.Stdout
	if total >= progressMinBytes && term.IsTerminal(int(os.Stderr.Fd())) {
		desc := paths[0]
		if len(paths) > 1 {
			desc = fmt.Sprintf("%d files", len(paths))
		}
		bar := progressbar.DefaultBytes(total, desc)
		defer bar.Close()
		out = io.MultiWriter(os.Stdout, bar)
	}
	buf := make([]byte, 1<<20)
	for i, f := range files {
		if err := copyFile(c.Context, out, f, paths[i], buf); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes the bytes of f, called name in errors, to w, reading
// into buf.
func copyFile(ctx context.Context, w io.Writer, f fs.File, name string, buf []byte) error {
	for off := int64(0); off < f.Size(); {
		n, err := f.ReadAt(ctx, buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: ends at %d bytes, want %d", name, off, f.Size())
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// progressMinBytes is the fewest bytes for which `volfs cat` shows a
// progress bar (on a terminal): a chunk file or two reads in well under a
// second.
const progressMinBytes = 64 << 20

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
