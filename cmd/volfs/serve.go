package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	volserve "github.com/volfs/volfs/serve"
)

// serveFlags are the flags of `volfs serve` alone.
func serveFlags() []flagDef {
	return []flagDef{
		{onServe, &cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "listen on HOST:PORT; a HOST other than loopback needs --auth, --auth-file or --allow-anonymous (port 0 picks a free one, logged)"}},
		{onServe, &cli.BoolFlag{Name: "webdav", Usage: "also answer WebDAV (PROPFIND), read-only, for Finder, Windows, davfs2 and rclone"}},
		{onServe, &cli.StringFlag{Name: "auth", Usage: "require HTTP Basic credentials USER:PASSWORD"}},
		{onServe, &cli.StringFlag{Name: "auth-file", Usage: "require HTTP Basic credentials from an htpasswd file of bcrypt entries (htpasswd -B)"}},
		{onServe, &cli.BoolFlag{Name: "allow-anonymous", Usage: "serve beyond loopback without credentials"}},
		{onServe, &cli.StringFlag{Name: "cert", Usage: "serve HTTPS with this PEM certificate (with --key)"}},
		{onServe, &cli.StringFlag{Name: "key", Usage: "the PEM private key of --cert"}},
		{onServe, &cli.StringSliceFlag{Name: "cors-origin", Usage: "let pages of this web origin read the served tree (CORS), e.g. https://neuroglancer-demo.appspot.com; repeat for more, * for every origin (public data only); none by default"}},
		{onServe, &cli.DurationFlag{Name: "write-timeout", Value: volserve.DefaultWriteTimeout, Usage: "a client that takes longer than this to take one block (256 KiB) of a reply is cut off, releasing what its request holds"}},
	}
}

// Bounds of the HTTP server against clients that hold connections: the
// request headers (and a TLS handshake) within serveHeaderTimeout, an idle
// keep-alive connection closed after serveIdleTimeout, or sooner when a
// newcomer needs its place (serve.Listener). No http.Server.ReadTimeout:
// net/http cancels a request's context when that deadline passes during
// the reply, which would cut every download longer than it; the one
// request body read (PROPFIND's) has a deadline of its own (serve.Server).
const (
	serveHeaderTimeout = 10 * time.Second
	serveIdleTimeout   = 2 * time.Minute
	serveHeaderBytes   = 64 << 10
	// serveShutdown is how long requests in flight get to finish after
	// SIGINT or SIGTERM.
	serveShutdown = 10 * time.Second
)

func serveCommand(rep *reporter) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve the tree that mount shows over HTTP (and WebDAV with --webdav) until SIGINT or SIGTERM",
		ArgsUsage: "SOURCE",
		Flags:     flagsFor(onServe),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("usage: volfs serve SOURCE")
			}
			// Refuse what can be refused before any network work.
			cfg, err := serveConfigOf(c)
			if err != nil {
				return err
			}
			if c.Bool("daemon") && !rep.child {
				if _, err := newLogger(logFlags(c, false)); err != nil {
					return err
				}
				return daemonize(c.String("log-file"))
			}
			return runServe(c, rep, cfg)
		},
	}
}

// servesOthers reports whether c is `volfs serve`, whose clients are other
// programs and users than the one who runs it.
func servesOthers(c *cli.Context) bool { return c.Command != nil && c.Command.Name == "serve" }

// serveConfig is what serve's own flags ask for, checked.
type serveConfig struct {
	addr   string
	policy volserve.Policy
	tls    *tls.Config // nil for plain HTTP
}

// serveConfigOf checks serve's flags: credentials that can be read, a
// certificate that loads, and an address beyond loopback only with
// credentials or --allow-anonymous. It does no network work but resolving
// the host of --addr.
func serveConfigOf(c *cli.Context) (serveConfig, error) {
	cfg := serveConfig{addr: c.String("addr"), policy: volserve.Policy{
		Origins:      c.StringSlice("cors-origin"),
		WriteTimeout: c.Duration("write-timeout"),
		MetadataTTL:  c.Duration("metadata-ttl"),
	}}
	var err error
	switch a, f := c.String("auth"), c.String("auth-file"); {
	case a != "" && f != "":
		return cfg, errors.New("--auth and --auth-file: give one")
	case a != "":
		cfg.policy.Auth, err = volserve.ParseAuth(a)
	case f != "":
		cfg.policy.Auth, err = volserve.LoadHtpasswd(f)
	}
	if err != nil {
		return cfg, err
	}
	switch cert, key := c.String("cert"), c.String("key"); {
	case (cert == "") != (key == ""):
		return cfg, errors.New("--cert and --key: give both or neither")
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return cfg, fmt.Errorf("--cert, --key: %w", err)
		}
		cfg.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	}
	if err := volserve.CheckOrigins(cfg.policy.Origins); err != nil {
		return cfg, err
	}
	if c.Duration("write-timeout") <= 0 {
		return cfg, fmt.Errorf("--write-timeout: want a positive duration, got %v", c.Duration("write-timeout"))
	}
	if addr := c.String("metrics-addr"); addr != "" {
		if _, err := checkMetricsAddr(addr, c.Bool("metrics-public")); err != nil {
			return cfg, err
		}
	}
	if cfg.policy.Loopback, err = isLoopback(cfg.addr); err != nil {
		return cfg, fmt.Errorf("--addr: %w", err)
	}
	if !cfg.policy.Loopback && cfg.policy.Auth == nil && !c.Bool("allow-anonymous") {
		return cfg, fmt.Errorf("--addr %s reaches beyond loopback: anyone who can reach it could read the source; pass --auth USER:PASSWORD or --auth-file FILE (with --cert and --key, so that passwords do not cross the network in clear), or --allow-anonymous", cfg.addr)
	}
	return cfg, nil
}

