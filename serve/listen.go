package serve

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// newGrace is how long a connection may sit before its first request is
// whole and still be spared by Listener's eviction: an honest client sends
// its headers at once.
const newGrace = time.Second

// Listener applies a Policy's connection bounds to a TCP listener: at most
// Conns connections open at once and ConnsPerClient from one client
// address. When a connection arrives at a bound, the connections that
// hold a place without a request in progress give way, the one idle
// longest first (a keep-alive connection between requests), then the
// oldest that has not sent a whole request after newGrace (half-sent
// headers); only when every place holds a request in progress does the
// newcomer wait (over Conns) or get closed (over ConnsPerClient). So idle
// and dripping connections never keep an honest request out.
//
// The server must report connection states to ConnState (http.Server's
// hook of that name). TLS, when served, wraps a Listener from outside
// (tls.NewListener(l, cfg)), so that net/http sees *tls.Conn: r.TLS,
// HTTP/2 and the handshake deadline. Safe for concurrent use.
type Listener struct {
	net.Listener
	conns, perClient int

	mu     sync.Mutex
	cond   *sync.Cond             // signalled when a place may have come free
	open   map[*conn]struct{}     // GUARDED_BY(mu)
	byAddr map[string]int         // GUARDED_BY(mu) open connections per address
	closed bool                   // GUARDED_BY(mu)
	states map[*conn]connSnapshot // GUARDED_BY(mu)
}

// connSnapshot is what the listener knows of a connection: its state as
// net/http last reported it, and since when.
type connSnapshot struct {
	state http.ConnState
	since time.Time
}

// Listen returns ln with p's connection bounds.
func Listen(ln net.Listener, p Policy) *Listener {
	p = p.withDefaults()
	l := &Listener{
		Listener: ln, conns: p.Conns, perClient: p.ConnsPerClient,
		open: make(map[*conn]struct{}), byAddr: make(map[string]int), states: make(map[*conn]connSnapshot),
	}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// conn is an accepted connection, counted until it is closed.
type conn struct {
	net.Conn
	l    *Listener
	addr string
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(c.l.forget(c))
	return c.Conn.Close()
}

// forget returns the function that drops c from the books.
func (l *Listener) forget(c *conn) func() {
	return func() {
		l.mu.Lock()
		if _, ok := l.open[c]; ok {
			delete(l.open, c)
			delete(l.states, c)
			if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
				delete(l.byAddr, c.addr)
			}
		}
		l.mu.Unlock()
		l.cond.Broadcast()
	}
}

// Accept returns the next connection once it has a place.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: nc, l: l, addr: clientAddr(nc.RemoteAddr().String())}
		if l.place(c) {
			return c, nil
		}
		nc.Close()
	}
}

// place finds c a place under both bounds, evicting as Listener says;
// false when c is to be closed.
func (l *Listener) place(c *conn) bool {
	var victims []*conn
	defer func() {
		for _, v := range victims {
			v.Close()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[c.addr] >= l.perClient {
		v := l.victim(c.addr)
		if v == nil {
			return false
		}
		victims = append(victims, v)
		l.drop(v)
	}
	for len(l.open) >= l.conns && !l.closed {
		if v := l.victim(""); v != nil {
			victims = append(victims, v)
			l.drop(v)
			continue
		}
		// Every place holds a request in progress (or a newcomer within
		// its grace): wait for one to end, or for a state to change.
		wake := time.AfterFunc(newGrace, l.cond.Broadcast)
		l.cond.Wait()
		wake.Stop()
	}
	if l.closed {
		return false
	}
	l.open[c] = struct{}{}
	l.states[c] = connSnapshot{http.StateNew, time.Now()}
	l.byAddr[c.addr]++
	return true
}

// drop takes v off the books at once (its Close will find it gone), so
// that its place counts as free before the close completes.
func (l *Listener) drop(v *conn) {
	delete(l.open, v)
	delete(l.states, v)
	if l.byAddr[v.addr]--; l.byAddr[v.addr] <= 0 {
		delete(l.byAddr, v.addr)
	}
}

// victim returns the connection to evict (of addr only, unless addr is
// ""): the one idle longest, else the oldest new one past its grace; nil
// when none may go.
func (l *Listener) victim(addr string) *conn {
	var idle, fresh *conn
	var idleSince, freshSince time.Time
	grace := time.Now().Add(-newGrace)
	for c, s := range l.states {
		if addr != "" && c.addr != addr {
			continue
		}
		switch {
		case s.state == http.StateIdle && (idle == nil || s.since.Before(idleSince)):
			idle, idleSince = c, s.since
		case s.state == http.StateNew && s.since.Before(grace) && (fresh == nil || s.since.Before(freshSince)):
			fresh, freshSince = c, s.since
		}
	}
	if idle != nil {
		return idle
	}
	return fresh
}

// ConnState records the state net/http reports for a connection; install
// it as http.Server.ConnState.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch state {
	case http.StateClosed, http.StateHijacked:
		c.once.Do(l.forget(c))
		return
	}
	l.mu.Lock()
	if _, ok := l.open[c]; ok {
		l.states[c] = connSnapshot{state, time.Now()}
	}
	l.mu.Unlock()
	if state == http.StateIdle {
		l.cond.Broadcast()
	}
}

// Close closes the listener; an Accept waiting for a place returns.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
	return l.Listener.Close()
}
