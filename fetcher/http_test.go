package fetcher

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newServer serves h and counts the requests it receives.
func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newHTTP(t *testing.T, base string, opts HTTPOptions) *HTTP {
	t.Helper()
	h, err := NewHTTP(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// statuses answers request i with codes[i], or the last code once they run
// out; a 200 carries the body "ok".
func statuses(codes ...int) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		code := codes[min(int(n.Add(1))-1, len(codes)-1)]
		w.WriteHeader(code)
		if code == http.StatusOK {
			w.Write([]byte("ok"))
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		name         string
		codes        []int
		want         error // nil, a sentinel, or errOther for an error wrapping none
		wantRequests int64
	}{
		{"200", []int{200}, nil, 1},
		{"503 twice then 200", []int{503, 503, 200}, nil, 3},
		{"429 then 200", []int{429, 200}, nil, 2},
		{"502 504 then 200", []int{502, 504, 200}, nil, 3},
		{"404", []int{404}, ErrNotExist, 1},
		{"410", []int{410}, ErrNotExist, 1},
		{"401", []int{401}, ErrPermission, 1},
		{"403", []int{403}, ErrPermission, 1},
		{"always 500", []int{500}, ErrTransient, 6},
		{"400", []int{400}, errOther, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := newServer(t, statuses(tc.codes...))
			h := newHTTP(t, srv.URL, fastRetries)
			obj, err := h.Get(context.Background(), "k", 1<<30)
			checkErr(t, err, tc.want)
			if err == nil && string(obj.Data) != "ok" {
				t.Errorf("got %q, want %q", obj.Data, "ok")
			}
			if err != nil && !strings.Contains(err.Error(), srv.URL+"/k") {
				t.Errorf("error %q does not name the URL", err)
			}
			if got := n.Load(); got != tc.wantRequests {
				t.Errorf("requests: got %v, want %v", got, tc.wantRequests)
			}
		})
	}
}

// errOther stands for an error that wraps no sentinel.
var errOther = errors.New("an error wrapping no sentinel")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	sentinels := []error{ErrNotExist, ErrPermission, ErrTransient, ErrInvalidKey, ErrNotSupported, context.Canceled}
	switch {
	case want == nil && err != nil:
		t.Errorf("got %v, want no error", err)
	case want == errOther && (err == nil || slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) })):
		t.Errorf("got %v, want an error wrapping no sentinel", err)
	case want != nil && want != errOther && !errors.Is(err, want):
		t.Errorf("got %v, want %v", err, want)
	}
}

func TestHTTPErrorMessage(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	h := newHTTP(t, srv.URL, HTTPOptions{MaxAttempts: 1})
	_, err := h.Get(context.Background(), "a b", 1<<30)
	want := "GET " + srv.URL + "/a%20b: 503 Service Unavailable: transient failure (gave up after 1 attempts)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %v", err, want)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	h := newHTTP(t, srv.URL, fastRetries)
	if _, err := h.Get(context.Background(), "k", 1<<30); !errors.Is(err, ErrTransient) {
		t.Errorf("got %v, want %v", err, ErrTransient)
	}
}

func TestHTTPInvalidKeySendsNothing(t *testing.T) {
	srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	h := newHTTP(t, srv.URL, fastRetries)
	ctx := context.Background()
	for _, key := range []string{"../x", "/abs", "a/../b", "a//b"} {
		h.Get(ctx, key, 1<<30)
		h.GetRange(ctx, key, 0, 1)
		h.Stat(ctx, key)
		h.List(ctx, key)
	}
	if got := n.Load(); got != 0 {
		t.Errorf("requests: got %v, want %v", got, 0)
	}
}

func TestHTTPTruncatedBody(t *testing.T) {
	body := seq(100)
	var attempts atomic.Int64
	srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		if attempts.Add(1) > 1 {
			w.Write(body)
			return
		}
		w.Write(body[:50])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	})
	h := newHTTP(t, srv.URL, fastRetries)
	obj, err := h.Get(context.Background(), "k", 1<<30)
	if err != nil || !bytes.Equal(obj.Data, body) {
		t.Errorf("got %d bytes, %v, want %d bytes", len(obj.Data), err, len(body))
	}
	if got := n.Load(); got != 2 {
		t.Errorf("requests: got %v, want %v", got, 2)
	}
}

