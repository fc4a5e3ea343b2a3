package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/volfs/volfs/serve"
)

// hostAddr is the host:port of a served URL.
func (s *served) hostAddr() string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s.url, "https://"), "http://"), "/")
}

// dialFrom connects to addr from the loopback address 127.0.0.from, so that
// a test can play many clients (the server bounds each client address).
// rcvbuf, when not 0, is the socket's receive buffer, set before the
// connection is made so that the window offered stays small.
func dialFrom(t *testing.T, from int, addr string, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(from))}, Timeout: 10 * time.Second}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
		}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// timedCurl runs curl for url and returns the status and how long the
// answer took; a request still unanswered after limit is status 0.
func timedCurl(t *testing.T, limit time.Duration, args ...string) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	out, _ := exec.Command("curl", append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", fmt.Sprint(limit.Seconds())}, args...)...).Output()
	var code int
	fmt.Sscan(string(out), &code)
	return code, time.Since(start)
}

// TestServeCORS: by default no page of another origin reads the server,
// and a loopback server without credentials refuses a request from one
// outright; --cors-origin lets the origins named read it (their origin
// echoed, with Vary: Origin), and no other.
func TestServeCORS(t *testing.T) {
	requireTool(t, "curl")
	vol, _ := writeVolume(t)
	const ng, evil = "https://neuroglancer-demo.appspot.com", "https://evil.example"

	s := startServe(t, vol)
	if r := curl(t, s.url+"info"); r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET /info without Origin: %d, Access-Control-Allow-Origin %q; want 200 and none", r.code, r.header.Get("Access-Control-Allow-Origin"))
	}
	for _, origin := range []string{evil, ng, "null"} {
		if r := curl(t, "-H", "Origin: "+origin, s.url+"info"); r.code != 403 || bytes.Contains(r.body, []byte(`"raw"`)) || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET /info from a page of %s without --cors-origin: %d %q; want 403", origin, r.code, r.body)
		}
		if r := curl(t, "-X", "OPTIONS", "-H", "Origin: "+origin, "-H", "Access-Control-Request-Method: GET", s.url+"info"); r.code == 204 || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s without --cors-origin: %d %v; want a refusal", origin, r.code, r.header)
		}
	}
	// A page of the server's own origin is no stranger.
	if r := curl(t, "-H", "Origin: "+strings.TrimSuffix(s.url, "/"), s.url+"info"); r.code != 200 {
		t.Errorf("GET /info from the server's own origin: %d, want 200", r.code)
	}

	s = startServe(t, "--cors-origin", ng, vol)
	r := curl(t, "-H", "Origin: "+ng, s.url+"info")
	if r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != ng || !slices.Contains(r.header.Values("Vary"), "Origin") ||
		!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Content-Range") {
		t.Errorf("GET /info from %s with --cors-origin: %d %v; want 200, its origin echoed, Vary: Origin", ng, r.code, r.header)
	}
	if r := curl(t, "-X", "OPTIONS", "-H", "Origin: "+ng, "-H", "Access-Control-Request-Method: GET", "-H", "Access-Control-Request-Headers: range", s.url+"s0/info"); r.code != 204 ||
		r.header.Get("Access-Control-Allow-Origin") != ng || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Range") {
		t.Errorf("preflight from %s: %d %v", ng, r.code, r.header)
	}
	if r := curl(t, "-H", "Origin: "+evil, s.url+"info"); r.code != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET /info from %s with only %s allowed: %d %v; want 403", evil, ng, r.code, r.header)
	}
	if r := curl(t, s.url+"info"); r.code != 200 || r.header.Get("Access-Control-Allow-Origin") != "" || !slices.Contains(r.header.Values("Vary"), "Origin") {
		t.Errorf("GET /info without Origin, --cors-origin set: %d %v; want 200, no Allow-Origin, Vary: Origin", r.code, r.header)
	}
	for _, bad := range []string{"https://x.example/path", "x.example", "ftp://x.example"} {
		out, err := exec.Command(volfsBin, "serve", "--cors-origin", bad, vol).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--cors-origin") {
			t.Errorf("serve --cors-origin %s: %v\n%s; want a refusal naming --cors-origin", bad, err, out)
		}
	}
}

