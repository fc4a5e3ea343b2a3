package shared

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memcacheEngine is a pool of memcached servers, spoken to in memcached's
// text protocol by a client of the tier's own, so that every length a
// server declares is checked before it is read, every call honours its
// context, and the lease has add and cas.
//
// A key's server is chosen by rendezvous hashing of its route (the engine
// key without the suffixes of its lease and parts, so that a value, its
// lease and its parts live on one server): one server joining or leaving
// a pool of N moves about 1/N of the keys, where crc32 % N (gomemcache's
// default) moves almost all of them.
//
// A value above the servers' item limit (item_size_max, read with "stats
// settings" at the first write and logged once) is stored as parts, each
// an item of its own under a name of this write's (so that two writers
// never mix their parts), then a manifest under the value's key that
// names them: a reader checks each part's declared length before reading
// it, and the value put together is checked whole by its envelope.
type memcacheEngine struct {
	servers []*mcServer
	log     func(msg string, args ...any)

	limitOnce sync.Once
	partSize  int64 // the most bytes of a value in one item
}

// mcServer is one memcached server and its idle connections.
type mcServer struct {
	addr string
	mu   sync.Mutex
	idle []*mcConn // GUARDED_BY(mu)
}

type mcConn struct {
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

// mcMaxIdle bounds the idle connections kept per server.
const mcMaxIdle = 16

// itemOverhead is room left in an item for memcached's item header and
// the key.
const itemOverhead = 512

// Manifest of a value stored as parts: magic "VSM1", the part count and
// size, the value's length, and the 16 random bytes that name this
// write's parts.
const (
	manifestMagic = "VSM1"
	manifestSize  = 4 + 4 + 4 + 8 + 16
	maxParts      = 4096
)

func openMemcache(u *url.URL, log func(string, ...any)) (*memcacheEngine, error) {
	addrs, err := hosts(u, "memcache")
	if err != nil {
		return nil, err
	}
	m := &memcacheEngine{log: log}
	for _, a := range addrs {
		m.servers = append(m.servers, &mcServer{addr: a})
	}
	return m, nil
}

func (m *memcacheEngine) name() string { return "memcache" }

// route is the part of an engine key that chooses its server.
func route(key string) string {
	if i := strings.IndexByte(key[min(len(key), len(keyPrefix)):], ':'); i >= 0 {
		return key[:len(keyPrefix)+i]
	}
	return key
}

// pick returns the server of key by rendezvous hashing: the server whose
// hash with the key's route is highest.
func (m *memcacheEngine) pick(key string) *mcServer {
	return m.servers[rendezvous(addrsOf(m.servers), route(key))]
}

func addrsOf(ss []*mcServer) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.addr
	}
	return out
}

// rendezvous returns the index of the node of nodes that key goes to.
func rendezvous(nodes []string, key string) int {
	best, bestScore := 0, uint64(0)
	for i, n := range nodes {
		h := fnv.New64a()
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write([]byte(key))
		if s := mix64(h.Sum64()); i == 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// mix64 is splitmix64's finalizer: FNV's high bits alone are not uniform
// enough to rank nodes.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// conn returns an idle connection of s, or a new one, with ctx's deadline.
func (s *mcServer) conn(ctx context.Context) (*mcConn, error) {
	s.mu.Lock()
	var c *mcConn
	if n := len(s.idle); n > 0 {
		c, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.mu.Unlock()
	if c == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return nil, err
		}
		c = &mcConn{nc: nc, r: bufio.NewReaderSize(nc, 4096), w: bufio.NewWriter(nc)}
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultTimeout)
	}
	if err := c.nc.SetDeadline(dl); err != nil {
		c.nc.Close()
		return nil, err
	}
	return c, nil
}

