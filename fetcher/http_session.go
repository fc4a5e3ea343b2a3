package fetcher

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// origin returns u's scheme, lower-case host and port, the port spelled
// out even when it is the scheme's default.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// session is the connection pool that every HTTP fetcher of the process
// shares for one host.
type session struct {
	transport *http.Transport
	dials     atomic.Int64 // TCP connections opened
}

// sessions holds one session per scheme and host:port, for the life of the
// process: a mount talks to a handful of hosts.
var sessions = struct {
	mu sync.Mutex
	m  map[string]*session // GUARDED_BY(mu)
}{m: make(map[string]*session)}

// sessionFor returns the session of u's host, creating it with room for
// conns connections if it is the first.
func sessionFor(u *url.URL, conns int) *session {
	key := origin(u)
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	if s, ok := sessions.m[key]; ok {
		return s
	}
	s := newSession(conns)
	sessions.m[key] = s
	return s
}

func newSession(conns int) *session {
	s := &session{}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				s.dials.Add(1)
			}
			return c, err
		},
		// Go's HTTP/2 moves 1 MiB bodies 2-3 times slower than HTTP/1.1
		// over parallel connections; a non-nil empty TLSNextProto keeps it off.
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		// Go keeps 2 idle connections per host by default, so a burst of
		// concurrent reads re-dials; keep every connection the host may have.
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// No ResponseHeaderTimeout: the watchdog of each attempt bounds
		// the wait for headers with the fetcher's own StallTimeout, which
		// a fixed transport-wide timeout would override.
		// Accept-Encoding is ours to set: gzip bodies are returned undecoded.
		DisableCompression: true,
	}
	s.transport = tr
	return s
}