func TestHTTPGzipPassthrough(t *testing.T) {
	plain := bytes.Repeat([]byte("volfs "), 1000)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(plain)
	zw.Close()
	var encodings sync.Map // method+" "+Range -> Accept-Encoding
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		encodings.Store(r.Method+" "+r.Header.Get("Range"), r.Header.Get("Accept-Encoding"))
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(zipped.Bytes())
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(plain))
	})
	h := newHTTP(t, srv.URL, fastRetries)
	ctx := context.Background()

	obj, err := h.Get(ctx, "k", 1<<30)
	if err != nil || obj.ContentEncoding != "gzip" || !bytes.Equal(obj.Data, zipped.Bytes()) {
		t.Errorf("Get: got %d bytes %q, %v, want %d bytes %q", len(obj.Data), obj.ContentEncoding, err, zipped.Len(), "gzip")
	}
	if got, _, err := h.GetRange(ctx, "k", 6, 5); err != nil || string(got) != "volfs" {
		t.Errorf("GetRange: got %q, %v, want %q", got, err, "volfs")
	}
	if got, _, err := h.Stat(ctx, "k"); err != nil || got != int64(len(plain)) {
		t.Errorf("Stat: got %v, %v, want %v", got, err, len(plain))
	}
	for req, want := range map[string]string{"GET ": "gzip", "GET bytes=6-10": "identity", "HEAD ": "identity"} {
		if got, _ := encodings.Load(req); got != want {
			t.Errorf("%s: Accept-Encoding: got %v, want %v", req, got, want)
		}
	}
}

func TestHTTPRangeEncodedIsError(t *testing.T) {
	srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Range", "bytes 0-1/10")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte("xx"))
	})
	h := newHTTP(t, srv.URL, fastRetries)
	_, _, err := h.GetRange(context.Background(), "k", 0, 2)
	checkErr(t, err, errOther)
	if got := n.Load(); got != 1 {
		t.Errorf("requests: got %v, want %v", got, 1)
	}
}

func TestHTTPRangeIgnored(t *testing.T) {
	data := seq(1000)
	for _, chunked := range []bool{false, true} {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush() // no Content-Length
			}
			w.Write(data)
		})
		h := newHTTP(t, srv.URL, fastRetries)
		for _, tc := range []struct {
			offset, length int64
			want           []byte
		}{
			{0, 10, data[:10]},
			{300, 200, data[300:500]},
			{990, 100, data[990:]},
			{0, 1 << 40, data},
			{1000, 10, []byte{}},
			{5000, 10, []byte{}},
		} {
			got, _, err := h.GetRange(context.Background(), "k", tc.offset, tc.length)
			if err != nil || !bytes.Equal(got, tc.want) || got == nil {
				t.Errorf("chunked %v, range %d+%d: got %d bytes, %v, want %d bytes",
					chunked, tc.offset, tc.length, len(got), err, len(tc.want))
			}
		}
	}
}

func TestHTTPStatFallback(t *testing.T) {
	for _, tc := range []struct {
		name         string
		handler      http.HandlerFunc
		want         int64
		wantErr      error
		wantRequests int64
	}{
		{"405 then 206", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "HEAD" {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			if r.Header.Get("Range") != "bytes=0-0" {
				t.Errorf("Range: got %q, want %q", r.Header.Get("Range"), "bytes=0-0")
			}
			w.Header().Set("Content-Range", "bytes 0-0/1234")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("x"))
		}, 1234, nil, 2},
		{"405 then 416 for an empty object", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "HEAD" {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Range", "bytes */0")
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		}, 0, nil, 2},
		{"405 then 206 with unknown total", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "HEAD" {
				w.WriteHeader(http.StatusMethodNotAllowed)
				return
			}
			w.Header().Set("Content-Range", "bytes 0-0/*")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("x"))
		}, 0, errOther, 2},
		{"HEAD 404", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
		}, 0, ErrNotExist, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := newServer(t, tc.handler)
			h := newHTTP(t, srv.URL, fastRetries)
			got, _, err := h.Stat(context.Background(), "k")
			checkErr(t, err, tc.wantErr)
			if err == nil && got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if got := n.Load(); got != tc.wantRequests {
				t.Errorf("requests: got %v, want %v", got, tc.wantRequests)
			}
		})
	}
}

