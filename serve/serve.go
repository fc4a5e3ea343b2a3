// Package serve answers HTTP and WebDAV requests from an fs.Tree: the tree
// that `volfs mount` shows, through the same chunk store, caches,
// read-ahead and views, for hosts where FUSE is not an option (macOS,
// Windows, containers) and for browsers.
//
// # Plain HTTP
//
// GET and HEAD of a file answer its bytes, with one byte range honoured
// (206 and Content-Range; a request for several ranges gets the whole file,
// as RFC 9110 allows), an ETag and Last-Modified, and a Content-Length that
// comes from the metadata without fetching anything. A directory answers
// an HTML index in the shape http.FileServer writes (so that HTTP clients
// that walk indexes, volfs's own HTTP fetcher among them, can list it), or
// JSON with ?format=json.
//
// # WebDAV
//
// With Options.WebDAV, PROPFIND and OPTIONS are answered too, read-only:
// every method that would change something is 405, and the share is
// announced as DAV class 1 (no locks), which makes Finder and Windows
// mount it read-only. A PROPFIND's reply is written as the listing yields
// it (webdav.go), never gathered in memory.
//
// # Exposure
//
// What the server exposes, and to whom, is one Policy (policy.go): the web
// origins whose pages may read it (CORS: none by default), the credentials
// it asks for, the Host names it answers to, and every bound a client
// lives within. Listen (listen.go) applies its connection bounds.
//
// # Safety
//
// A request path is resolved inside the tree or not at all: a path with a
// "." or ".." segment, an encoded slash or backslash, a NUL or any other
// byte a key cannot hold is 404 before the tree is asked. Each write to a
// client has its own deadline (Policy.WriteTimeout), so a client that
// stops reading releases its request after that long; the bytes of a
// reply are copied out of the chunk cache block by block, so no client
// holds a chunk. At most Policy.Slots requests read from the tree at once;
// a request takes its slot once its body is read, and gives it back while
// each block of its reply is written, so that slow clients, however many,
// hold connections but never the tree.
package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// blockSize is the most bytes read from the tree and written to a client
// in one step.
const blockSize = 256 << 10

// Options configures a Server.
type Options struct {
	// WebDAV answers PROPFIND and OPTIONS as a read-only WebDAV share.
	WebDAV bool
	// Policy is what the server exposes and to whom.
	Policy Policy
	// Log receives one line per failed read (through the tree's error
	// mapping) and per refused credentials; nil means slog.Default().
	Log *slog.Logger
}

// Server is an http.Handler that serves a tree. It is safe for concurrent
// use.
type Server struct {
	tree    *fs.Tree
	webDAV  bool
	policy  Policy
	log     *slog.Logger
	start   time.Time // Last-Modified of every file, and part of every ETag
	active  chan struct{}
	metrics *metrics
}

