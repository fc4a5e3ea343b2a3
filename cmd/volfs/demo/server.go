package demo

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Server serves a map of objects over HTTP on a loopback port, as a static bucket front-end
// would. A gzip stream stored under a key not ending in ".gz" is the transport encoding of the
// plain object: it is sent as is, with Content-Encoding: gzip and without Range support, to
// clients that accept gzip, and decompressed (with Range support) to the rest. A path ending
// in "/" lists its children in the HTML form of http.FileServer; the same path without the
// slash redirects to it. Only GET and HEAD are allowed. It is safe for concurrent use.
type Server struct {
	// URL is the server's root, "http://127.0.0.1:PORT/".
	URL string

	objects  map[string][]byte // read-only after Serve
	srv      *http.Server
	requests atomic.Int64
}

// Serve starts a Server for objects on 127.0.0.1 and an ephemeral port. It does not copy
// objects: the caller must not modify the map or its slices until Close returns.
func Serve(objects map[string][]byte) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String() + "/", objects: objects}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // returns ErrServerClosed after Close
	return s, nil
}

// Close stops the server and closes every connection, idle or active.
func (s *Server) Close() { s.srv.Close() }

// Requests returns how many requests the server has received, of any kind.
func (s *Server) Requests() int64 { return s.requests.Load() }

// ServeHTTP answers one request as described on Server.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/")
	b, ok := s.objects[key]
	switch {
	case key == "" || strings.HasSuffix(key, "/"):
		s.serveDir(w, r, key)
	case ok:
		serveObject(w, r, key, b)
	case len(s.children(key+"/")) > 0:
		http.Redirect(w, r, "/"+key+"/", http.StatusMovedPermanently)
	default:
		http.NotFound(w, r)
	}
}

func serveObject(w http.ResponseWriter, r *http.Request, key string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	if path.Base(key) == "info" || path.Ext(key) == ".json" {
		h.Set("Content-Type", "application/json")
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b && path.Ext(key) != ".gz" {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			// A range of the encoded stream is of no use to a reader, so, like GCS for
			// gzip-encoded objects, ignore Range and send the whole stream.
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b) //nolint:errcheck // HEAD discards the body; a client that left, all of it
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			b, err = io.ReadAll(zr)
		}
		if err != nil {
			http.Error(w, "demo: corrupt gzip object", http.StatusInternalServerError)
			return
		}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b)) // does Range and HEAD
}

// acceptsGzip reports whether an Accept-Encoding header names gzip with a non-zero quality.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(params), "q="), 64)
		if c := strings.ToLower(strings.TrimSpace(coding)); (c == "gzip" || c == "x-gzip") && (err != nil || q > 0) {
			return true
		}
	}
	return false
}

// children returns the sorted names of the direct children of the directory prefix (which is
// "" or ends in "/"), subdirectories with a trailing "/".
func (s *Server) children(prefix string) []string {
	var names []string
	for k := range s.objects {
		if rest, ok := strings.CutPrefix(k, prefix); ok && rest != "" {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i+1]
			}
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func (s *Server) serveDir(w http.ResponseWriter, r *http.Request, prefix string) {
	names := s.children(prefix)
	if len(names) == 0 && prefix != "" {
		http.NotFound(w, r)
		return
	}
	var buf bytes.Buffer
	buf.WriteString("<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n")
	for _, n := range names {
		fmt.Fprintf(&buf, "<a href=\"%s\">%s</a>\n", (&url.URL{Path: n}).String(), html.EscapeString(n))
	}
	buf.WriteString("</pre>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away; nothing to do
}
