// Package gcsfake runs fake-gcs-server on loopback, in the test's own
// process, with its handler wrapped to count what it serves. The fetcher's
// tests point a GCS fetcher at URL; integration tests point the volfs
// binary, a subprocess, at Host through STORAGE_EMULATOR_HOST. It is
// imported by tests only.
package gcsfake

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Server is a running fake-gcs-server. Its counters are safe for
// concurrent use and count from Start.
type Server struct {
	Store *fakestorage.Server // the emulator, to create buckets and objects
	URL   string              // http://127.0.0.1:PORT
	Host  string              // 127.0.0.1:PORT, as STORAGE_EMULATOR_HOST wants it

	Lists    atomic.Int64 // object listing requests
	Others   atomic.Int64 // every request that is not a listing
	Served   atomic.Int64 // bytes of response bodies
	GzRanges atomic.Int64 // requests with a Range header for a gzip-encoded object

	gzPaths sync.Map // URL path of each gzip-encoded object ("/bucket/name") -> true
	drips   sync.Map // URL path of each object whose downloads drip -> true
}

// Drip makes every later download of the object send its body one byte a
// second, until the client goes: a server that stalls without failing.
func (s *Server) Drip(bucket, name string) { s.drips.Store("/"+bucket+"/"+name, true) }

// Options says what the server starts with.
type Options struct {
	// Objects are stored before the server starts.
	Objects []fakestorage.Object
	// Root, when set, is a directory for a file-backed store: the
	// in-memory one adds objects in time quadratic in their number, the
	// file-backed one syncs every object it writes (so put Root in
	// /dev/shm where there is one).
	Root string
}

// Start starts a server on a loopback port; it is closed when the test
// ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("gcsfake: %v", err)
	}
	// The XML API (the storage library's downloads) is routed by host: the
	// public host must be the address the client dials.
	store, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener: true, Scheme: "http", PublicHost: l.Addr().String(),
		InitialObjects: opts.Objects, StorageRoot: opts.Root,
	})
	if err != nil {
		l.Close()
		t.Fatalf("gcsfake: %v", err)
	}
	s := &Server{Store: store, Host: l.Addr().String()}
	for _, o := range opts.Objects {
		s.noteEncoding(o.BucketName, o.Name, o.ContentEncoding)
	}
	h := store.HTTPHandler()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/o") {
			s.Lists.Add(1)
		} else {
			s.Others.Add(1)
		}
		if _, gz := s.gzPaths.Load(r.URL.Path); gz && r.Header.Get("Range") != "" {
			s.GzRanges.Add(1)
		}
		var cw http.ResponseWriter = &countingWriter{ResponseWriter: w, n: &s.Served}
		if _, drip := s.drips.Load(r.URL.Path); drip && r.Method == http.MethodGet {
			cw = &dripWriter{ResponseWriter: cw, done: r.Context().Done()}
		}
		h.ServeHTTP(cw, r)
	}))
	hs.Listener.Close()
	hs.Listener = l
	hs.Start()
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Put stores an object, with Content-Encoding encoding ("" for none).
func (s *Server) Put(bucket, name string, data []byte, encoding string) {
	s.Store.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: name, ContentEncoding: encoding},
		Content:     data,
	})
	s.noteEncoding(bucket, name, encoding)
}

func (s *Server) noteEncoding(bucket, name, encoding string) {
	if encoding == "gzip" {
		s.gzPaths.Store("/"+bucket+"/"+name, true)
	}
}

// countingWriter adds the bytes of the body written through it to n.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// dripWriter sends what it is given one byte a second, until done.
type dripWriter struct {
	http.ResponseWriter
	done <-chan struct{}
}

func (w *dripWriter) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		w.Flush()
		select {
		case <-w.done:
			return i + 1, http.ErrHandlerTimeout
		case <-time.After(time.Second):
		}
	}
	return len(p), nil
}

func (w *dripWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}