func TestHTTPMaxObjectSize(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush()
			}
			w.Write(seq(100))
		})
		h := newHTTP(t, srv.URL, HTTPOptions{MaxObjectSize: 50})
		_, err := h.Get(context.Background(), "k", 1<<30)
		checkErr(t, err, errOther)
		if got := n.Load(); got != 1 {
			t.Errorf("chunked %v: requests: got %v, want %v", chunked, got, 1)
		}
	}
}

func TestHTTPCancelDuringBackoff(t *testing.T) {
	first := make(chan struct{}, 1)
	srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		// Honouring Retry-After is what keeps the fetcher waiting: the
		// exponential back-off from 1µs would exhaust the attempts at once.
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
		select {
		case first <- struct{}{}:
		default:
		}
	})
	h := newHTTP(t, srv.URL, HTTPOptions{BaseBackoff: time.Microsecond, MaxBackoff: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-first
		cancel()
	}()
	start := time.Now()
	_, err := h.Get(ctx, "k", 1<<30)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTransient) {
		t.Errorf("got %v, want %v", err, context.Canceled)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("returned after %v, want at once", d)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("requests: got %v, want %v", got, 1)
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	const conns = 8
	body := seq(64 << 10)
	// The first conns requests wait for each other, so that the session
	// surely opens all its connections before the steady state is measured.
	var arrived atomic.Int64
	full := make(chan struct{})
	var accepted atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == conns {
			close(full)
		}
		<-full
		if r.URL.Path == "/missing" {
			http.Error(w, strings.Repeat("not found ", 1000), http.StatusNotFound)
			return
		}
		w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	h := newHTTP(t, srv.URL, HTTPOptions{Conns: conns})
	ctx := context.Background()

	// round makes n Gets on workers goroutines, every third of a missing
	// object, whose error body must be drained for its connection to be reused.
	round := func(n, workers int) {
		t.Helper()
		jobs := make(chan int, n)
		for i := range n {
			jobs <- i
		}
		close(jobs)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range jobs {
					key, wantErr := "k", error(nil)
					if i%3 == 2 {
						key, wantErr = "missing", ErrNotExist
					}
					obj, err := h.Get(ctx, key, 1<<30)
					if !errors.Is(err, wantErr) || err == nil && len(obj.Data) != len(body) {
						t.Errorf("Get(%q): got %d bytes, %v, want %v", key, len(obj.Data), err, wantErr)
					}
				}
			})
		}
		wg.Wait()
	}

	round(50, conns)
	round(50, 1)
	if got := h.Dials(); got != conns {
		t.Errorf("dials: got %v, want %v", got, conns)
	}
	if got := accepted.Load(); got != conns {
		t.Errorf("server connections: got %v, want %v", got, conns)
	}
	before := h.Dials()
	round(50, conns)
	round(50, 1)
	if got := h.Dials() - before; got != 0 {
		t.Errorf("dials in steady state: got %v, want %v", got, 0)
	}
}

func TestHTTPSharedSession(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	other, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	a := newHTTP(t, srv.URL+"/vol/a", HTTPOptions{})
	b := newHTTP(t, srv.URL+"/vol/b/", HTTPOptions{Conns: 64})
	c := newHTTP(t, other.URL, HTTPOptions{})
	if a.sess != b.sess || a.client.Transport != b.client.Transport {
		t.Errorf("two fetchers of one host have two sessions")
	}
	if a.sess == c.sess {
		t.Errorf("fetchers of two hosts share a session")
	}
	if newHTTP(t, "http://Example.ORG/x", HTTPOptions{}).sess != newHTTP(t, "http://example.org:80/y", HTTPOptions{}).sess {
		t.Errorf("one host spelled two ways has two sessions")
	}

	tr := a.client.Transport.(*http.Transport)
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"MaxConnsPerHost", tr.MaxConnsPerHost, 16},
		{"MaxIdleConnsPerHost", tr.MaxIdleConnsPerHost, 16},
		{"ForceAttemptHTTP2", tr.ForceAttemptHTTP2, false},
		{"TLSNextProto is an empty non-nil map", tr.TLSNextProto != nil && len(tr.TLSNextProto) == 0, true},
		{"DisableCompression", tr.DisableCompression, true},
		// The attempt's watchdog bounds the headers with StallTimeout.
		{"ResponseHeaderTimeout", tr.ResponseHeaderTimeout, time.Duration(0)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestHTTPURL(t *testing.T) {
	var got atomic.Value
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { got.Store(r.RequestURI) })
	for _, tc := range []struct {
		base, key, want string
	}{
		{"", "k", "/k"},
		{"/", "a/b", "/a/b"},
		{"/vol", "a/b", "/vol/a/b"},
		{"/vol/", "a/b", "/vol/a/b"},
		{"/v%20l", "a b/c?d#e%f", "/v%20l/a%20b/c%3Fd%23e%25f"},
	} {
		h := newHTTP(t, srv.URL+tc.base, fastRetries)
		h.Get(context.Background(), tc.key, 1<<30)
		if got.Load() != tc.want {
			t.Errorf("base %q, key %q: got %v, want %v", tc.base, tc.key, got.Load(), tc.want)
		}
	}
}