// isLoopback reports whether every address that addr (HOST:PORT) listens
// on is a loopback one. An empty host, 0.0.0.0 or :: is every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// runServe opens the source with the flags mount takes and serves its tree
// at cfg.addr until SIGINT or SIGTERM; SIGHUP does not stop it, as it does
// not stop a mount.
func runServe(c *cli.Context, rep *reporter, cfg serveConfig) error {
	tree, err := openTree(c, c.Args().First(), "", rep.child)
	if err != nil {
		return err
	}
	defer tree.Close()
	if !c.Bool("allow-empty-source") {
		if err := checkNotEmpty(c.Context, tree); err != nil {
			return err
		}
	}
	srv := volserve.New(tree, volserve.Options{
		WebDAV: c.Bool("webdav"),
		Policy: cfg.policy,
		Log:    slog.Default(),
	})
	if addr := c.String("metrics-addr"); addr != "" {
		if err := serveMetrics(addr, c.Bool("metrics-public"), tree, srv.Collectors()...); err != nil {
			return err
		}
	}
	sig, stopSignals, err := rep.catchSignals()
	if err != nil {
		return err
	}
	defer stopSignals()
	tcp, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	// The connection bounds count TCP connections; TLS wraps them from
	// outside, so that net/http sees *tls.Conn (r.TLS, HTTP/2, and the
	// handshake within serveHeaderTimeout).
	bounded := volserve.Listen(tcp, cfg.policy)
	var ln net.Listener = bounded
	scheme := "http"
	if cfg.tls != nil {
		ln = tls.NewListener(bounded, cfg.tls)
		scheme = "https"
	}
	hs := &http.Server{
		Handler:           srv,
		ConnState:         bounded.ConnState,
		TLSConfig:         cfg.tls,
		ReadHeaderTimeout: serveHeaderTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: volserve.StreamsPerConn},
		// Each write has its own deadline (--write-timeout), not the
		// whole reply: a volume.raw of gigabytes takes what it takes.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	url := fmt.Sprintf("%s://%s/", scheme, ln.Addr())
	slog.Info("serving", "source", tree.Source().String(), "url", url, "webdav", c.Bool("webdav"), "auth", cfg.policy.Auth != nil, "cors", cfg.policy.Origins, "pid", os.Getpid())
	if err := rep.ready(url); err != nil {
		hs.Close()
		return err
	}
	if rep.child {
		os.Chdir("/")
	}
	for {
		select {
		case err := <-done:
			return fmt.Errorf("serve: %w", err)
		case s := <-sig:
			if s == syscall.SIGHUP {
				slog.Info("SIGHUP: still serving; stop with SIGINT or SIGTERM", "url", url)
				continue
			}
			slog.Info("stopping", "signal", s.String())
			sdNotify("STOPPING=1")
			ctx, cancel := context.WithTimeout(context.Background(), serveShutdown)
			err := hs.Shutdown(ctx)
			cancel()
			if err != nil {
				hs.Close()
			}
			slog.Info("stopped", "url", url)
			return nil
		}
	}
}

// checkMetricsAddr refuses a --metrics-addr beyond loopback without
// --metrics-public, as serve refuses --addr beyond loopback without
// credentials: the metrics name the source and paths. It reports whether
// addr is loopback.
func checkMetricsAddr(addr string, public bool) (bool, error) {
	loopback, err := isLoopback(addr)
	if err != nil {
		return false, fmt.Errorf("--metrics-addr: %w", err)
	}
	if !loopback && !public {
		return false, fmt.Errorf("--metrics-addr %s reaches beyond loopback: anyone who can reach it could read the metrics (the source, paths in errors); bind it to 127.0.0.1, or pass --metrics-public", addr)
	}
	return loopback, nil
}

// loopbackHosts answers with h only requests whose Host names the
// loopback when loopback is set (DNS rebinding, as serve.Policy.Loopback).
func loopbackHosts(loopback bool, h http.Handler) http.Handler {
	if !loopback {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !volserve.LocalHost(r.Host) {
			http.Error(w, "403 forbidden: this server answers only to localhost, 127.0.0.1 or [::1]", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