// New returns the server of tree. The tree must stay open while the
// server answers.
func New(tree *fs.Tree, opts Options) *Server {
	s := &Server{
		tree:    tree,
		webDAV:  opts.WebDAV,
		policy:  opts.Policy.withDefaults(),
		log:     opts.Log,
		start:   time.Now().Truncate(time.Second),
		metrics: newMetrics(),
	}
	s.active = make(chan struct{}, s.policy.Slots)
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Collectors returns the server's Prometheus collectors:
// volfs_http_requests_total by method and the code sent (counted before
// the reply's first byte goes out), volfs_http_replies_cut_total, and
// volfs_http_served_bytes_total.
func (s *Server) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// readMethods are the methods answered; any other is 405.
func (s *Server) readMethods() string {
	if s.webDAV {
		return "GET, HEAD, OPTIONS, PROPFIND"
	}
	return "GET, HEAD, OPTIONS"
}

func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := newResponse(rw, r, s.metrics, s.policy.WriteTimeout, s.active)
	defer func() {
		w.finish()
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "depth", r.Header.Get("Depth"), "range", r.Header.Get("Range"),
			"proto", r.Proto, "tls", r.TLS != nil, "code", w.code, "bytes", w.bytes)
	}()
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if r.ContentLength != 0 && r.ProtoMajor == 1 {
		dropBody(w)
	}
	if code, why := s.policy.admit(r); code != 0 {
		http.Error(w, why, code)
		return
	}
	s.policy.cors(h, r)
	if s.policy.preflight(w, r, s.readMethods()) || !s.policy.authorized(w, r) {
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Allow", s.readMethods())
		if s.webDAV {
			// Class 1: no locks, which tells Finder and Windows that the
			// share is read-only.
			h.Set("DAV", "1")
			h.Set("MS-Author-Via", "DAV")
		}
		w.WriteHeader(http.StatusOK)
		return
	case "PROPFIND":
		if s.webDAV {
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
	// The body is read before a slot is taken: a client dripping it holds
	// its connection, never a slot.
	var body []byte
	if r.Method == "PROPFIND" {
		if body, ok = readBody(w, r); !ok {
			return
		}
	}
	if !w.take(r.Context()) {
		w.code = statusClientGone
		return
	}
	defer w.give()
	if r.Method == "PROPFIND" {
		s.propfind(w, r, p, body)
		return
	}
	s.get(w, r, p)
}

// dropBody tells net/http that w's request has a body (HTTP/1) that the
// server will not read to its end: the connection is closed after the
// reply, and the reads of the body net/http makes to keep the connection
// alive (before the reply's first byte, and after the handler) fail at
// once. Without this, those reads have no deadline: a client that
// declares a body and never sends it would hold its reply, or its
// connection's place after the reply, for good. readBody, which reads a
// PROPFIND's body, lifts it once the body is read.
func dropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

// readBody reads r's body, at most maxBodyBytes within bodyTimeout; false
// when it answered the request (400 or 413). The deadline is lifted once
// the body is read: a read deadline that passes while the reply is
// written would cancel the request. A body that is not read to its end is
// dropped (dropBody).
func readBody(w *response, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	switch {
	case err != nil:
		dropBody(w)
		http.Error(w, "400 bad request: the body did not arrive", http.StatusBadRequest)
		return nil, false
	case len(body) > maxBodyBytes:
		dropBody(w)
		http.Error(w, "413 request body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Del("Connection") // read to its end: the connection may stay
	return body, true
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

// validators are what a reply says of the version of a file: its ETag,
// its Last-Modified, and whether they are strong (they change whenever the
// bytes may).
type validators struct {
	etag   string
	mod    time.Time
	strong bool
	// versioned is set when etag names the version of the file's bytes
	// (fs.Tree.Version), which the bytes a reply carries must then be.
	versioned bool
	// dates is set when mod stands for the bytes as etag does, so that
	// If-Modified-Since and an If-Range date count: not for a versioned
	// file, nor for any once the tree has seen its source change
	// (fs.Tree.Changes), since mod is the server's start whatever the
	// version.
	dates bool
}

// validators returns the validators of f, the file at p. Without a
// metadata TTL, the ETag of a file whose version the tree names
// (fs.Tree.Version: a chunk, from the identities of its objects and its
// array's recipe) changes exactly when its bytes can, and is the same in
// every server over the same source. With a TTL that version is the
// origin's current one, while the bytes served may be a copy the tree
// kept from an earlier one: such a tag could name bytes the reply does not
// carry, and a client revalidating with it would keep old bytes for good;
// so under a TTL, and for any other file, the ETag is made of the
// server's start (a restarted server may read a source that changed), the
// path, the size and, without a TTL, the number of changes the tree has
// seen in its source (fs.Tree.Changes): a stitched view's bytes change
// when a chunk of it is loaded again as a rewritten version, and its tag
// must not stand for both. Without a metadata
// TTL a file's bytes do not change while the server runs: the ETag is
// strong. With one, the source may change under the server and a file's
// bytes with it: the ETag is weak (a version-less file's changes every
// TTL, so that a client that revalidates sees new bytes within about a TTL
// of the tree), and If-Range, which needs a strong validator, never
// applies, so that no resumed download splices two versions.
//
// With ask false (a PROPFIND's listing) the tree names only the versions
// it knows without asking the origin (fs.Tree.KnownVersion), and a file
// whose version it would have to ask for has no ETag (ok false): never a
// tag that GET would not give.
func (s *Server) validators(ctx context.Context, p string, f fs.File, ask bool) (v validators, ok bool) {
	size := strconv.FormatInt(f.Size(), 16)
	ttl := s.policy.MetadataTTL
	var ver string
	var err error
	switch {
	case ttl > 0:
		err = fs.ErrNoVersion
	case ask:
		ver, err = s.tree.Version(ctx, f)
	default:
		ver, err = s.tree.KnownVersion(f)
		if errors.Is(err, fs.ErrVersionNotKnown) {
			return validators{}, false
		}
	}
	changes := s.tree.Changes()
	var tag string
	if err == nil {
		sum := sha256.Sum256([]byte(ver))
		tag = hex.EncodeToString(sum[:16]) + "-" + size
	} else {
		h := fnv.New64a()
		h.Write([]byte(strconv.FormatInt(s.start.Unix(), 10)))
		h.Write([]byte{0})
		h.Write([]byte(p))
		h.Write([]byte{0})
		h.Write([]byte(strconv.FormatUint(changes, 10)))
		tag = strconv.FormatUint(h.Sum64(), 16) + "-" + size
		if ttl > 0 {
			tag += "-" + strconv.FormatInt(time.Now().UnixNano()/int64(ttl), 16)
		}
	}
	if ttl <= 0 {
		return validators{etag: `"` + tag + `"`, mod: s.start, strong: true, versioned: err == nil, dates: err != nil && changes == 0}, true
	}
	epoch := time.Now().UnixNano() / int64(ttl)
	return validators{etag: `W/"` + tag + `"`, mod: time.Unix(0, epoch*int64(ttl)).Truncate(time.Second), dates: true}, true
}
