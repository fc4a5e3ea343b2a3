// Package serve answers HTTP and WebDAV requests from an fs.Tree: the tree
// that `volfs mount` shows, through the same chunk store, caches,
// read-ahead and views, for hosts where FUSE is not an option (macOS,
// Windows, containers) and for browsers.
//
// # Plain HTTP
//
// GET and HEAD of a file answer its bytes, with one byte range honoured
// (206 and Content-Range; a request for several ranges gets the whole file,
// as RFC 9110 allows), a strong ETag and Last-Modified that hold for the
// life of the server, and a Content-Length that comes from the metadata
// without fetching anything. A directory answers an HTML index in the
// shape http.FileServer writes (so that HTTP clients that walk indexes,
// volfs's own HTTP fetcher among them, can list it), or JSON with
// ?format=json. Every answer carries CORS headers that let a page of any
// origin read it (neuroglancer).
//
// # WebDAV
//
// With Options.WebDAV, PROPFIND and OPTIONS are answered too, by
// golang.org/x/net/webdav over the same tree (davFS), read-only: every
// method that would change something is 405, and the share is announced
// as DAV class 1 (no locks), which makes Finder and Windows mount it
// read-only.
//
// # Safety
//
// A request path is resolved inside the tree or not at all: a path with a
// "." or ".." segment, an encoded slash or backslash, a NUL or any other
// byte a key cannot hold is 404 before the tree is asked. Each write to a
// client has its own deadline (Options.WriteTimeout), so a client that
// stops reading releases its request after that long; the bytes of a
// reply are copied out of the chunk cache block by block, so no client
// holds a chunk. At most maxActive requests read from the tree at once;
// the others wait for a slot, or for their client to leave.
package serve

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/webdav"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// DefaultWriteTimeout is Options.WriteTimeout when it is 0: one block of a
// reply (blockSize) must reach the client within it, which any client
// reading at 10 KiB/s does.
const DefaultWriteTimeout = 30 * time.Second

// maxActive bounds the requests that read the tree at once, and so the
// reply buffers (blockSize each) held: a few per core keeps every worker
// of the chunk store busy without letting a crowd of clients take memory.
const maxActive = 64

// blockSize is the most bytes read from the tree and written to a client
// in one step.
const blockSize = 256 << 10

// Options configures a Server.
type Options struct {
	// WebDAV answers PROPFIND and OPTIONS as a read-only WebDAV share.
	WebDAV bool
	// Auth, when not nil, must accept every request but a CORS preflight.
	Auth *Auth
	// WriteTimeout bounds each write of a reply; 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// LocalHosts answers only requests whose Host names the loopback
	// (localhost, 127.0.0.0/8, ::1), for a server that listens there: a
	// web page cannot then reach it through a name of its own that it
	// points at 127.0.0.1 (DNS rebinding).
	LocalHosts bool
	// Log receives one line per failed read (through the tree's error
	// mapping) and per refused credentials; nil means slog.Default().
	Log *slog.Logger
}

// Server is an http.Handler that serves a tree. It is safe for concurrent
// use.
type Server struct {
	tree    *fs.Tree
	opts    Options
	log     *slog.Logger
	start   time.Time // Last-Modified of every file, and part of every ETag
	active  chan struct{}
	dav     *webdav.Handler
	metrics *metrics
}

