package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// Bounds on what an engine may declare in one reply, checked on the wire
// before the client reads on: a client (go-redis, or the memcached one
// here) allocates what a length declares, so that a declared length of a
// terabyte, from a hostile or broken engine, would be a fatal out of
// memory.
const (
	// maxLine bounds a reply's line (a status, an error, a length).
	maxLine = 64 << 10
	// maxElements bounds the elements one RESP reply declares, in all
	// its arrays, maps and sets: volfs's commands are answered with a
	// few (CLUSTER SLOTS with one range per slot at most).
	maxElements = 1 << 16
)

// errDeclared is wrapped by the error of a read from an engine whose reply
// declares more than the tier accepts.
var errDeclared = errors.New("shared: engine declared a reply larger than any value volfs writes")

// respConn is a connection to Redis that checks each reply's framing as it
// is read (RESP2 and RESP3): a bulk string longer than the limit, an
// aggregate of more than maxElements elements or a line longer than
// maxLine fails the read, and every later one, before the client has seen
// the length. The client then drops the connection, and the call is a
// fault of the engine.
//
// The limit is the inFlight's: the largest value the lookups in flight
// may read (the client's connections are not told which command they
// answer), and never more than max.
type respConn struct {
	net.Conn
	max      int64
	inFlight *inFlight // nil: max alone

	err   error
	line  []byte  // the part of a line read so far
	skip  int64   // bytes of a bulk string (and its CRLF) still to pass
	bulk  bool    // a bulk string is being passed: it completes a value
	stack []int64 // elements still to come in each open aggregate
	attr  []bool  // whether each open aggregate is an attribute
	total int64   // elements declared in the current reply
}

// dialLimited wraps dial so that its connections are respConns bounded
// by max and the lookups of f.
func dialLimited(dial func(ctx context.Context, network, addr string) (net.Conn, error), max int64, f *inFlight) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &respConn{Conn: c, max: max, inFlight: f}, nil
	}
}

// minReply is the limit of a bulk string when no lookup is in flight:
// the other replies volfs reads (statuses, integers, announcements of a
// key, the handshake) are far shorter.
const minReply = 64 << 10

// inFlight is the set of bounds of the lookups in flight on one engine.
type inFlight struct {
	mu     sync.Mutex
	counts map[int64]int // GUARDED_BY(mu); lookups in flight by bound
	top    atomic.Int64  // the largest bound in counts, or minReply
}

func newInFlight() *inFlight {
	f := &inFlight{counts: make(map[int64]int)}
	f.top.Store(minReply)
	return f
}

// add counts a lookup of at most bound bytes until the returned func.
func (f *inFlight) add(bound int64) (done func()) {
	f.mu.Lock()
	f.counts[bound]++
	if bound > f.top.Load() {
		f.top.Store(bound)
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.counts[bound]--; f.counts[bound] == 0 {
			delete(f.counts, bound)
		}
		top := int64(minReply)
		for b := range f.counts {
			top = max(top, b)
		}
		f.top.Store(top)
	}
}

// limit is the largest bulk string c accepts now.
func (c *respConn) limit() int64 {
	if c.inFlight == nil {
		return c.max
	}
	return min(c.max, c.inFlight.top.Load())
}

func (c *respConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if serr := c.scan(p[:n]); serr != nil {
		c.err = serr
		c.Conn.Close()
		return 0, serr
	}
	return n, err
}

// scan follows the framing of the bytes b that the client is about to
// read.
func (c *respConn) scan(b []byte) error {
	for len(b) > 0 {
		if c.skip > 0 {
			k := min(c.skip, int64(len(b)))
			c.skip -= k
			b = b[k:]
			if c.skip == 0 && c.bulk {
				c.bulk = false
				c.complete()
			}
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(c.line)+len(b) > maxLine {
				return fmt.Errorf("%w: a line of more than %d bytes", errDeclared, maxLine)
			}
			c.line = append(c.line, b...)
			return nil
		}
		if len(c.line)+i+1 > maxLine {
			return fmt.Errorf("%w: a line of more than %d bytes", errDeclared, maxLine)
		}
		c.line = append(c.line, b[:i+1]...)
		b = b[i+1:]
		err := c.header(c.line)
		c.line = c.line[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// header takes in one line of the reply: a value of its own, or the
// header of a bulk string or an aggregate.
func (c *respConn) header(line []byte) error {
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("%w: a malformed line", errDeclared)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '$', '=', '!': // bulk string, verbatim string, bulk error
		n, err := strconv.ParseInt(string(body), 10, 64)
		switch {
		case err != nil || n < -1:
			return fmt.Errorf("%w: a bulk length %q", errDeclared, body)
		case n == -1:
			c.complete()
		case n > c.limit():
			return fmt.Errorf("%w: a value of %d bytes, above %d", errDeclared, n, c.limit())
		default:
			c.skip, c.bulk = n+2, true
		}
	case '*', '%', '~', '>', '|': // array, map, set, push, attribute
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil || n < -1 || n > maxElements {
			return fmt.Errorf("%w: an aggregate of %q elements", errDeclared, body)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		if c.total += max(n, 0); c.total > maxElements {
			return fmt.Errorf("%w: a reply of more than %d elements", errDeclared, maxElements)
		}
		if n <= 0 {
			c.complete()
			return nil
		}
		c.stack = append(c.stack, n)
		c.attr = append(c.attr, line[0] == '|')
	default: // a value on one line: + - : _ , # (
		c.complete()
	}
	return nil
}

// complete counts one value read: it may close the aggregates it ends,
// and the reply.
func (c *respConn) complete() {
	for len(c.stack) > 0 {
		top := len(c.stack) - 1
		c.stack[top]--
		if c.stack[top] > 0 {
			return
		}
		attr := c.attr[top]
		c.stack, c.attr = c.stack[:top], c.attr[:top]
		if attr {
			return // an attribute precedes a value: it is not one
		}
	}
	c.total = 0
}