// TestServeAuthTiming: with --auth-file, a request for a user that does
// not exist is refused in the time a known user's wrong password takes,
// so that refusals do not tell which users exist.
func TestServeAuthTiming(t *testing.T) {
	vol, _ := writeVolume(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, htpasswd, []byte("ann:"+string(hash)+"\n"))
	s := startServe(t, "--auth-file", htpasswd, vol)
	client := &http.Client{Timeout: 10 * time.Second}
	refusal := func(user string) time.Duration {
		req, _ := http.NewRequest("GET", s.url+"info", nil)
		req.SetBasicAuth(user, "wrong")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("GET /info as %s with a wrong password: %d, want 401", user, resp.StatusCode)
		}
		return time.Since(start)
	}
	var unknown, known []time.Duration
	for i := range 15 {
		unknown = append(unknown, refusal(fmt.Sprintf("eve%d", i)))
		known = append(known, refusal("ann"))
	}
	slices.Sort(unknown)
	slices.Sort(known)
	mu, mk := unknown[len(unknown)/2], known[len(known)/2]
	t.Logf("median refusal: unknown user %v, known user with a wrong password %v", mu, mk)
	if ratio := float64(mu) / float64(mk); ratio < 0.5 || ratio > 2 {
		t.Errorf("median refusal of an unknown user %v, of a known one %v: ratio %.2f, want within 0.5-2", mu, mk, ratio)
	}
}

// TestServePropfindHuge: PROPFIND Depth: 1 of a key directory of 200 000
// chunks is written as it is listed: every entry arrives, in bounded time
// and memory. The share offers no lock (DAV class 1, read-only).
func TestServePropfindHuge(t *testing.T) {
	src := t.TempDir()
	const n = 200_000
	writeFile(t, filepath.Join(src, "info"), []byte(fmt.Sprintf(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [%d, 1, 1], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[1, 1, 1]], "encoding": "raw"}]}`, n)))
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--webdav", "--cache-size", "16MiB", src)
	before := peakRSS(t, s.cmd.Process.Pid)
	propfind := func(depth, p, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest("PROPFIND", s.url+p, strings.NewReader(body))
		req.Header.Set("Depth", depth)
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	start := time.Now()
	resp, body := propfind("1", "s0/", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getcontentlength/><D:resourcetype/><D:getetag/></D:prop></D:propfind>`)
	took := time.Since(start)
	peak := peakRSS(t, s.cmd.Process.Pid)
	entries := bytes.Count(body, []byte("<D:response>"))
	t.Logf("PROPFIND Depth 1 of %d chunks: %d entries, %d bytes in %v; peak resident %d MiB (%d MiB before)", n, entries, len(body), took, peak>>20, before>>20)
	if resp.StatusCode != 207 || entries < n+1 || !bytes.Contains(body, []byte("<D:href>/s0/199999-200000_0-1_0-1</D:href>")) {
		t.Errorf("PROPFIND Depth 1 of s0: %d with %d entries, want 207 with at least %d and the last chunk", resp.StatusCode, entries, n+1)
	}
	if took > 30*time.Second {
		t.Errorf("PROPFIND Depth 1 of %d chunks took %v, want under 30 s", n, took)
	}
	checkRSS(t, peak)
	// Gathered in memory, the listing cost 46 MiB more here (404 MiB for
	// another layout); written as listed, less than 20.
	if grew := peak - before; grew > 32<<20 {
		t.Errorf("PROPFIND Depth 1 of %d chunks raised the peak by %d MiB, want under 32 MiB", n, grew>>20)
	}

	resp, body = propfind("0", "", "")
	if resp.StatusCode != 207 || resp.Header.Get("DAV") != "" && resp.Header.Get("DAV") != "1" ||
		bytes.Contains(body, []byte("lockdiscovery")) || bytes.Contains(body, []byte("supportedlock")) || !bytes.Contains(body, []byte("<D:collection/>")) {
		t.Errorf("PROPFIND Depth 0 of the root: %d DAV %q\n%s\nwant 207, a collection, no lock properties", resp.StatusCode, resp.Header.Get("DAV"), body)
	}
	resp, body = propfind("0", "info", `<D:propfind xmlns:D="DAV:"><D:prop><D:supportedlock/><D:getcontentlength/></D:prop></D:propfind>`)
	if resp.StatusCode != 207 || !bytes.Contains(body, []byte("HTTP/1.1 404 Not Found")) || !bytes.Contains(body, []byte("<D:getcontentlength>")) {
		t.Errorf("PROPFIND of info asking for supportedlock: %d\n%s\nwant it 404 and the length 200", resp.StatusCode, body)
	}
}