// put gives c back to s after a call that left it in a known state, or
// closes it after one that failed.
func (s *mcServer) put(c *mcConn, err error) {
	if err != nil && !errors.Is(err, errMiss) && !errors.Is(err, errNotStored) {
		c.nc.Close()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) >= mcMaxIdle {
		c.nc.Close()
		return
	}
	s.idle = append(s.idle, c)
}

// errNotStored is memcached's NOT_STORED or EXISTS (add, cas).
var errNotStored = errors.New("shared: not stored")

// do runs fn on a connection to key's server.
func (m *memcacheEngine) do(ctx context.Context, key string, fn func(c *mcConn) error) error {
	s := m.pick(key)
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	s.put(c, err)
	return err
}

// line reads one reply line of at most the reader's buffer.
func (c *mcConn) line() (string, error) {
	b, err := c.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("%w: a line of more than %d bytes", errDeclared, c.r.Size())
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// mcItem is one item of a get's reply.
type mcItem struct {
	key string
	val []byte
	cas uint64
}

// retrieve sends "get" (or "gets") of keys and reads the items found,
// refusing before reading it any item whose declared length max refuses.
func (c *mcConn) retrieve(cmd string, keys []string, max func(key string, n int64) bool) ([]mcItem, error) {
	fmt.Fprintf(c.w, "%s %s\r\n", cmd, strings.Join(keys, " "))
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	var items []mcItem
	for {
		l, err := c.line()
		if err != nil {
			return nil, err
		}
		if l == "END" {
			return items, nil
		}
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "VALUE" {
			return nil, fmt.Errorf("memcached: %q", l)
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || n < 0 || !max(f[1], n) {
			return nil, fmt.Errorf("%w: %s of %s bytes", errDeclared, f[1], f[3])
		}
		it := mcItem{key: f[1], val: make([]byte, n+2)}
		if len(f) > 4 {
			it.cas, _ = strconv.ParseUint(f[4], 10, 64)
		}
		if _, err := io.ReadFull(c.r, it.val); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(it.val, []byte("\r\n")) {
			return nil, fmt.Errorf("memcached: %s: value not ended by CRLF", f[1])
		}
		it.val = it.val[:n]
		items = append(items, it)
	}
}

// store sends a storage command (set, add, cas) and reads its answer.
func (c *mcConn) store(cmd, key string, exptime int64, val []byte, cas uint64) error {
	if cmd == "cas" {
		fmt.Fprintf(c.w, "cas %s 0 %d %d %d\r\n", key, exptime, len(val), cas)
	} else {
		fmt.Fprintf(c.w, "%s %s 0 %d %d\r\n", cmd, key, exptime, len(val))
	}
	c.w.Write(val)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	l, err := c.line()
	switch {
	case err != nil:
		return err
	case l == "STORED":
		return nil
	case l == "NOT_STORED" || l == "EXISTS" || l == "NOT_FOUND":
		return errNotStored
	}
	return fmt.Errorf("memcached: %s: %q", cmd, l)
}

// get returns the value of key, at most max bytes, put together from its
// parts when it was stored as several items.
func (m *memcacheEngine) get(ctx context.Context, key string, max int64) ([]byte, error) {
	var val []byte
	err := m.do(ctx, key, func(c *mcConn) error {
		items, err := c.retrieve("get", []string{key}, func(_ string, n int64) bool { return n <= max })
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return errMiss
		}
		val = items[0].val
		if !bytes.HasPrefix(val, []byte(manifestMagic)) {
			return nil
		}
		val, err = m.getParts(c, key, val, max)
		return err
	})
	return val, err
}

// getParts reads the parts that the manifest man of key names.
func (m *memcacheEngine) getParts(c *mcConn, key string, man []byte, max int64) ([]byte, error) {
	if len(man) != manifestSize {
		return nil, fmt.Errorf("%w: a manifest of %d bytes", errCorruptValue, len(man))
	}
	parts := int64(binary.LittleEndian.Uint32(man[4:]))
	size := int64(binary.LittleEndian.Uint32(man[8:]))
	total := int64(binary.LittleEndian.Uint64(man[12:]))
	if size <= 0 || total <= 0 || total > max || parts > maxParts || parts != (total+size-1)/size {
		return nil, fmt.Errorf("%w: a manifest of %d parts of %d bytes for %d bytes", errCorruptValue, parts, size, total)
	}
	gen := hex.EncodeToString(man[20:36])
	want := make(map[string]int64, parts)
	keys := make([]string, parts)
	for i := range parts {
		keys[i] = partKey(key, gen, i)
		want[keys[i]] = i
	}
	val := make([]byte, 0, total)
	const batch = 16
	for start := int64(0); start < parts; start += batch {
		ks := keys[start:min(start+batch, parts)]
		// Each part is of the size the manifest implies, checked before
		// it is read.
		items, err := c.retrieve("get", ks, func(k string, n int64) bool {
			i, ok := want[k]
			return ok && n == min(size, total-i*size)
		})
		if err != nil {
			return nil, err
		}
		if len(items) != len(ks) {
			return nil, errMiss // a part evicted
		}
		for j, it := range items {
			if it.key != ks[j] {
				return nil, fmt.Errorf("%w: parts out of order", errCorruptValue)
			}
			val = append(val, it.val...)
		}
	}
	return val, nil
}

// errCorruptValue is a value the engine holds that cannot be one of volfs.
var errCorruptValue = errors.New("shared: corrupt value")

func partKey(key, gen string, i int64) string {
	return key + ":p:" + gen + ":" + strconv.FormatInt(i, 10)
}

// itemLimit returns the most bytes of a value in one item, read once from
// the first server that answers "stats settings" (item_size_max).
func (m *memcacheEngine) itemLimit(ctx context.Context) int64 {
	m.limitOnce.Do(func() {
		m.partSize = 1<<20 - itemOverhead // memcached's default, -I 1m
		for _, s := range m.servers {
			c, err := s.conn(ctx)
			if err != nil {
				continue
			}
			limit, err := c.settings()
			s.put(c, err)
			if err == nil && limit > 2*itemOverhead {
				m.partSize = limit - itemOverhead
				m.log("shared cache: memcached's item limit read; larger values are stored as several items", "item_size_max", limit)
				return
			}
		}
		m.log("shared cache: memcached's item limit not read; assuming 1 MiB", "part_size", m.partSize)
	})
	return m.partSize
}

// settings returns item_size_max from "stats settings".
func (c *mcConn) settings() (int64, error) {
	c.w.WriteString("stats settings\r\n")
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	limit := int64(-1)
	for range 1000 {
		l, err := c.line()
		if err != nil {
			return 0, err
		}
		if l == "END" {
			if limit < 0 {
				return 0, errors.New("memcached: no item_size_max in stats settings")
			}
			return limit, nil
		}
		if v, ok := strings.CutPrefix(l, "STAT item_size_max "); ok {
			limit, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("memcached: stats settings does not end")
}

// set stores val under key: as one item when it fits, else as parts and
// a manifest.
func (m *memcacheEngine) set(ctx context.Context, key string, val []byte) error {
	size := m.itemLimit(ctx)
	if int64(len(val)) <= size {
		return m.do(ctx, key, func(c *mcConn) error { return c.store("set", key, 0, val, 0) })
	}
	parts := (int64(len(val)) + size - 1) / size
	if parts > maxParts {
		return fmt.Errorf("shared: a value of %d bytes in more than %d parts", len(val), maxParts)
	}
	man := make([]byte, manifestSize)
	copy(man, manifestMagic)
	binary.LittleEndian.PutUint32(man[4:], uint32(parts))
	binary.LittleEndian.PutUint32(man[8:], uint32(size))
	binary.LittleEndian.PutUint64(man[12:], uint64(len(val)))
	rand.Read(man[20:36])
	gen := hex.EncodeToString(man[20:36])
	return m.do(ctx, key, func(c *mcConn) error {
		for i := range parts {
			p := val[i*size : min((i+1)*size, int64(len(val)))]
			if err := c.store("set", partKey(key, gen, i), 0, p, 0); err != nil {
				return err
			}
		}
		return c.store("set", key, 0, man, 0)
	})
}

// ttlSeconds is memcached's expiry of a lease: whole seconds, and one more,
// since memcached's clock ticks once a second and an expiry of n seconds
// may come after n-1.
func ttlSeconds(ttl time.Duration) int64 {
	return int64((ttl+time.Second-1)/time.Second) + 1
}

func (m *memcacheEngine) lease(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	err := m.do(ctx, key, func(c *mcConn) error {
		return c.store("add", leaseKey(key), ttlSeconds(ttl), []byte(token), 0)
	})
	if errors.Is(err, errNotStored) {
		return false, nil
	}
	return err == nil, err
}

// casLeaseTo replaces the lease of key, if token holds it, by next with
// exptime (negative: expired at once, which deletes it).
func (m *memcacheEngine) casLeaseTo(ctx context.Context, key, token, next string, exptime int64) (bool, error) {
	err := m.do(ctx, key, func(c *mcConn) error {
		items, err := c.retrieve("gets", []string{leaseKey(key)}, func(_ string, n int64) bool { return n <= 64 })
		if err != nil {
			return err
		}
		if len(items) == 0 || string(items[0].val) != token {
			return errNotStored
		}
		return c.store("cas", leaseKey(key), exptime, []byte(next), items[0].cas)
	})
	if errors.Is(err, errNotStored) {
		return false, nil
	}
	return err == nil, err
}

func (m *memcacheEngine) renew(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return m.casLeaseTo(ctx, key, token, token, ttlSeconds(ttl))
}

// release drops the lease by cas to an expiry in the past, memcached's
// compare-and-delete; a holder that gave up leaves instead, for a second,
// a lease of its own that says so (abandonedToken): there are no
// announcements, and the waiters that poll then go to the origin at once
// rather than take the lease one after the other.
func (m *memcacheEngine) release(ctx context.Context, key, token string, gaveUp bool) error {
	var err error
	if gaveUp {
		_, err = m.casLeaseTo(ctx, key, token, abandonedToken, 2)
	} else {
		_, err = m.casLeaseTo(ctx, key, token, token, -1)
	}
	return err
}

// abandonedToken is the lease of a key whose holder gave up.
const abandonedToken = "-"

func (m *memcacheEngine) leased(ctx context.Context, key string) (leaseState, error) {
	state := leaseNone
	err := m.do(ctx, key, func(c *mcConn) error {
		items, err := c.retrieve("get", []string{leaseKey(key)}, func(_ string, n int64) bool { return n <= 64 })
		switch {
		case len(items) == 0:
		case string(items[0].val) == abandonedToken:
			state = leaseAbandoned
		default:
			state = leaseHeld
		}
		return err
	})
	return state, err
}

// subscribe does nothing: memcached has no announcements.
func (m *memcacheEngine) subscribe(func(string)) {}

// announces reports that waiters must poll.
func (m *memcacheEngine) announces() bool { return false }

func (m *memcacheEngine) ping(ctx context.Context) error {
	var errs []error
	for _, s := range m.servers {
		c, err := s.conn(ctx)
		if err == nil {
			c.w.WriteString("version\r\n")
			if err = c.w.Flush(); err == nil {
				var l string
				if l, err = c.line(); err == nil && !strings.HasPrefix(l, "VERSION") {
					err = fmt.Errorf("memcached: version: %q", l)
				}
			}
			s.put(c, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.addr, err))
		}
	}
	return errors.Join(errs...)
}

func (m *memcacheEngine) close() error {
	for _, s := range m.servers {
		s.mu.Lock()
		for _, c := range s.idle {
			c.nc.Close()
		}
		s.idle = nil
		s.mu.Unlock()
	}
	return nil
}
