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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"
	"golang.org/x/net/netutil"

	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/fs/fuse"
)

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
// extra's and Go's runtime and process metrics, until the process ends, within the
// bounds above. A failure to listen is returned at once.
func serveMetrics(addr string, public bool, tree *fs.Tree, extra ...prometheus.Collector) error {
	loopback, err := checkMetricsAddr(addr, public)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(tree.Collectors()...)
	reg.MustRegister(extra...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: metricsConns}))
	srv := &http.Server{
		Handler:           loopbackHosts(loopback, mux),
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

// checkMountpoint refuses a mountpoint that c's flags cannot mount at:
// missing, not a directory, mounted (or left stale by a dead server), not
// empty without --allow-non-empty, or --allow-other that fusermount3 will
// refuse; and a local source that the mountpoint holds or is held by. It
// touches no network.
func checkMountpoint(c *cli.Context, source, mountpoint string) error {
	if err := fuse.CheckMountpoint(mountpoint); err != nil {
		return err
	}
	if _, rest, err := splitFormat(source); err == nil && (!strings.Contains(rest, "://") || strings.HasPrefix(rest, "file://")) {
		if src, err := fetcher.Open(rest, fetcher.Options{}); err == nil {
			if local, ok := src.(fetcher.Local); ok {
				if err := fuse.CheckApart(local.Root(), mountpoint); err != nil {
					return err
				}
			}
		}
	}
	if !c.Bool("allow-non-empty") {
		if err := fuse.CheckEmpty(mountpoint); err != nil {
			return fmt.Errorf("%w; pass --allow-non-empty to mount over it", err)
		}
	}
	if c.Bool("allow-other") {
		if err := fuse.CheckAllowOther(); err != nil {
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
	case strings.HasPrefix(u, "gs://") || strings.HasPrefix(u, "s3://"):
		why = "no volume metadata at that prefix and no object under it (check the bucket and prefix for a typo)"
	}
	return fmt.Errorf("%s: nothing to serve: %s; pass --allow-empty-source to mount it anyway", tree.Source(), why)
}

// passthroughMinSize reads --passthrough-min-size.
func passthroughMinSize(c *cli.Context) (int64, error) {
	n, err := parseSize(c.String("passthrough-min-size"))
	if err != nil {
		return 0, fmt.Errorf("--passthrough-min-size: %w", err)
	}
	return n, nil
}

// serve mounts source at mountpoint and blocks until it is unmounted by a
// signal or from outside. Once the mount is up it runs ready, if set, and
// tells rep.
func serve(c *cli.Context, rep *reporter, source, mountpoint string, ready func()) error {
	// Refuse a bad mountpoint or flag before any network work.
	if err := checkMountpoint(c, source, mountpoint); err != nil {
		return err
	}
	passMin, err := passthroughMinSize(c)
	if err != nil {
		return err
	}
	tree, err := openTree(c, source, mountpoint, rep.child)
	if err != nil {
		return err
	}
	// After a lazy detach the process exits without waiting for the loads
	// that programs still inside the mount wait for.
	detached := false
	defer func() {
		if !detached {
			tree.Close()
		}
	}()
	if !c.Bool("allow-empty-source") {
		if err := checkNotEmpty(c.Context, tree); err != nil {
			return err
		}
	}
	if addr := c.String("metrics-addr"); addr != "" {
		if err := serveMetrics(addr, c.Bool("metrics-public"), tree); err != nil {
			return err
		}
	}
	// From here on a signal must unmount, never kill.
	sig, stopSignals, err := rep.catchSignals()
	if err != nil {
		return err
	}
	defer stopSignals()
	var srv *gofuse.Server
	said, err := withFusermountOutput(func() (err error) {
		srv, err = fuse.Mount(mountpoint, tree, fuse.MountOptions{
			AllowOther: c.Bool("allow-other"),
			UID:        uint32(c.Int("uid")),
			GID:        uint32(c.Int("gid")),
			Debug:      c.Bool("debug-fuse"),
			DirectIO:   c.Bool("direct-io"),
			// FUSE passthrough of verbatim local chunks (fs/fuse).
			Passthrough: c.Bool("passthrough"),
			// FUSE passthrough of chunks kept in the disk cache.
			NoDiskPassthrough:  c.Bool("no-disk-passthrough"),
			PassthroughMinSize: passMin,
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

	// The mountpoint as the kernel names it in /proc, to find who holds it.
	abs := mountpoint
	if a, err := filepath.Abs(mountpoint); err == nil {
		abs = a
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	busy := false // a stop signal found the mount busy
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
			if busy {
				// The second stop signal: the user wants out, now.
				err := detach(abs)
				sdNotify("STOPPING=1")
				if err != nil {
					slog.Error("could not detach the mount; still serving", "mountpoint", mountpoint, "err", err)
					continue
				}
				detached = true
				slog.Warn("detached the busy mount and exiting; programs still reading it get errors (ENOTCONN)", "signal", s.String(), "mountpoint", mountpoint)
				return nil
			}
			// Unmount first: nothing before it may fail or block.
			err := unmount(srv, abs)
			sdNotify("STOPPING=1")
			if err != nil {
				// Busy: a process still has a file open or its cwd
				// inside. Keep serving; another signal detaches.
				busy = true
				if hs := holders("/proc", abs); len(hs) > 0 || errors.Is(err, syscall.EBUSY) || strings.Contains(err.Error(), "busy") {
					slog.Error(busyMessage(mountpoint, hs), "signal", s.String())
				} else {
					slog.Error("unmount failed; still serving: signal again to detach the mount and exit", "signal", s.String(), "mountpoint", mountpoint, "err", oneLine(err.Error()))
				}
				continue
			}
			slog.Info("unmounting", "signal", s.String())
		}
	}
}

// unmount unmounts srv's mount at mountpoint, as root directly (so that a
// busy mount is EBUSY, not fusermount3's message), else with fusermount3.
func unmount(srv *gofuse.Server, mountpoint string) error {
	if os.Geteuid() == 0 {
		err := syscall.Unmount(mountpoint, 0)
		if !errors.Is(err, syscall.EPERM) {
			return err
		}
	}
	return srv.Unmount()
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
