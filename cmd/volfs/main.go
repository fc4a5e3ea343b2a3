// Command volfs mounts chunked image volumes (Neuroglancer precomputed,
// Zarr v2 and v3, N5) from gs://, HTTP(S) or local disk as a read-only
// directory tree in which every chunk is a file of decoded voxels.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
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

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/net/netutil"
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
		Description: `volfs shows every chunk of a chunked image volume as a read-only file of decoded voxels,
and every volume as the same volume stored uncompressed.

FORMATS: Neuroglancer precomputed (raw, gzip, jpeg, png, compressed_segmentation,
sharded), Zarr v2 and v3 (blosc, gzip, zlib, zstd, lz4, bz2, xz; v3 sharding) and N5. The format
of each directory is found from its metadata files; a prefix pins the root's:
precomputed://, zarr:// (v2 or v3), zarr2://, zarr3://, n5://.

SOURCES: gs://BUCKET[/PREFIX] (Application Default Credentials or anonymous; STORAGE_EMULATOR_HOST
for an emulator), http:// and https:// URLs, and local paths or file:// URLs. A SOURCE that
does not exist or holds nothing volfs can serve is refused (--allow-empty-source mounts it).

` + sizeUnits + `

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
			warmCommand(),
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
	a.Action = unknownCommand
	a.OnUsageError = usageError
	for _, c := range a.Commands {
		c.OnUsageError = usageError
		// No command has subcommands: without this urfave/cli gives each
		// a "help" one, which shell completion then offers in place of
		// the file names SOURCE and MOUNTPOINT are. --help stays.
		c.HideHelpCommand = true
	}
	return a
}

// unknownCommand is the app's action, run when the first argument names
// no command: help without arguments, otherwise the closest command.
func unknownCommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	return fmt.Errorf("unknown command %q; did you mean %q? (volfs --help lists the commands)", name, closest(name, commandNames(c.App)))
}

// usageError answers a flag that the command does not take with the
// closest one it does, in one line instead of the whole help.
func usageError(c *cli.Context, err error, _ bool) error {
	cmd, flags := "volfs", c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		cmd, flags = "volfs "+c.Command.Name, c.Command.Flags
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		name = strings.TrimLeft(name, "-")
		msg = fmt.Sprintf("unknown flag --%s; did you mean --%s? (%s --help lists the flags)", name, closest(name, names), cmd)
	} else {
		msg += fmt.Sprintf(" (%s --help lists the flags)", cmd)
	}
	return errors.New(msg)
}

// commandNames lists the names of a's commands.
func commandNames(a *cli.App) []string {
	var names []string
	for _, c := range a.Commands {
		names = append(names, c.Names()...)
	}
	return names
}

// closest returns the candidate nearest to s by edit distance (a
// transposition counting as one edit), the first of equals.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// minCacheBytes is the smallest --cache-size accepted.
const minCacheBytes = 16 << 20

// logFlags is the log configuration that c's flags ask for.
func logFlags(c *cli.Context, background bool) logConfig {
	return logConfig{level: c.String("log-level"), format: c.String("log-format"), file: c.String("log-file"), background: background}
}

// openTree opens source with the tree flags of c, logging as they say.
// background is set in a --daemon child; mountpoint, when not empty, is
// where the tree will be mounted, which a local source never reads through
// its links. Network work starts here.
func openTree(c *cli.Context, source, mountpoint string, background bool) (*fs.Tree, error) {
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
	if opts.ReadTimeout = c.Duration("read-timeout"); opts.ReadTimeout < 0 {
		return nil, fmt.Errorf("--read-timeout: want a duration of 0 or more, got %v", opts.ReadTimeout)
	}
	if opts.Formats, source, err = splitFormat(source); err != nil {
		return nil, err
	}
	minRate, err := parseSize(c.String("min-rate"))
	if err != nil || minRate <= 0 {
		return nil, fmt.Errorf("--min-rate: want a positive size per second, got %q", c.String("min-rate"))
	}
	if opts.ReadAhead, err = parseSize(c.String("read-ahead")); err != nil {
		return nil, fmt.Errorf("--read-ahead: %w", err)
	}
	diskBytes, err := parseSize(c.String("disk-cache-size"))
	if c.String("cache-dir") != "" && (err != nil || diskBytes <= 0) {
		return nil, fmt.Errorf("--disk-cache-size: want a positive size, got %q", c.String("disk-cache-size"))
	}
	var exclude []string
	if mountpoint != "" {
		exclude = []string{mountpoint}
	}
	src, err := fetcher.Open(source, fetcher.Options{
		HTTP: fetcher.HTTPOptions{
			Conns: c.Int("workers"), StallTimeout: c.Duration("stall-timeout"), MinRate: minRate,
			FollowRedirects: c.Bool("follow-redirects"), Log: log,
		},
		File: fetcher.FileOptions{FollowSymlinks: followSymlinks(c), Log: log, Exclude: exclude},
		GCS: fetcher.GCSOptions{
			Conns: c.Int("workers"), Anonymous: c.Bool("anonymous"),
			StallTimeout: c.Duration("stall-timeout"), MinRate: minRate,
		},
	})
	if err != nil {
		return nil, err
	}
	opts.Workers = c.Int("workers")
	if dir := c.String("cache-dir"); dir != "" {
		if opts.Disk, err = disk.Open(disk.Options{Dir: dir, MaxBytes: diskBytes}); err != nil {
			return nil, fmt.Errorf("--cache-dir: %w", err)
		}
		slog.Debug("disk cache", "dir", opts.Disk.Dir(), "bytes", opts.Disk.Stats().Bytes, "files", opts.Disk.Stats().Files)
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	return fs.New(ctx, src, opts)
}

// followSymlinks reports whether a local source follows symbolic links
// that lead out of it: as --follow-symlinks says when given; otherwise
// yes, unless --allow-other. A mount that only its owner can read exposes
// nothing through a link that the owner could not read anyway, and a lab
// layout with scale directories linked from other disks reads as it does
// on disk; a mount that other users read confines links to the source, so
// that a link cannot hand them a file of the owner's.
func followSymlinks(c *cli.Context) bool {
	if c.IsSet("follow-symlinks") {
		return c.Bool("follow-symlinks")
	}
	return !c.Bool("allow-other")
}

// Bounds of the metrics server, so that clients of --metrics-addr, slow or
// hostile, cannot take the descriptors and goroutines the mount needs: at
// most metricsConns connections are accepted at once (further ones wait in
// the kernel's backlog, holding no descriptor of volfs), each must send
// its request headers within metricsHeaderTimeout and its whole request
// within metricsReadTimeout, gets metricsWriteTimeout for the reply, and
// an idle keep-alive connection is closed after metricsIdleTimeout. A
// Prometheus scrape sends one small request and reads a reply of a few
// KiB, far inside these bounds.
const (
	metricsConns         = 8
	metricsHeaderTimeout = 5 * time.Second
	metricsReadTimeout   = 10 * time.Second
	metricsWriteTimeout  = 30 * time.Second
	metricsIdleTimeout   = 30 * time.Second
	metricsHeaderBytes   = 8 << 10
)

// serveMetrics serves the tree's Prometheus metrics at addr/metrics, with
// Go's runtime and process metrics, until the process ends, within the
// bounds above. A failure to listen is returned at once.
func serveMetrics(addr string, tree *fs.Tree) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(tree.Collectors()...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: metricsConns}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: metricsHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    metricsHeaderBytes,
		// A client's broken request is its own business, not the log's.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	slog.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	go srv.Serve(netutil.LimitListener(ln, metricsConns))
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

// checkNotEmpty refuses a tree whose root shows nothing: no volume
// metadata there and no entry listed. That is what a typo makes of a
// source (an HTTP URL answered with 404, a gs:// prefix with no object
// under it, an empty directory), and mounting it would only show an empty
// directory with the reason in a log. The root's listing is the one
// fs.New made, so this costs no request.
func checkNotEmpty(ctx context.Context, tree *fs.Tree) error {
	l, err := tree.Root().List(ctx)
	if err != nil {
		return err
	}
	if l.Len() > 0 {
		return nil
	}
	why := "no volume metadata (info, zarr.json, .zarray, .zmetadata, attributes.json) at its root and nothing under it"
	switch u := tree.Source().String(); {
	case strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://"):
		why = "no volume metadata (info, zarr.json, .zarray, .zmetadata, attributes.json) at that URL, and no directory index to list (check the URL for a typo)"
	case strings.HasPrefix(u, "gs://"):
		why = "no volume metadata at that prefix and no object under it (check the bucket and prefix for a typo)"
	}
	return fmt.Errorf("%s: nothing to serve: %s; pass --allow-empty-source to mount it anyway", tree.Source(), why)
}

// serve mounts source at mountpoint and blocks until it is unmounted by a
// signal or from outside. Once the mount is up it runs ready, if set, and
// tells rep.
func serve(c *cli.Context, rep *reporter, source, mountpoint string, ready func()) error {
	// Refuse a bad mountpoint before any network work.
	if err := checkMountpoint(c, source, mountpoint); err != nil {
		return err
	}
	tree, err := openTree(c, source, mountpoint, rep.child)
	if err != nil {
		return err
	}
	defer tree.Close()
	if !c.Bool("allow-empty-source") {
		if err := checkNotEmpty(c.Context, tree); err != nil {
			return err
		}
	}
	if addr := c.String("metrics-addr"); addr != "" {
		if err := serveMetrics(addr, tree); err != nil {
			return err
		}
	}
	// From here on a signal must unmount, never kill: a SIGINT or SIGTERM
	// that arrives while the mount is set up waits in sig for the loop
	// below. SIGHUP (a closed terminal or ssh session) does not stop a
	// mount, as rclone's does not. SIGPIPE is caught so that a write to a
	// log on a pipe whose reader is gone fails with EPIPE, which slog
	// drops, instead of killing the process with the mount still up.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if !rep.startMount() {
		return errOrphaned
	}
	var srv *fuse.Server
	said, err := withFusermountOutput(func() (err error) {
		srv, err = fs.Mount(mountpoint, tree, fs.MountOptions{
			AllowOther: c.Bool("allow-other"),
			UID:        uint32(c.Int("uid")),
			GID:        uint32(c.Int("gid")),
			Debug:      c.Bool("debug-fuse"),
			DirectIO:   c.Bool("direct-io"),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, mountError(err, said))
	}
	logFusermountOutput(said)
	slog.Info("mounted", "source", tree.Source().String(), "mountpoint", mountpoint, "pid", os.Getpid())
	if ready != nil {
		ready()
	}
	if err := rep.ready(mountpoint); err != nil {
		if uerr := srv.Unmount(); uerr != nil {
			slog.Error("unmount failed", "mountpoint", mountpoint, "err", uerr)
		}
		return err
	}
	if rep.child {
		// A daemon must not keep the directory it was started in busy.
		// Nothing below resolves a relative path: the source and the
		// log file are open.
		os.Chdir("/")
	}

	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	for {
		select {
		case <-done:
			slog.Info("unmounted", "mountpoint", mountpoint)
			return nil
		case s := <-sig:
			if s == syscall.SIGHUP {
				slog.Info("SIGHUP: still serving; stop with SIGINT, SIGTERM or umount", "mountpoint", mountpoint)
				continue
			}
			// Unmount first: nothing before it may fail or block.
			err := srv.Unmount()
			sdNotify("STOPPING=1")
			if err != nil {
				// Busy: a process still has a file open or its cwd
				// inside. Keep serving; another signal tries again.
				slog.Error("unmount failed; still serving (close what uses the mount, then signal again)", "signal", s.String(), "err", err)
				continue
			}
			slog.Info("unmounting", "signal", s.String())
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
	tree, err := openTree(c, c.Args().First(), "", false)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VOLUME\tARRAY\tFORMAT\tDTYPE\tCHANNELS\tSIZE\tOFFSET\tRESOLUTION\tCHUNK\tENCODING\tCHUNKS\tDECODED\tNOTES")
	found := false
	var images []*decode.OMEImage
	skipped, err := tree.WalkBounded(c.Context, infoDepth, fs.MaxWalkEntries, func(dir string, v *decode.Volume, refused error) {
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
			for _, why := range fs.ViewNotes(a) {
				notes = append(notes, "views: "+why)
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
		printSkipped(skipped)
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printSkipped(skipped)
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
		return errors.New("usage: volfs cat SOURCE PATH [PATH ...]")
	}
	tree, err := openTree(c, c.Args().Get(0), "", false)
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