func TestNewHTTP(t *testing.T) {
	for _, tc := range []struct {
		base, want string // want "" for an error
	}{
		{"http://h", "http://h"},
		{"https://h/vol/", "https://h/vol"},
		{"https://user:secret@h/vol", "https://user:xxxxx@h/vol"},
		{"ftp://h/vol", ""},
		{"http:///vol", ""},
		{"http://h/vol?sig=1", ""},
		{"http://h/vol#x", ""},
	} {
		h, err := NewHTTP(tc.base, HTTPOptions{})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("NewHTTP(%q): got %v, want an error", tc.base, h)
		case tc.want != "" && (err != nil || h.String() != tc.want):
			t.Errorf("NewHTTP(%q): got %v, %v, want %v", tc.base, h, err, tc.want)
		}
	}
}

func TestParseIndex(t *testing.T) {
	const page = `<html><head><title>Index of /vol/dir/</title></head><body>
<h1>Index of /vol/dir/</h1><hr><pre>
<a href="?C=N;O=D">Name</a> <a href="?C=M;O=A">Last modified</a>
<a href="../">../</a>
<a href="/vol/">Parent Directory</a>
<a href="0-64_0-64/">0-64_0-64/</a>    01-Jan-2024 00:00    -
<a href="info">info</a>  01-Jan-2024 00:00  123
<A HREF="upper">upper</A>
<a href="info">info again</a>
<a href="sp%20ace">sp ace</a>
<a href="a&amp;b">a&amp;b</a>
<a href="./dot">dot</a>
<a href="http://h/vol/dir/abs">same host, absolute</a>
<a href="//h/vol/dir/netpath/">network path</a>
<a href="http://other/vol/dir/x">other host</a>
<a href="sub/deeper">deeper</a>
<a href="%2Fslash">slash</a>
<a href="#top">anchor</a>
<a href="x#frag">with fragment</a>
<a href="javascript:void(0)">script</a>
<a name="noref">no href</a>
<a href="..">dotdot</a>
</pre><hr></body></html>`
	dir, _ := url.Parse("http://h/vol/dir/")
	entries, err := parseIndex(strings.NewReader(page), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Name: "0-64_0-64", IsDir: true, Size: -1},
		{Name: "info", Size: -1},
		{Name: "upper", Size: -1},
		{Name: "sp ace", Size: -1},
		{Name: "a&b", Size: -1},
		{Name: "dot", Size: -1},
		{Name: "abs", Size: -1},
		{Name: "netpath", IsDir: true, Size: -1},
	}
	if !slices.Equal(entries, want) {
		t.Errorf("got %v, want %v", entries, want)
	}
}

func TestHTTPListNotSupported(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    error
	}{
		{"404", http.NotFound, ErrNotSupported},
		{"not html", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		}, ErrNotSupported},
		{"403", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(403) }, ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newServer(t, tc.handler)
			_, err := newHTTP(t, srv.URL, fastRetries).List(context.Background(), "dir")
			checkErr(t, err, tc.want)
		})
	}
}

