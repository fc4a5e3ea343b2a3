package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// commandSet says which commands take a flag.
type commandSet uint8

const (
	onMount commandSet = 1 << iota
	onDemo
	onInfo
	onCat
	onServe
	onWarm

	// onSource is every command that opens a source.
	onSource = onMount | onDemo | onInfo | onCat | onServe | onWarm
	// onFUSE is every command that mounts.
	onFUSE = onMount | onDemo
)

// flagDef is one row of the flag table.
type flagDef struct {
	on   commandSet
	flag cli.Flag
}

// flagTable lists every flag of every command. Adding a flag is one entry
// here plus one row in the README's flag table (a test checks the README):
// flagsFor gives it its VOLFS_<NAME> environment variable, and mount.volfs
// accepts it as the -o option <name> with underscores for dashes.
func flagTable() []flagDef {
	return append([]flagDef{
		{onSource, &cli.StringFlag{Name: "cache-size", Value: "512MiB", Usage: "memory for decoded chunks, a size (see SIZES in volfs --help: 256MiB, 2GiB; at least 16MiB)"}},
		{onSource, &cli.StringFlag{Name: "missing", Value: "fill", Usage: "a chunk the source lacks reads as the fill value (fill) or fails to open with ENOENT (error): fill or error"}},
		{onSource, &cli.IntFlag{Name: "workers", Value: 16, Usage: "concurrent requests per host (the size of its connection pool), and the chunk loads run at once by the pool for read-ahead and batches"}},
		{onSource, &cli.BoolFlag{Name: "follow-symlinks", DefaultText: "true, false with --allow-other and for serve", Usage: "follow symlinks of a local source that lead outside it (where they are not followed they read as permission denied)"}},
		{onSource, &cli.BoolFlag{Name: "follow-redirects", Usage: "follow HTTP redirects to another scheme, host or port than the source's (by default refused)"}},
		{onSource, &cli.DurationFlag{Name: "stall-timeout", Value: 30 * time.Second, Usage: "an HTTP or gs:// attempt that makes no progress this long is retried"}},
		{onSource, &cli.IntFlag{Name: "retries", Value: 5, Usage: "a request to an HTTP, gs:// or s3:// source that fails transiently (5xx, reset or refused connection, stall) is sent again this many times, with full-jitter back-off from 100ms doubling to 5s, before it is an error"}},
		{onSource, &cli.StringFlag{Name: "min-rate", Value: "64KiB", Usage: "slowest HTTP or gs:// transfer per second: an attempt may take --stall-timeout plus its size at this rate, then it is retried (a size, see SIZES in volfs --help)"}},
		{onSource, &cli.DurationFlag{Name: "read-timeout", Value: time.Minute, Usage: "no read waits longer than this for the source, retries included: it fails with EIO (0: no bound beyond the retries)"}},
		{onSource, &cli.DurationFlag{Name: "metadata-ttl", Usage: "list a directory of the source again after this long, so objects added after mounting show, and check again then that a disk-cache entry's objects and each volume's metadata are unchanged (0: once per mount)"}},
		{onSource, &cli.BoolFlag{Name: "anonymous", Usage: "gs:// and s3:// sources: send no credentials (unsigned requests), even when Application Default Credentials or AWS credentials are found"}},
		{onSource, &cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"}},
		{onSource, &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text (key=value) or json, one record per line"}},
		{onSource, &cli.StringFlag{Name: "log-file", Usage: "append logs to this file instead of stderr (with --daemon: instead of syslog)"}},
		{onSource, &cli.StringFlag{Name: "read-ahead", Value: "64MiB", Usage: "chunks prefetched ahead of readers that read chunk files or stitched views in order: bytes per reader and in all (a size, see SIZES in volfs --help; 0 turns read-ahead off)"}},
		{onSource, &cli.StringFlag{Name: "cache-dir", Usage: "keep decoded chunks across restarts in DIR/volfs-UID, a directory of volfs's own (mode 0700; checked against the source's object identities; off when empty)"}},
		{onSource, &cli.StringFlag{Name: "disk-cache-size", Value: "10GiB", Usage: "bound of --cache-dir, a size (see SIZES in volfs --help; least recently used out first)"}},
		{onSource, &cli.StringFlag{Name: "shared-cache", Usage: "share decoded chunks with a fleet of mounts on redis://HOST:PORT[/DB], rediss://..., redis+cluster://H1:P1,H2:P2 or memcache://H1:P1[,H2:P2] (password: in the URL or VOLFS_SHARED_CACHE_PASSWORD; off when empty)"}},
		{onSource, &cli.StringFlag{Name: "shared-cache-secret", Usage: "sign the values of --shared-cache with this secret and refuse values not signed with it (every node of the fleet must give the same one)"}},
		{onFUSE | onServe, &cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://ADDR/metrics (e.g. localhost:9090; off when empty); beyond loopback only with --metrics-public"}},
		{onFUSE | onServe, &cli.BoolFlag{Name: "metrics-public", Usage: "let --metrics-addr listen beyond loopback, where anyone who reaches it reads the metrics (source, paths in errors, rates)"}},
		{onFUSE, &cli.BoolFlag{Name: "direct-io", Usage: "serve reads without the kernel's page cache: decoded chunks held once, faster first reads, but every read asks volfs"}},
		{onFUSE, &cli.BoolFlag{Name: "no-disk-passthrough", Usage: "keep chunks of --cache-dir compressed and read them through volfs, rather than uncompressed, each in a file the kernel reads in volfs's place (FUSE passthrough; on by default where the kernel allows it: root, Linux 6.9 and later)"}},
		{onFUSE, &cli.BoolFlag{Name: "passthrough", Usage: "let the kernel read a chunk stored verbatim in a local source from its file (FUSE passthrough; root, Linux 6.9 and later): as fast as cat of the source, but a source file rewritten in place during a read is read as it is, old and new bytes mixed"}},
		{onFUSE, &cli.StringFlag{Name: "passthrough-min-size", Value: "1MiB", Usage: "use FUSE passthrough (--passthrough, and chunks of --cache-dir) only for chunks of at least this size (see SIZES in volfs --help; 0: every chunk): a smaller one is served by volfs, since passthrough saves read round trips and costs a backing file registered at every open"}},
		{onFUSE, &cli.BoolFlag{Name: "allow-other", Usage: "let other users read the mount (needs user_allow_other in /etc/fuse.conf unless root)"}},
		{onFUSE, &cli.IntFlag{Name: "uid", Value: os.Getuid(), DefaultText: "the caller's", Usage: "owner uid shown for every file"}},
		{onFUSE, &cli.IntFlag{Name: "gid", Value: os.Getgid(), DefaultText: "the caller's", Usage: "owner gid shown for every file"}},
		{onFUSE, &cli.BoolFlag{Name: "allow-non-empty", Usage: "mount over a directory that is not empty, hiding what it holds"}},
		{onFUSE, &cli.BoolFlag{Name: "debug-fuse", Usage: "log every FUSE request"}},
		{onFUSE | onServe, &cli.BoolFlag{Name: "allow-empty-source", Usage: "mount a source whose root shows nothing (no volume metadata, nothing listed); by default it is refused, since that is what a typo in a URL, bucket prefix or path gives"}},
		{onWarm, &cli.StringFlag{Name: "bbox", Usage: "warm only the chunks that meet this box of voxels, x0:x1,y0:y1,z0:z1 (x first; the coordinates of the scale's chunk names, end excluded); the PATHs must lie in one scale or array"}},
		{onWarm, &cli.BoolFlag{Name: "dry-run", Usage: "list the chunks that warm would fetch (those not in --cache-dir yet), fetching nothing"}},
		{onMount | onServe, &cli.BoolFlag{Name: "daemon", Usage: "serve in the background; return once the mount (or server) is live (exit 0) or has failed (the reason, non-zero)"}},
	}, append(append(serveFlags(), s3FlagTable()...), refsFlagTable()...)...)
}

// flagCategories groups the flags in --help and the man page, by name;
// a flag not named here is listed under categoryOther.
var flagCategories = map[string]string{}

const (
	categorySource = "Source and network:"
	categoryCaches = "Caches:"
	categoryS3     = "S3 (s3:// sources):"
	categoryFUSE   = "FUSE (mount, demo):"
	categoryLog    = "Logging and metrics:"
	categoryServe  = "HTTP server (serve):"
	categoryWarm   = "Warm:"
	categoryOther  = "Running:"
)

func init() {
	for category, names := range map[string][]string{
		categorySource: {"missing", "workers", "follow-symlinks", "follow-redirects", "stall-timeout", "retries", "min-rate", "read-timeout", "metadata-ttl", "anonymous", "allow-empty-source"},
		categoryCaches: {"cache-size", "read-ahead", "cache-dir", "disk-cache-size", "shared-cache", "shared-cache-secret"},
		categoryS3:     {"profile", "region", "endpoint-url", "requester-pays"},
		categoryFUSE:   {"direct-io", "passthrough", "no-disk-passthrough", "passthrough-min-size", "allow-other", "uid", "gid", "allow-non-empty", "debug-fuse"},
		categoryLog:    {"log-level", "log-format", "log-file", "metrics-addr"},
		categoryWarm:   {"bbox", "dry-run"},
		categoryServe:  {"addr", "webdav", "auth", "auth-file", "allow-anonymous", "cert", "key", "write-timeout"},
	} {
		for _, n := range names {
			flagCategories[n] = category
		}
	}
}

// flagValues lists the values of the flags that take one of a few words,
// which shell completion offers.
var flagValues = map[string][]string{
	"missing":    {"fill", "error"},
	"log-level":  {"debug", "info", "warn", "error"},
	"log-format": {"text", "json"},
}

// envPrefix starts the environment variable of every flag.
const envPrefix = "VOLFS_"

// envName is the environment variable that sets flag name:
// VOLFS_CACHE_SIZE for cache-size.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// flagsFor returns the flags that the commands in on take, each reading
// its environment variable. It panics on a flag type it does not know: the
// table is static, and TestFlagTable runs it.
func flagsFor(on commandSet) []cli.Flag {
	var out []cli.Flag
	for _, d := range flagTable() {
		if d.on&on == 0 {
			continue
		}
		env := []string{envName(d.flag.Names()[0])}
		cat, ok := flagCategories[d.flag.Names()[0]]
		if !ok {
			cat = categoryOther
		}
		switch f := d.flag.(type) {
		case *cli.StringFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.IntFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.Int64Flag:
			f.EnvVars, f.Category = env, cat
		case *cli.UintFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.BoolFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.DurationFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.Float64Flag:
			f.EnvVars, f.Category = env, cat
		case *cli.PathFlag:
			f.EnvVars, f.Category = env, cat
		case *cli.StringSliceFlag:
			f.EnvVars, f.Category = env, cat
		default:
			panic(fmt.Sprintf("volfs: flag %s: add its type %T to flagsFor", f.Names()[0], f))
		}
		out = append(out, d.flag)
	}
	return out
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
	if opts.Tiers, err = sharedTiers(c, log); err != nil {
		return nil, err
	}
	var exclude []string
	if mountpoint != "" {
		exclude = []string{mountpoint}
	}
	if c.Int("retries") < 0 || c.Int("retries") > 50 {
		return nil, fmt.Errorf("--retries: want 0 to 50, got %d", c.Int("retries"))
	}
	httpOpts := fetcher.HTTPOptions{
		Conns: c.Int("workers"), StallTimeout: c.Duration("stall-timeout"), MinRate: minRate,
		FollowRedirects: c.Bool("follow-redirects"), Log: log, MaxAttempts: c.Int("retries") + 1,
	}
	src, err := openSource(c.Context, c, source, fetcher.Options{
		HTTP: httpOpts,
		S3:   s3Options(c, httpOpts),
		File: fetcher.FileOptions{FollowSymlinks: followSymlinks(c), Log: log, Exclude: exclude},
		GCS: fetcher.GCSOptions{
			Conns: c.Int("workers"), Anonymous: c.Bool("anonymous"),
			StallTimeout: c.Duration("stall-timeout"), MinRate: minRate, MaxAttempts: c.Int("retries") + 1,
		},
	}, log)
	if err != nil {
		return nil, err
	}
	opts.Workers = c.Int("workers")
	if dir := c.String("cache-dir"); dir != "" {
		d, err := disk.Open(disk.Options{Dir: dir, MaxBytes: diskBytes, Log: log})
		if err != nil {
			return nil, fmt.Errorf("--cache-dir: %w", err)
		}
		opts.Disk = cache.NewDisk(d)
		slog.Debug("disk cache", "dir", d.Dir(), "bytes", d.Stats().Bytes, "files", d.Stats().Files)
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
// that a link cannot hand them a file of the owner's, and so does `volfs
// serve`, whose clients are others.
func followSymlinks(c *cli.Context) bool {
	if c.IsSet("follow-symlinks") {
		return c.Bool("follow-symlinks")
	}
	return !c.Bool("allow-other") && !servesOthers(c)
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