// TestServeSlowFloods: 80 clients dripping their PROPFIND bodies a byte
// every 2 s and 72 clients downloading volume.raw slowly but steadily hold
// connections, never the tree's read slots: small honest requests are
// answered within 2 s meanwhile, in bounded memory.
func TestServeSlowFloods(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 64, nil) // a volume.raw of 8 MiB
	s := startServe(t, "--webdav", "--cache-size", "16MiB", src)
	addr := s.hostAddr()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	// The flooders come from 127.0.0.2-11, the honest client from
	// 127.0.0.1: the server's per-address bounds are not what is tested.
	var started sync.WaitGroup
	for i := range 72 {
		c := dialFrom(t, 2+i%10, addr, 4096)
		fmt.Fprintf(c, "GET /s0/volume.raw HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16<<10)
			first := true
			for {
				c.SetReadDeadline(time.Now().Add(time.Minute))
				if _, err := c.Read(buf); err != nil {
					if first {
						started.Done()
					}
					return
				}
				if first {
					first = false
					started.Done()
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	started.Wait()
	for i := range 80 {
		c := dialFrom(t, 2+i%10, addr, 0)
		fmt.Fprintf(c, "PROPFIND /s0/ HTTP/1.1\r\nHost: 127.0.0.1\r\nDepth: 1\r\nContent-Length: 100\r\n\r\n<")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Second):
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	for _, p := range []string{"info", keys[5], "s0/"} {
		code, took := timedCurl(t, 20*time.Second, s.url+p)
		t.Logf("GET /%s under the floods: %d in %v", p, code, took)
		if code != 200 || took > 2*time.Second {
			t.Errorf("GET /%s under 80 dripping PROPFINDs and 72 slow downloads: %d in %v, want 200 within 2 s", p, code, took)
		}
	}
	if r := curl(t, "--max-time", "20", s.url+keys[7]); r.code != 200 || !bytes.Equal(r.body, chunks[7]) {
		t.Errorf("GET /%s under the floods: %d, %d bytes, want its %d", keys[7], r.code, len(r.body), len(chunks[7]))
	}
	checkRSS(t, peakRSS(t, s.cmd.Process.Pid))
}

// TestServeIdleFlood: 530 idle keep-alive connections and 100 half-sent
// request headers, more than the server keeps open at once, do not keep
// an honest request out: idle and dripping connections give way to it.
// A single address cannot take more than its share either.
func TestServeIdleFlood(t *testing.T) {
	requireTool(t, "curl")
	vol, _ := writeVolume(t)
	s := startServe(t, vol)
	addr := s.hostAddr()
	var wg sync.WaitGroup
	for i := range 530 {
		c := dialFrom(t, 2+i%10, addr, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(c, "GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
			}
		}()
	}
	wg.Wait()
	for i := range 100 {
		c := dialFrom(t, 2+i%10, addr, 0)
		fmt.Fprintf(c, "GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
	time.Sleep(2 * time.Second) // past the grace of a newcomer
	for range 3 {
		code, took := timedCurl(t, 20*time.Second, s.url+"info")
		t.Logf("GET /info under 530 idle and 100 half-sent connections: %d in %v", code, took)
		if code != 200 || took > 2*time.Second {
			t.Errorf("GET /info under 530 idle and 100 half-sent connections: %d in %v, want 200 within 2 s", code, took)
		}
	}
	// One address holding its share of requests in progress cannot take
	// the rest: its next connection is closed, not queued.
	for range 80 {
		c := dialFrom(t, 20, addr, 0)
		fmt.Fprintf(c, "GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	}
	time.Sleep(1500 * time.Millisecond)
	if code, took := timedCurl(t, 20*time.Second, s.url+"info"); code != 200 || took > 2*time.Second {
		t.Errorf("GET /info after one address opened 80 connections: %d in %v, want 200 within 2 s", code, took)
	}
}

// TestServeETagTTL: with --metadata-ttl a file's bytes may change while
// the server runs, and its validators say so: a weak ETag that changes
// within about a TTL and no-cache. After a rewrite, a revalidation with
// the old ETag gets the new bytes (not 304), and a resumed download with
// If-Range of the old ETag gets the whole new file, never the new file's
// tail after the old one's head.
func TestServeETagTTL(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	writeLayer(t, src, 2, nil)
	notes := filepath.Join(src, "notes.txt")
	old, fresh := bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 64<<10)
	writeFile(t, notes, old)
	s := startServe(t, "--metadata-ttl", "1s", src)
	first := curl(t, s.url+"notes.txt")
	etag := first.header.Get("ETag")
	if first.code != 200 || !bytes.Equal(first.body, old) || !strings.HasPrefix(etag, `W/"`) || first.header.Get("Cache-Control") != "no-cache" {
		t.Errorf("GET notes.txt: %d, ETag %q, Cache-Control %q; want 200, a weak ETag, no-cache", first.code, etag, first.header.Get("Cache-Control"))
	}
	writeFile(t, notes, fresh)
	time.Sleep(2500 * time.Millisecond) // past the TTL
	if r := curl(t, "-H", "If-None-Match: "+etag, s.url+"notes.txt"); r.code != 200 || !bytes.Equal(r.body, fresh) {
		t.Errorf("If-None-Match of the old ETag after a rewrite: %d, %d bytes (new %v); want 200 and the new bytes", r.code, len(r.body), bytes.Equal(r.body, fresh))
	}
	if r := curl(t, "-H", "If-Range: "+etag, "-r", "32768-", s.url+"notes.txt"); r.code != 200 || !bytes.Equal(r.body, fresh) {
		t.Errorf("If-Range of the old ETag after a rewrite: %d, %d bytes (the whole new file %v); want 200 and the whole new file", r.code, len(r.body), bytes.Equal(r.body, fresh))
	}
	if r := curl(t, "-H", "If-Range: "+first.header.Get("Last-Modified"), "-r", "32768-", s.url+"notes.txt"); r.code != 200 || !bytes.Equal(r.body, fresh) {
		t.Errorf("If-Range of the old Last-Modified after a rewrite: %d, %d bytes; want 200 and the whole new file", r.code, len(r.body))
	}
}

// TestServeUnsentBody: a request that declares a body it never sends (a GET
// or HEAD with a Content-Length, a PUT that will be refused) gets its
// reply at once, and its connection is closed after it: the server does
// not wait for a body it does not read. 520 such requests from ten
// addresses, more than the server keeps open, do not keep an honest
// request out either. (On 0d63a2d net/http read the body before the
// reply's first byte, with no deadline: every such request waited for
// good, and held its connection's place.)
func TestServeUnsentBody(t *testing.T) {
	requireTool(t, "curl")
	vol, _ := writeVolume(t)
	s := startServe(t, vol)
	addr := s.hostAddr()
	for _, req := range []string{"GET /info", "HEAD /info", "GET /s0/volume.raw", "PUT /info", "GET /nothing"} {
		c := dialFrom(t, 1, addr, 0)
		fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n", req)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: strings.Fields(req)[0]})
		if err != nil {
			t.Errorf("%s with a body never sent: no reply within %v: %v", req, time.Since(start).Round(time.Millisecond), err)
			continue
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || (resp.Request.Method != "HEAD" && n != resp.ContentLength) || !resp.Close {
			t.Errorf("%s with a body never sent: %s, %d bytes (%v), Connection: close %v; want the whole reply and the connection closed", req, resp.Status, n, err, resp.Close)
		}
		t.Logf("%s with a body never sent: %s in %v", req, resp.Status, time.Since(start).Round(time.Millisecond))
	}
	for i := range 520 {
		c := dialFrom(t, 2+i%10, addr, 0)
		fmt.Fprintf(c, "GET /info HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n")
	}
	time.Sleep(2 * time.Second)
	if code, took := timedCurl(t, 20*time.Second, s.url+"info"); code != 200 || took > 2*time.Second {
		t.Errorf("GET /info after 520 requests whose bodies never came: %d in %v, want 200 within 2 s", code, took)
	}
}

// TestServeHTTP2Stuck: HTTP/2 clients that open many streams and never let
// the server send (a flow-control window of 0) cannot make the server hold
// a reply's block for each: a connection has at most a few streams in
// progress (serve.StreamsPerConn), so four such connections of 250 streams
// each keep the server's memory within its bound, and an honest client is
// answered meanwhile. (On 0d63a2d each connection had 250 streams, each
// holding 256 KiB while its write waited: 1000 held about 250 MiB.)
func TestServeHTTP2Stuck(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 8, nil)
	cert, key, _ := selfSigned(t)
	s := startServe(t, "--cert", cert, "--key", key, src)
	maxStreams := uint32(0)
	for range 4 {
		tc, err := tls.Dial("tcp", s.hostAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tc.Close() })
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			t.Fatalf("negotiated %q, want h2", tc.ConnectionState().NegotiatedProtocol)
		}
		io.WriteString(tc, http2.ClientPreface)
		fr := http2.NewFramer(tc, tc)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		f, err := fr.ReadFrame()
		if sf, ok := f.(*http2.SettingsFrame); err != nil || !ok {
			t.Fatalf("the server's first frame: %v, %v; want its SETTINGS", f, err)
		} else if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
			maxStreams = v
		}
		go func() { // read on, never granting a window
			for {
				if _, err := fr.ReadFrame(); err != nil {
					return
				}
			}
		}()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for i := range 250 {
			hb.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", "/" + keys[i%len(keys)]}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		}
	}
	if maxStreams == 0 || maxStreams > serve.StreamsPerConn {
		t.Errorf("the server's SETTINGS_MAX_CONCURRENT_STREAMS: %d, want 1 to %d", maxStreams, serve.StreamsPerConn)
	}
	time.Sleep(3 * time.Second)
	if r := curl(t, "--max-time", "20", "-k", s.url+keys[3]); r.code != 200 || !bytes.Equal(r.body, chunks[3]) {
		t.Errorf("GET /%s beside 1000 stuck streams: %d, %d bytes", keys[3], r.code, len(r.body))
	}
	checkRSS(t, peakRSS(t, s.cmd.Process.Pid))
}