// TestHTTPListHugeIndex checks that a directory index past the bounds of
// a listing (more than S3MaxListEntries links; one tag of 4 MiB) is
// refused with ErrTooLarge, once, rather than held (on 0d63a2d an index
// of up to --max-object-size, 2 GiB, was parsed whole: every link an
// entry, a tag of any size buffered).
func TestHTTPListHugeIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(w *bufio.Writer)
	}{
		{"many links", func(w *bufio.Writer) {
			for i := range S3MaxListEntries + 10 {
				fmt.Fprintf(w, "<a href=\"%x\">x</a>\n", i)
			}
		}},
		{"huge tag", func(w *bufio.Writer) {
			w.WriteString(`<a href="`)
			w.WriteString(strings.Repeat("x", 4<<20))
			w.WriteString(`">x</a>`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int64
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.Header().Set("Content-Type", "text/html")
				bw := bufio.NewWriter(w)
				tc.body(bw)
				bw.Flush()
			})
			entries, err := newHTTP(t, srv.URL, fastRetries).List(context.Background(), "dir")
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("got %d entries, error %v; want %v", len(entries), err, ErrTooLarge)
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("the index was asked for %d times, want once", n)
			}
		})
	}
}

func TestHTTPRedirects(t *testing.T) {
	for _, tc := range []struct {
		name         string
		handler      http.HandlerFunc
		want         error
		wantRequests int64
	}{
		{"followed", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/k" {
				http.Redirect(w, r, "/elsewhere/k", http.StatusFound)
				return
			}
			w.Write([]byte("ok"))
		}, nil, 2},
		{"to a directory", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/k/", http.StatusMovedPermanently)
		}, ErrNotExist, 1},
		{"loop", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
		}, errOther, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := newServer(t, tc.handler)
			_, err := newHTTP(t, srv.URL, fastRetries).Get(context.Background(), "k", 1<<30)
			checkErr(t, err, tc.want)
			if got := n.Load(); got != tc.wantRequests {
				t.Errorf("requests: got %v, want %v", got, tc.wantRequests)
			}
		})
	}
}

// TestHTTPStalledBody: a server that stops sending mid-body is abandoned
// after StallTimeout, retried, then reported as transient; one that sends
// slowly but steadily is read to the end.
func TestHTTPStalledBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stalled, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write(seq(50))
		w.(http.Flusher).Flush()
		<-release
	})
	opts := fastRetries
	opts.MaxAttempts, opts.StallTimeout = 2, 50*time.Millisecond
	opts.MinRate = 10 // a deadline of 10s: the stall must end the attempt first
	_, err := newHTTP(t, stalled.URL, opts).Get(context.Background(), "k", 1<<30)
	checkErr(t, err, ErrTransient)
	if err == nil || !strings.Contains(err.Error(), "no progress") {
		t.Errorf("got %v, want it to say the attempt made no progress", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("requests: got %v, want %v", got, 2)
	}

	slow, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		for i := range 10 {
			w.Write([]byte{byte(i)})
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	})
	opts.StallTimeout = 100 * time.Millisecond // less than the whole body takes
	opts.MinRate = 5                           // the deadline is 100ms + 2s
	obj, err := newHTTP(t, slow.URL, opts).Get(context.Background(), "k", 1<<30)
	if err != nil || len(obj.Data) != 10 {
		t.Errorf("slow body: got %d bytes, %v, want 10 bytes", len(obj.Data), err)
	}
}

// TestHTTPRedirectOrigin: a redirect to another port, host or scheme is
// refused with ErrPermission and one log line per target, without a
// request to the target; FollowRedirects follows it.
func TestHTTPRedirectOrigin(t *testing.T) {
	target, hits := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("elsewhere")) })
	src, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
	})
	var logs bytes.Buffer
	opts := fastRetries
	opts.Log = slog.New(slog.NewTextHandler(&logs, nil))
	h := newHTTP(t, src.URL, opts)
	for _, key := range []string{"a", "b"} {
		_, err := h.Get(context.Background(), key, 1<<30)
		checkErr(t, err, ErrPermission)
		if err == nil || !strings.Contains(err.Error(), target.URL) {
			t.Errorf("error %v does not name the target %s", err, target.URL)
		}
	}
	if got := hits.Load(); got != 0 {
		t.Errorf("requests to the target: got %v, want %v", got, 0)
	}
	if got := strings.Count(logs.String(), "refused a redirect"); got != 1 {
		t.Errorf("log lines about the refusal: got %v, want %v:\n%s", got, 1, logs.String())
	}

	opts.FollowRedirects = true
	obj, err := newHTTP(t, src.URL, opts).Get(context.Background(), "a", 1<<30)
	if err != nil || string(obj.Data) != "elsewhere" {
		t.Errorf("with FollowRedirects: got %q, %v, want %q", obj.Data, err, "elsewhere")
	}
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"http://Example.org/x", "http://example.org:80/y"},
		{"https://example.org/x", "https://example.org:443/"},
		{"http://[::1]:8080/", "http://[::1]:8080/z"},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if origin(a) != origin(b) {
			t.Errorf("origin(%s) = %s, origin(%s) = %s, want equal", tc.a, origin(a), tc.b, origin(b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"http://example.org/", "https://example.org/"},
		{"http://example.org/", "http://example.org:8080/"},
		{"http://example.org/", "http://example.com/"},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if origin(a) == origin(b) {
			t.Errorf("origin(%s) = origin(%s) = %s, want different", tc.a, tc.b, origin(a))
		}
	}
}