// New returns the server of tree. The tree must stay open while the
// server answers.
func New(tree *fs.Tree, opts Options) *Server {
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{
		tree:    tree,
		opts:    opts,
		log:     opts.Log,
		start:   time.Now().Truncate(time.Second),
		active:  make(chan struct{}, maxActive),
		metrics: newMetrics(),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.WebDAV {
		s.dav = &webdav.Handler{
			FileSystem: davFS{s},
			LockSystem: webdav.NewMemLS(),
			Logger: func(r *http.Request, err error) {
				if err != nil && !errors.Is(err, context.Canceled) {
					s.log.Debug("webdav", "method", r.Method, "path", r.URL.Path, "err", err)
				}
			},
		}
	}
	return s
}

// Collectors returns the server's Prometheus collectors:
// volfs_http_requests_total by method and code, and
// volfs_http_served_bytes_total.
func (s *Server) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// readMethods are the methods answered; any other is 405.
func (s *Server) readMethods() string {
	if s.opts.WebDAV {
		return "GET, HEAD, OPTIONS, PROPFIND"
	}
	return "GET, HEAD, OPTIONS"
}

func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := newResponse(rw, s.opts.WriteTimeout)
	defer func() {
		s.metrics.observe(r.Method, w.code, w.bytes)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "depth", r.Header.Get("Depth"), "range", r.Header.Get("Range"), "code", w.code, "bytes", w.bytes)
	}()
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", "Content-Length, Content-Range, Accept-Ranges, ETag, Last-Modified")
	h.Set("X-Content-Type-Options", "nosniff")
	if s.opts.LocalHosts && !localHost(r.Host) {
		http.Error(w, "403 forbidden: this server answers only to localhost, 127.0.0.1 or [::1]", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A CORS preflight carries no credentials, by the Fetch standard.
		h.Set("Access-Control-Allow-Methods", s.readMethods())
		h.Set("Access-Control-Allow-Headers", "Range, If-None-Match, If-Modified-Since, If-Range, Authorization, Depth")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.opts.Auth != nil && !s.opts.Auth.Check(r) {
		h.Set("WWW-Authenticate", `Basic realm="volfs", charset="UTF-8"`)
		http.Error(w, "401 unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Allow", s.readMethods())
		if s.opts.WebDAV {
			// Class 1: no locks, which tells Finder and Windows that the
			// share is read-only.
			h.Set("DAV", "1")
			h.Set("MS-Author-Via", "DAV")
		}
		w.WriteHeader(http.StatusOK)
		return
	case "PROPFIND":
		if s.opts.WebDAV {
			break
		}
		fallthrough
	default:
		h.Set("Allow", s.readMethods())
		http.Error(w, "405 method not allowed: this server is read-only", http.StatusMethodNotAllowed)
		return
	}
	p, ok := cleanPath(r)
	if !ok {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	select {
	case s.active <- struct{}{}:
		defer func() { <-s.active }()
	case <-r.Context().Done():
		w.code = statusClientGone
		return
	}
	if r.Method == "PROPFIND" {
		if !readBody(w, r) {
			return
		}
		s.propfind(w, r, p)
		return
	}
	s.get(w, r, p)
}

// Bounds of a PROPFIND's body: a list of property names, a few hundred
// bytes from any client.
const (
	maxBodyBytes = 1 << 20
	bodyTimeout  = 30 * time.Second
)

// readBody reads r's body, at most maxBodyBytes within bodyTimeout, and
// puts it back as a reader in memory; false when it answered the request
// (400 or 413). The deadline is lifted once the body is read: a read
// deadline that passes while the reply is written would cancel the
// request.
func readBody(w *response, r *http.Request) bool {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	_ = rc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		http.Error(w, "400 bad request: the body did not arrive", http.StatusBadRequest)
		return false
	case len(body) > maxBodyBytes:
		http.Error(w, "413 request body too large", http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// cleanPath returns the tree path that r names ("" for the root, no
// leading or trailing slash), and false when the path is one no key can
// take: a "." or ".." segment, an empty one inside it, an encoded slash or
// backslash, or a name the fetcher refuses (fetcher.CheckKey). The
// request-target may be absolute (a proxy's form): only its path counts.
func cleanPath(r *http.Request) (string, bool) {
	raw := r.URL.EscapedPath()
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(raw, "/") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(lower, "%00") {
		return "", false
	}
	p := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if p == "" {
		return "", r.URL.Path == "/" || r.URL.Path == ""
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "\\\x00") {
			return "", false
		}
	}
	if fetcher.CheckKey(p) != nil {
		return "", false
	}
	return p, true
}

// localHost reports whether the Host header host names the loopback.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// statusClientGone is the code counted for a request whose client left
// before it was answered (nginx's 499); nothing is sent.
const statusClientGone = 499

// status maps an error of the tree to an HTTP status through the mount's
// errno mapping (which logs each EIO once per path), so that a file the
// mount reads as missing is 404 here too.
func (s *Server) status(ctx context.Context, err error, op, p string) int {
	switch s.tree.Errno(ctx, err, op, "/"+p) {
	case syscall.ENOENT:
		return http.StatusNotFound
	case syscall.EACCES:
		return http.StatusForbidden
	case syscall.EINTR:
		return statusClientGone
	}
	if errors.Is(err, fs.ErrReadTimeout) {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// readerID is the read-ahead reader that r reads as: its client's address,
// so that one client going through the chunk files of a directory in key
// order has the next ones prefetched.
func readerID(r *http.Request) uint32 {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	h := fnv.New32a()
	h.Write([]byte(host))
	return h.Sum32() | 1<<31 // apart from the small numbers processes have
}

// etag is the strong ETag of the file at p of size bytes: it changes with
// the server's start (a restarted server may read a source that changed)
// and with the size, never while the server runs.
func (s *Server) etag(p string, size int64) string {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(s.start.Unix(), 10)))
	h.Write([]byte{0})
	h.Write([]byte(p))
	return `"` + strconv.FormatUint(h.Sum64(), 16) + "-" + strconv.FormatInt(size, 16) + `"`
}
