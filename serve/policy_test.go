package serve

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPolicyAdmit(t *testing.T) {
	auth, _ := ParseAuth("ann:pw")
	loop := &Policy{Loopback: true}
	allow := &Policy{Loopback: true, Origins: []string{"https://ng.example"}}
	authed := &Policy{Auth: auth}
	public := &Policy{}
	for _, tc := range []struct {
		name   string
		p      *Policy
		host   string
		origin string
		tls    bool
		want   int
	}{
		{"loopback, no Origin", loop, "127.0.0.1:8080", "", false, 0},
		{"loopback, rebinding", loop, "evil.example", "", false, 403},
		{"loopback, foreign page", loop, "127.0.0.1:8080", "https://evil.example", false, 403},
		{"loopback, null page", loop, "127.0.0.1:8080", "null", false, 403},
		{"loopback, own page", loop, "127.0.0.1:8080", "http://127.0.0.1:8080", false, 0},
		{"loopback, own page over TLS", loop, "localhost:8443", "https://localhost:8443", true, 0},
		{"loopback, http page of a TLS server", loop, "localhost:8443", "http://localhost:8443", true, 403},
		{"allowed page", allow, "127.0.0.1:8080", "https://ng.example", false, 0},
		{"allowed list, another page", allow, "127.0.0.1:8080", "https://evil.example", false, 403},
		{"with credentials, foreign page", authed, "host.example", "https://evil.example", false, 403},
		{"public, foreign page", public, "host.example", "https://evil.example", false, 0},
	} {
		r, _ := http.NewRequest("GET", "http://x/info", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if got, _ := tc.p.admit(r); got != tc.want {
			t.Errorf("%s: admit = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPolicyCORS(t *testing.T) {
	p := &Policy{Origins: []string{"https://ng.example"}}
	for _, tc := range []struct{ origin, want string }{
		{"https://ng.example", "https://ng.example"},
		{"https://evil.example", ""},
		{"", ""},
	} {
		r, _ := http.NewRequest("GET", "http://x/info", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		h := http.Header{}
		p.cors(h, r)
		if got := h.Get("Access-Control-Allow-Origin"); got != tc.want || h.Get("Vary") != "Origin" {
			t.Errorf("Origin %q: Allow-Origin %q, Vary %q; want %q, Origin", tc.origin, got, h.Get("Vary"), tc.want)
		}
	}
	h := http.Header{}
	(&Policy{}).cors(h, &http.Request{Header: http.Header{"Origin": {"https://ng.example"}}})
	if len(h) != 0 {
		t.Errorf("no origins allowed: headers %v, want none", h)
	}
}

func TestCheckOrigins(t *testing.T) {
	for o, ok := range map[string]bool{
		"https://neuroglancer-demo.appspot.com": true, "http://127.0.0.1:8000": true, "*": true,
		"https://x.example/": false, "https://x.example/viewer": false, "x.example": false, "ftp://x.example": false, "https://u@x.example": false,
	} {
		if err := CheckOrigins([]string{o}); (err == nil) != ok {
			t.Errorf("CheckOrigins(%q) = %v, want ok %v", o, err, ok)
		}
	}
}

func TestParsePropfind(t *testing.T) {
	for _, tc := range []struct {
		body     string
		propName bool
		names    int // -1: allprop
		bad      bool
	}{
		{"", false, -1, false},
		{`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`, false, -1, false},
		{`<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`, true, -1, false},
		{`<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><X:y xmlns:X="urn:x"/></D:prop></D:propfind>`, false, 2, false},
		{`<propfind><prop/></propfind>`, false, 0, true},
		{`<D:propfind xmlns:D="DAV:"><D:prop>`, false, 0, true},
		{`<D:propfind xmlns:D="DAV:"><D:prop>` + strings.Repeat("<D:a/>", maxPropNames+1) + `</D:prop></D:propfind>`, false, 0, true},
	} {
		req, err := parsePropfind([]byte(tc.body))
		if (err != nil) != tc.bad {
			t.Errorf("parsePropfind(%.60q): %v, want bad %v", tc.body, err, tc.bad)
			continue
		}
		if tc.bad {
			continue
		}
		if req.propName != tc.propName || (tc.names < 0) != (req.names == nil) || tc.names >= 0 && len(req.names) != tc.names {
			t.Errorf("parsePropfind(%.60q) = %+v, want propName %v, %d names", tc.body, req, tc.propName, tc.names)
		}
	}
}

// TestListenerEvicts fills a Listener of 4 places with idle keep-alive
// connections and with connections that sent half their headers; a
// newcomer is served at once, and a fifth connection of one address is
// closed while its four hold requests in progress.
func TestListenerEvicts(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(tcp, Policy{Conns: 4, ConnsPerClient: 3})
	release := make(chan struct{})
	hs := &http.Server{ConnState: l.ConnState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		io.WriteString(w, "ok")
	})}
	go hs.Serve(l)
	defer hs.Close()
	addr := tcp.Addr().String()
	dial := func(from byte) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	get := func(c net.Conn, path string) error {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
		}
		return err
	}
	for i := range 3 {
		if err := get(dial(byte(2+i)), "/"); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(dial(9), "GET / HTTP/1.1\r\n")
	time.Sleep(newGrace + 200*time.Millisecond)
	for i := range 5 {
		start := time.Now()
		if err := get(dial(10), "/"); err != nil || time.Since(start) > time.Second {
			t.Errorf("newcomer %d with the places held idle: %v after %v", i, err, time.Since(start))
		}
	}
	for range 3 {
		fmt.Fprintf(dial(11), "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	time.Sleep(100 * time.Millisecond)
	if err := get(dial(11), "/"); err == nil {
		t.Errorf("a fourth connection of an address holding 3 requests was served, want it closed")
	}
	close(release)
}