// drip writes one byte every 10 ms until release is closed or the client
// goes: a body that never stalls but never ends in time.
func drip(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
	for {
		if _, err := w.Write([]byte{1}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-release:
			return
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestHTTPDrip: a server that sends a byte every few milliseconds never
// stalls, but misses the deadline of StallTimeout plus the body at
// MinRate, with or without a Content-Length; each attempt is abandoned,
// retried, then reported as transient.
func TestHTTPDrip(t *testing.T) {
	for _, tc := range []struct {
		name          string
		contentLength string
	}{
		{"with Content-Length", "100"},
		{"endless, no Content-Length", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.contentLength != "" {
					w.Header().Set("Content-Length", tc.contentLength)
				}
				drip(w, r, release)
			})
			opts := fastRetries
			// A 100-byte body may take 250ms + 100ms; the drip takes 1s.
			// The stall timeout is 25 times the drip's pace, so that a
			// loaded machine does not take the drip for a stall.
			opts.MaxAttempts, opts.StallTimeout, opts.MinRate = 2, 250*time.Millisecond, 1000
			_, err := newHTTP(t, srv.URL, opts).Get(context.Background(), "k", 100)
			checkErr(t, err, ErrTransient)
			if err == nil || !strings.Contains(err.Error(), "too slow") {
				t.Errorf("got %v, want it to say the attempt was too slow", err)
			}
			if got := n.Load(); got != 2 {
				t.Errorf("requests: got %v, want %v", got, 2)
			}
		})
	}
}

// TestHTTPHeaderStall: a server that never sends headers is abandoned after
// the fetcher's StallTimeout, whatever the other fetchers of its host use.
func TestHTTPHeaderStall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, n := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	opts := fastRetries
	opts.MaxAttempts, opts.StallTimeout = 2, 50*time.Millisecond
	_, err := newHTTP(t, srv.URL, opts).Get(context.Background(), "k", 1<<30)
	checkErr(t, err, ErrTransient)
	if err == nil || !strings.Contains(err.Error(), "no progress") {
		t.Errorf("got %v, want it to say the attempt made no progress", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("requests: got %v, want %v", got, 2)
	}
}

