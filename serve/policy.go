package serve

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Policy is what a Server exposes and to whom: the web origins that may
// read it, the credentials it asks for, the hosts it answers to, and the
// bounds every client lives within (bodies, writes, tree-read slots,
// connections, listings). Every handler and the listener consult it, so
// that serve's security decisions sit here and nowhere else.
//
// The zero Policy (with Loopback set, as `volfs serve` sets it for a
// loopback address) is the safe one: no CORS, no page of another origin
// answered, the default bounds.
type Policy struct {
	// Origins are the web origins ("https://host[:port]", as a browser
	// sends them in Origin) whose pages may read replies: such a request
	// gets Access-Control-Allow-Origin naming its origin, with Vary:
	// Origin. "*" is every origin (for public data only). Empty: no CORS
	// header at all.
	Origins []string
	// Auth, when not nil, must accept every request but a CORS preflight.
	Auth *Auth
	// Loopback is set for a server that listens on loopback only. It then
	// answers only requests whose Host names the loopback (localhost,
	// 127.0.0.0/8, ::1), so that a web page cannot reach it through a
	// name of its own pointed at 127.0.0.1 (DNS rebinding).
	Loopback bool

	// WriteTimeout bounds each write of a reply (one block); 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MetadataTTL is the tree's --metadata-ttl: while it is set, a file's
	// bytes may change while the server runs, and validators say so
	// (weak ETags that change every TTL, no-cache).
	MetadataTTL time.Duration

	// Slots bounds the requests that read the tree at once; 0 means
	// DefaultSlots. A slot is taken once a request's body is read, and
	// released while a block of the reply is written to the client.
	Slots int
	// Conns bounds the connections open at once, ConnsPerClient those of
	// one client address; 0 means DefaultConns, DefaultConnsPerClient.
	Conns, ConnsPerClient int
}

// Defaults of a Policy's bounds, and the fixed bounds every client lives
// within.
const (
	// DefaultWriteTimeout: one block of a reply (blockSize) must reach
	// the client within it, which any client reading at 10 KiB/s does.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultSlots: a few per core keeps every worker of the chunk store
	// busy without letting a crowd of clients take memory.
	DefaultSlots = 64
	// DefaultConns and DefaultConnsPerClient: a browser opens 6
	// connections per origin, rclone 4-16; 64 per address leaves room for
	// a NAT of a few users while no one address takes the server.
	DefaultConns          = 512
	DefaultConnsPerClient = 64
	// StreamsPerConn bounds the requests one HTTP/2 connection has in
	// progress at once (its SETTINGS_MAX_CONCURRENT_STREAMS; net/http's
	// default is 250). A reply holds a block of memory (blockSize) while
	// a block of it is written, and a client that stops reading holds it
	// for the write timeout: so an HTTP/2 connection may hold a few
	// blocks, as a browser's six HTTP/1 connections do, never 250.
	StreamsPerConn = 8

	// maxBodyBytes and bodyTimeout bound a request's body (a PROPFIND's
	// list of property names: a few hundred bytes from any client).
	maxBodyBytes = 1 << 20
	bodyTimeout  = 30 * time.Second
)

// withDefaults returns p with its zero bounds set to the defaults.
func (p Policy) withDefaults() Policy {
	if p.WriteTimeout <= 0 {
		p.WriteTimeout = DefaultWriteTimeout
	}
	if p.Slots <= 0 {
		p.Slots = DefaultSlots
	}
	if p.Conns <= 0 {
		p.Conns = DefaultConns
	}
	if p.ConnsPerClient <= 0 {
		p.ConnsPerClient = DefaultConnsPerClient
	}
	return p
}

// CheckOrigins checks a list of origins for Policy.Origins: each must be
// "*" or scheme://host[:port] with nothing after it, as browsers send it.
func CheckOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil || strings.HasSuffix(o, "/") {
			return fmt.Errorf("serve: --cors-origin %q: want an origin such as https://neuroglancer-demo.appspot.com (scheme and host, no path), or *", o)
		}
	}
	return nil
}

// public reports whether anyone who can reach the server may read it: an
// anonymous server beyond loopback (--allow-anonymous).
func (p *Policy) public() bool { return !p.Loopback && p.Auth == nil }

// allowedOrigin reports whether the page of origin may read replies.
func (p *Policy) allowedOrigin(origin string) bool {
	for _, o := range p.Origins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// sameOrigin reports whether origin is the server's own, as r reached it.
func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// admit decides whether r is answered at all, before its credentials are
// checked: 0 when it goes on, else the status, with the reason for the
// body. A loopback server answers to loopback Host names only; a request
// from a page of a foreign origin (not the server's own, not in Origins,
// or "null") is refused unless the server is public, so that no page the
// operator opens can make the server read the source for it, whether or
// not the browser would let the page see the reply.
func (p *Policy) admit(r *http.Request) (int, string) {
	if p.Loopback && !LocalHost(r.Host) {
		return http.StatusForbidden, "403 forbidden: this server answers only to localhost, 127.0.0.1 or [::1]"
	}
	if origin := r.Header.Get("Origin"); origin != "" && !p.public() && !p.allowedOrigin(origin) && !sameOrigin(r, origin) {
		return http.StatusForbidden, "403 forbidden: requests from pages of " + origin + " are refused (volfs serve --cors-origin allows an origin)"
	}
	return 0, ""
}

// cors sets the CORS headers of the reply to r: the origin echoed when it
// may read the reply, and Vary: Origin whenever some origin may (a cache
// must not give one origin's reply to another).
func (p *Policy) cors(h http.Header, r *http.Request) {
	if len(p.Origins) == 0 {
		return
	}
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !p.allowedOrigin(origin) {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "Content-Length, Content-Range, Accept-Ranges, ETag, Last-Modified")
}

// preflight reports whether r is a CORS preflight; if so it has answered
// it, without credentials as the Fetch standard has it: with what may be
// asked when the origin is allowed, with nothing (which the browser reads
// as a refusal) otherwise.
func (p *Policy) preflight(w http.ResponseWriter, r *http.Request, methods string) bool {
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h := w.Header()
	if h.Get("Access-Control-Allow-Origin") != "" {
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", "Range, If-None-Match, If-Modified-Since, If-Range, Authorization, Depth")
		h.Set("Access-Control-Max-Age", "86400")
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

// authorized reports whether r carries the credentials the policy asks
// for; if not it has answered 401 with a Basic challenge.
func (p *Policy) authorized(w http.ResponseWriter, r *http.Request) bool {
	if p.Auth == nil || p.Auth.Check(r) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="volfs", charset="UTF-8"`)
	http.Error(w, "401 unauthorized", http.StatusUnauthorized)
	return false
}

// clientAddr is the address a request or connection comes from, without
// its port: the unit of the per-client bounds.
func clientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// LocalHost reports whether the Host header host names the loopback.
func LocalHost(host string) bool {
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