func TestAttemptBound(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want time.Duration
	}{
		{0, time.Second},
		{1 << 20, 2 * time.Second},
		{10 << 20, 11 * time.Second},
		{math.MaxInt64, maxAttemptBound},
	} {
		if got := attemptBound(time.Second, 1<<20, tc.n); got != tc.want {
			t.Errorf("attemptBound(%d): got %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestHTTPRangeIgnoredEndless: a server that answers every Range request
// with a 200 and an endless body is read no further than the range's end
// (plus what drain reads to keep the connection); a range that starts past
// MaxRangeSkip is refused at once, having read nothing of the body.
//
// What the client takes off its connection is counted below the
// transport, and bounded by the range's end, drain's 256 KiB and the
// transport's 4 KiB read buffer with chunk framing. What the server wrote
// before the client left also lies in the kernel's socket buffers, which
// Linux grows under load (here up to tcp_rmem's 32 MiB): both ends pin
// theirs, so that this bound does not depend on the machine's load.
func TestHTTPRangeIgnoredEndless(t *testing.T) {
	const sockBuf = 256 << 10 // asked of each end; the kernel doubles it
	block := seq(1 << 16)
	var sent atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			n, err := w.Write(block)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if err := c.(*net.TCPConn).SetWriteBuffer(sockBuf); err != nil {
			t.Error(err)
		}
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	h := newHTTP(t, srv.URL, fastRetries)
	var read atomic.Int64 // bytes the client took off its connections
	var dialer net.Dialer
	h.sess.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := c.(*net.TCPConn).SetReadBuffer(sockBuf); err != nil {
			t.Error(err)
		}
		return &readCountingConn{Conn: c, n: &read}, nil
	}
	for _, tc := range []struct {
		name           string
		offset, length int64
		wantErr        error
	}{
		{"at the start", 0, 100, nil},
		{"4 MiB in", 4<<20 + 7, 1000, nil},
		{"just within MaxRangeSkip", MaxRangeSkip, 10, nil},
		{"past MaxRangeSkip", MaxRangeSkip + 1, 10, ErrNotSupported},
		{"1 TiB in", 1 << 40, 10, ErrNotSupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent.Store(0)
			read.Store(0)
			got, _, err := h.GetRange(context.Background(), "k", tc.offset, tc.length)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr == nil {
				want := make([]byte, tc.length)
				for i := range want {
					want[i] = block[(tc.offset+int64(i))%int64(len(block))]
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got %d bytes, not the range's", len(got))
				}
			}
			srv.CloseClientConnections()
			// Read: the bytes up to the range's end, drain's (a refusal
			// drains too, to keep the connection), the headers, the
			// transport's read buffer and the chunk headers (a few
			// bytes every 4 KiB at most).
			most := int64(drainLimit)
			if tc.wantErr == nil {
				most += tc.offset + tc.length
			}
			most += 4<<10 + 1<<10 + most/(4<<10)*16
			t.Logf("client read %d bytes, server sent %d", read.Load(), sent.Load())
			if r := read.Load(); r > most {
				t.Errorf("client read %d bytes, want at most %d", r, most)
			}
			// Sent: what the client read, the two socket buffers (twice
			// sockBuf each, and a sockBuf for the kernel's accounting),
			// the server's write buffers and the block being written.
			if s, most := sent.Load(), read.Load()+5*sockBuf+8<<10+int64(len(block)); s > most {
				t.Errorf("server sent %d bytes, want at most %d (client read %d)", s, most, read.Load())
			}
		})
	}
}

// readCountingConn adds to n the bytes read from its connection.
type readCountingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *readCountingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestHTTPRangeDeadline: the deadline of a ranged attempt comes from the
// bytes the reply must carry, the range's length (or offset plus length
// for a reply that ignores Range), not from the object limit.
func TestHTTPRangeDeadline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		offset    int64
		wantBound string
	}{
		{"206 without Content-Length", http.StatusPartialContent, 1 << 30, "not done within 1.5s"},
		{"200 without Content-Length", http.StatusOK, 1 << 20, "not done within 2.5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.status == http.StatusPartialContent {
					w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", tc.offset, tc.offset+1<<20-1))
				}
				w.WriteHeader(tc.status)
				drip(w, r, release)
			})
			opts := fastRetries
			// 1 MiB at 1 MiB/s after a 500 ms stall timeout (50 times the
			// drip's pace, for a loaded machine): 1.5 s; a 200 also
			// carries the 1 MiB before the range.
			opts.MaxAttempts, opts.StallTimeout, opts.MinRate = 1, 500*time.Millisecond, 1<<20
			_, _, err := newHTTP(t, srv.URL, opts).GetRange(context.Background(), "k", tc.offset, 1<<20)
			checkErr(t, err, ErrTransient)
			if err == nil || !strings.Contains(err.Error(), tc.wantBound) {
				t.Errorf("got %v, want it to say %q", err, tc.wantBound)
			}
		})
	}
}

// TestHTTPStream: Stream returns the object's bytes from an offset from a
// server that honours Range and from one that ignores it, an empty stream
// from an offset past the end, and refuses an encoded reply and a
// Range-ignoring one that would have to be read past MaxRangeSkip.
func TestHTTPStream(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	for _, tc := range []struct {
		name        string
		ignoreRange bool
		encoding    string
		offset      int64
		want        string
		wantErr     string // "": no error
		wantIs      error
	}{
		{"206", false, "", 5, "56789abcdefghij", "", nil},
		{"206 from 0", false, "", 0, string(data), "", nil},
		{"416 past the end", false, "", 30, "", "", nil},
		{"200 skipped to the offset", true, "", 5, "56789abcdefghij", "", nil},
		{"200 past the end", true, "", 30, "", "", nil},
		{"200 beyond MaxRangeSkip", true, "", MaxRangeSkip + 1, "", "ignores Range", ErrNotSupported},
		{"gzip reply", true, "gzip", 0, "", "Content-Encoding", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.encoding != "" {
					w.Header().Set("Content-Encoding", tc.encoding)
				}
				if tc.ignoreRange {
					w.Write(data)
					return
				}
				http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
			})
			rc, err := newHTTP(t, srv.URL, fastRetries).Stream(context.Background(), "k", tc.offset)
			if tc.wantErr != "" {
				if err == nil {
					rc.Close()
					t.Fatalf("got a stream, want an error saying %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("got %v, want an error saying %q (wrapping %v)", err, tc.wantErr, tc.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil || string(got) != tc.want {
				t.Errorf("got %q, %v, want %q", got, err, tc.want)
			}
		})
	}
}

// TestHTTPStreamPinned: a stream pinned to a version (WithVersion) is
// refused with ErrChanged when the reply is of another one, from a server
// that honours Range and from one that ignores it, and served when it is
// the pinned one.
func TestHTTPStreamPinned(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	for _, ignore := range []bool{false, true} {
		srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"v2"`)
			if ignore {
				w.Write(data)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		})
		h := newHTTP(t, srv.URL, fastRetries)
		if rc, err := h.Stream(WithVersion(context.Background(), "k", `etag:"v1"`), "k", 5); !errors.Is(err, ErrChanged) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("ignore Range %v: a stream of v2 pinned to v1: %v, want ErrChanged", ignore, err)
		}
		rc, err := h.Stream(WithVersion(context.Background(), "k", `etag:"v2"`), "k", 5)
		if err != nil {
			t.Fatalf("ignore Range %v: a stream of the pinned version: %v", ignore, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "56789abcdefghij" {
			t.Errorf("ignore Range %v: got %q, %v", ignore, got, err)
		}
	}
}

// TestHTTPRangeLies checks that a ranged reply is checked against the range
// asked for and the object's size: a server that answers with fewer bytes
// than the range (Content-Range claiming all of it), more bytes, another
// range, or a whole object that promises more bytes than it sends, is
// retried and then refused with ErrTransient, never served as a short or
// wrong read.
func TestHTTPRangeLies(t *testing.T) {
	obj := seq(10_000)
	const off, n = 1000, 500
	for _, tc := range []struct {
		name   string
		status int    // 206 or 200
		crange string // Content-Range, if any
		length string // Content-Length; "" for none (the body is flushed first)
		lo, hi int    // the body: obj[lo:hi]
	}{
		{"short body, whole range claimed", 206, "bytes 1000-1499/10000", "300", off, off + 300},
		{"short range, not at the end", 206, "bytes 1000-1299/10000", "300", off, off + 300},
		{"extra bytes", 206, "bytes 1000-1499/10000", "700", off, off + 700},
		{"extra bytes, no length", 206, "bytes 1000-1499/10000", "", off, off + 700},
		{"another range", 206, "bytes 2000-2499/10000", "500", 2000, 2500},
		{"a range that starts right but ends elsewhere", 206, "bytes 1000-1999/10000", "1000", off, 2000},
		{"range past the end it declares", 206, "bytes 1000-1499/1200", "500", off, off + 500},
		{"whole object promising more", 200, "", "10000", 0, 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, reqs := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.crange != "" {
					w.Header().Set("Content-Range", tc.crange)
				}
				if tc.length != "" {
					w.Header().Set("Content-Length", tc.length)
				}
				w.WriteHeader(tc.status)
				if tc.length == "" {
					w.(http.Flusher).Flush()
				}
				w.Write(obj[tc.lo:tc.hi])
			})
			h := newHTTP(t, srv.URL, fastRetries)
			got, _, err := h.GetRange(context.Background(), "k", off, n)
			if !errors.Is(err, ErrTransient) {
				t.Errorf("got %d bytes, %v; want %v", len(got), err, ErrTransient)
			}
			if r := reqs.Load(); r < 2 {
				t.Errorf("%d requests, want the lie retried", r)
			}
		})
	}
	// The honest short range at the object's end is served.
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 1000-1199/1200")
		w.Header().Set("Content-Length", "200")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(obj[off:1200])
	})
	got, _, err := newHTTP(t, srv.URL, fastRetries).GetRange(context.Background(), "k", off, n)
	if err != nil || !bytes.Equal(got, obj[off:1200]) {
		t.Errorf("range at the end: got %d bytes, %v; want 200", len(got), err)
	}
}
