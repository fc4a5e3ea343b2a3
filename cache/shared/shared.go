// Package shared is a tier of the chunk store (cache.Tier) kept on a
// distributed engine that a fleet of mounts shares: Redis (standalone,
// TLS, or a Redis Cluster) or memcached. A chunk one node decoded is
// served to every other node from the engine, so that the fleet fetches
// each chunk from the origin about once.
//
// # Values
//
// A value is the decoded chunk, compressed with zstd level 1 (or raw where
// that is not smaller), behind a header:
//
//	offset size
//	0      4    magic "VSC1"
//	4      1    codec: 0 raw, 1 zstd
//	5      1    flags: 1 the MAC is an HMAC under the fleet's secret
//	6      2    zero
//	8      8    decoded size, little-endian
//	16     4    identity record length, little-endian
//	20     4    CRC-32C of the key, the header's bytes 0-19, the identity
//	            record and the payload, little-endian
//	24     32   HMAC-SHA256 under the secret of the same bytes, or zero
//	            without a secret
//	56     i    the identity record (what the chunk was made from)
//	56+i        the payload
//
// A value whose checksum, size, codec or decoded length does not match
// is corrupt: it is a miss (the store fetches the chunk from the origin
// and writes it again), never served. With a secret (--shared-cache-secret)
// a value without the right HMAC is refused as forged, so another client
// of the engine cannot make the fleet serve bytes of its choosing. Without
// one, the tier trusts every client that can write to the engine.
//
// # Keys
//
// A chunk's key in the engine is "volfs1:" and the SHA-256 (base64url) of
// the store's key, which names the source and the chunk; the identity
// record of the source objects (ETag, generation, size and mtime) travels
// in the value and is checked by the store before the value is served, so
// two datasets never share an entry and a rewritten object is never served.
//
// # Sizes
//
// A value above the engine's item limit (Options.MaxValue: memcached's
// 1 MiB less its per-item overhead, 512 MiB for Redis's default
// proto-max-bulk-len) is not stored, and counted: such a chunk is fetched
// from the origin by every node. Splitting values is left out on purpose:
// chunks are rarely that big once compressed, and a split value is a
// second way to be half written.
//
// # Single flight across the fleet (Redis)
//
// A node whose lookup misses takes a lease on the key (SET NX PX
// LeaseTTL) before it goes to the origin; its Put releases it and
// announces the value (PUBLISH). A node that finds the lease taken waits
// for that announcement, for at most LeaseWait, then reads the value, or
// goes to the origin itself. memcached has no lease: every node that misses
// goes to the origin.
//
// # Faults
//
// The tier is an optimisation. Every call to the engine has a deadline of
// Options.Timeout; an error or a deadline makes the lookup a miss and the
// write a no-op, and starts an outage: one log line, then no call to the
// engine for Options.Backoff, then one call that either ends the outage
// (one log line) or extends it. Outages are logged at most once a minute,
// so that a cluster with one node down, whose calls fail for a third of
// the keys, does not log at every flap. An outage starts after three failed calls
// in a row, so that one slow answer is only a miss. While an outage lasts
// a lookup costs nothing but the check of a clock.
//
// The URL may carry the tier's own settings as query parameters, each a
// Go duration: timeout, backoff, lease_ttl and lease_wait
// ("redis://h:6379?timeout=20ms&lease_wait=1s").
//
// All methods are safe for concurrent use.
package shared

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Environment variables read when the flags leave them out.
const (
	EnvSecret   = "VOLFS_SHARED_CACHE_SECRET"
	EnvPassword = "VOLFS_SHARED_CACHE_PASSWORD"
)

// Defaults of Options.
const (
	DefaultTimeout   = 50 * time.Millisecond
	DefaultBackoff   = time.Second
	DefaultLeaseTTL  = 2 * time.Second
	DefaultLeaseWait = 300 * time.Millisecond
	// memcacheMaxValue is memcached's default item limit (-I 1m) less
	// room for its item header and the key.
	memcacheMaxValue = 1<<20 - 512
	redisMaxValue    = 512 << 20
)

const (
	magic      = "VSC1"
	headerSize = 56
	codecRaw   = 0
	codecZstd  = 1
	flagHMAC   = 1
	keyPrefix  = "volfs1:"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true))
)

// Options configures a Tier.
type Options struct {
	// URL names the engine: redis://[:PASSWORD@]HOST:PORT[/DB],
	// rediss://... (TLS), redis+cluster://HOST:PORT[,HOST:PORT...] or
	// memcache://HOST:PORT[,HOST:PORT...].
	URL string
	// Password, when the URL has none, authenticates to Redis.
	Password string
	// RootCAs, when not nil, are the authorities a rediss:// engine's
	// certificate must chain to; nil means the system's (which
	// SSL_CERT_FILE and SSL_CERT_DIR can name).
	RootCAs *x509.CertPool
	// Secret, when not empty, signs every value written and refuses any
	// value read without the right signature.
	Secret []byte
	// Timeout bounds each call to the engine; zero means DefaultTimeout.
	Timeout time.Duration
	// Backoff is how long an outage skips the engine before trying it
	// again; zero means DefaultBackoff.
	Backoff time.Duration
	// LeaseTTL bounds how long a lease lasts when its holder never
	// releases it; LeaseWait, how long a node waits for another's
	// value. Zero means the defaults.
	LeaseTTL, LeaseWait time.Duration
	// MaxValue bounds a value stored; zero means the engine's default
	// item limit.
	MaxValue int
	// Log receives one line at the start and at the end of each outage;
	// nil means slog.Default().
	Log *slog.Logger
}

// engine is one distributed key-value engine.
type engine interface {
	name() string
	// get returns the value of key, or errMiss.
	get(ctx context.Context, key string) ([]byte, error)
	set(ctx context.Context, key string, val []byte) error
	close() error
}

// leaser is an engine with fleet-wide leases and announcements (Redis).
type leaser interface {
	// lease takes the lease of key for ttl; false when another holds it.
	lease(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// release drops the lease of key and announces that its value is set.
	release(ctx context.Context, key string) error
	// subscribe calls done with each key announced, until close.
	subscribe(done func(key string))
}

// errMiss is an engine's answer for a key it does not hold.
var errMiss = errors.New("shared: miss")

// Tier is a cache.Tier on a shared engine.
type Tier struct {
	eng    engine
	opts   Options
	log    *slog.Logger
	leases leaser // nil without leases

	downUntil atomic.Int64 // unix nanoseconds; the engine is skipped before it
	down      atomic.Bool  // an outage is on
	downSince atomic.Int64 // unix nanoseconds: when the outage began
	failing   atomic.Int64 // calls failed in a row
	logged    atomic.Bool  // the outage on was logged
	lastLog   atomic.Int64 // unix nanoseconds of the last outage logged

	// LOCK ORDERING: mu is held only to change waiters.
	mu      sync.Mutex
	waiters map[string][]chan struct{} // GUARDED_BY(mu); announcements awaited, by engine key
	held    map[string]time.Time       // GUARDED_BY(mu); leases this process holds, by engine key, and when taken

	stats stats
}

// Open connects to the engine opts.URL names (lazily: an engine down at
// Open is an outage, not an error) and returns the tier. A URL that is not
// understood is an error.
func Open(opts Options) (*Tier, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("shared: %q: %w", opts.URL, err)
	}
	// The tier's own settings, taken out of the URL before the engine's
	// client reads it.
	q := u.Query()
	for _, p := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"timeout", &opts.Timeout, DefaultTimeout},
		{"backoff", &opts.Backoff, DefaultBackoff},
		{"lease_ttl", &opts.LeaseTTL, DefaultLeaseTTL},
		{"lease_wait", &opts.LeaseWait, DefaultLeaseWait},
	} {
		if v := q.Get(p.name); v != "" && *p.d == 0 {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("shared: %s: %s=%q: want a positive duration", u.Redacted(), p.name, v)
			}
			*p.d = d
		}
		q.Del(p.name)
		*p.d = orDefault(*p.d, p.def)
	}
	u.RawQuery = q.Encode()
	t := &Tier{opts: opts, log: opts.Log, waiters: make(map[string][]chan struct{}), held: make(map[string]time.Time)}
	if t.log == nil {
		t.log = slog.Default()
	}
	switch u.Scheme {
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		r, err := openRedis(u, opts)
		if err != nil {
			return nil, err
		}
		t.eng, t.leases = r, r
		if t.opts.MaxValue == 0 {
			t.opts.MaxValue = redisMaxValue
		}
		r.subscribe(t.announced)
	case "memcache":
		m, err := openMemcache(u, opts)
		if err != nil {
			return nil, err
		}
		t.eng = m
		if t.opts.MaxValue == 0 {
			t.opts.MaxValue = memcacheMaxValue
		}
	default:
		return nil, fmt.Errorf("shared: %q: want redis://, rediss://, redis+cluster:// or memcache://", opts.URL)
	}
	return t, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// hosts splits the host list of a URL ("h1:p1,h2:p2").
func hosts(u *url.URL, scheme string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			continue
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("shared: %s URL names no host:port", scheme)
	}
	return out, nil
}

// Name names the tier by its engine: "redis" or "memcache".
func (t *Tier) Name() string { return t.eng.name() }

// Close closes the connections to the engine.
func (t *Tier) Close() error { return t.eng.close() }

// engineKey is the key of the store's key in the engine.
func engineKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return keyPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// Get returns the chunk kept under key if the engine has a sound value of
// size bytes that check accepts. On a miss of a Redis tier it takes the
// key's lease, or waits (LeaseWait at most) for the node that holds it.
func (t *Tier) Get(ctx context.Context, key string, size int64, check func([]byte) error) ([]byte, []byte, bool) {
	ek := engineKey(key)
	raw, ok := t.fetch(ctx, ek)
	if !ok && t.leases != nil && t.up() {
		raw, ok = t.awaitLease(ctx, ek)
	}
	if !ok {
		t.stats.misses.Add(1)
		return nil, nil, false
	}
	val, ident, err := t.unpack(key, raw, size)
	if err != nil {
		t.log.Debug("shared cache: value refused, fetching the chunk from the origin", "key", key, "err", err)
		t.stats.misses.Add(1)
		return nil, nil, false
	}
	if err := check(ident); err != nil {
		t.stats.stale.Add(1)
		t.stats.misses.Add(1)
		return nil, nil, false
	}
	t.stats.hits.Add(1)
	t.stats.hitBytes.Add(int64(len(val)))
	return val, ident, true
}

// fetch reads ek from the engine: false on a miss or a fault.
func (t *Tier) fetch(ctx context.Context, ek string) ([]byte, bool) {
	if !t.up() {
		t.stats.skipped.Add(1)
		return nil, false
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	start := time.Now()
	raw, err := t.eng.get(cctx, ek)
	t.stats.getLatency.observe(time.Since(start))
	if errors.Is(err, errMiss) {
		t.ok(start)
		return nil, false
	}
	if err != nil {
		t.fault(ctx, "get", err)
		return nil, false
	}
	t.ok(start)
	t.stats.readBytes.Add(int64(len(raw)))
	return raw, true
}

// awaitLease takes ek's lease (the caller then loads from the origin, and
// Put releases it), or, when another node holds it, waits for its value.
func (t *Tier) awaitLease(ctx context.Context, ek string) ([]byte, bool) {
	// Subscribe before asking, so that an announcement between the
	// lease's refusal and the wait is not lost.
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.waiters[ek] = append(t.waiters[ek], ch)
	t.mu.Unlock()
	defer t.unwait(ek, ch)

	cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	won, err := t.leases.lease(cctx, ek, t.opts.LeaseTTL)
	cancel()
	if err != nil {
		t.fault(ctx, "lease", err)
		return nil, false
	}
	if won {
		t.stats.leasesWon.Add(1)
		t.hold(ek)
		return nil, false
	}
	t.stats.leasesWaited.Add(1)
	timer := time.NewTimer(t.opts.LeaseWait)
	defer timer.Stop()
	select {
	case <-ch:
		return t.fetch(ctx, ek)
	case <-timer.C:
		// The holder may have finished without an announcement reaching
		// us (a subscription reconnecting): one last look.
		if raw, ok := t.fetch(ctx, ek); ok {
			return raw, true
		}
		t.stats.leasesTimedOut.Add(1)
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// maxHeld bounds the leases remembered: a load that fails (a missing
// chunk) never releases its lease, which expires in the engine after
// LeaseTTL; past maxHeld, those older than that are forgotten.
const maxHeld = 4096

// hold records that this process holds ek's lease.
func (t *Tier) hold(ek string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if len(t.held) >= maxHeld {
		for k, at := range t.held {
			if now.Sub(at) > t.opts.LeaseTTL {
				delete(t.held, k)
			}
		}
	}
	t.held[ek] = now
}

func (t *Tier) unwait(ek string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.waiters[ek]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(t.waiters, ek)
	} else {
		t.waiters[ek] = ws
	}
}

// announced wakes the waiters of ek, whose value another node has set.
func (t *Tier) announced(ek string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ch := range t.waiters[ek] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Put stores val, made from what ident describes, under key, and releases
// the key's lease if this process holds it. A value above MaxValue is not
// stored (counted as too large).
func (t *Tier) Put(key string, ident, val []byte) { _ = t.Keep(key, ident, val) }

// Keep is Put that says why a value was not stored: the engine is in an
// outage, the value is above MaxValue, or the engine refused the write
// (cache.Keeper).
func (t *Tier) Keep(key string, ident, val []byte) error {
	ek := engineKey(key)
	defer t.releaseLease(ek)
	if !t.up() {
		t.stats.skipped.Add(1)
		return fmt.Errorf("shared: %s is skipped after failed calls", t.eng.name())
	}
	v := t.pack(key, ident, val)
	if len(v) > t.opts.MaxValue {
		t.stats.tooLarge.Add(1)
		return fmt.Errorf("shared: a value of %d bytes is above the engine's limit of %d", len(v), t.opts.MaxValue)
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Timeout)
	defer cancel()
	start := time.Now()
	if err := t.eng.set(ctx, ek, v); err != nil {
		t.fault(context.Background(), "set", err)
		return fmt.Errorf("shared: %s: %w", t.eng.name(), err)
	}
	t.ok(start)
	t.stats.puts.Add(1)
	t.stats.writtenBytes.Add(int64(len(v)))
	return nil
}

// Release drops the lease of key, if this process holds it, when no Put
// follows the miss that took it (the origin failed, or the chunk is not
// to be kept): the nodes that wait for the value go to the origin at once
// instead of at the end of LeaseWait.
func (t *Tier) Release(key string) { t.releaseLease(engineKey(key)) }

// releaseLease drops ek's lease if this process holds it, announcing the
// value to the nodes that wait.
func (t *Tier) releaseLease(ek string) {
	if t.leases == nil {
		return
	}
	t.mu.Lock()
	_, held := t.held[ek]
	delete(t.held, ek)
	t.mu.Unlock()
	if !held || !t.up() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.Timeout)
	defer cancel()
	if err := t.leases.release(ctx, ek); err != nil {
		t.fault(context.Background(), "release", err)
	}
}

// up reports whether the engine may be called: no outage, or the outage's
// back-off is over.
func (t *Tier) up() bool {
	until := t.downUntil.Load()
	return until == 0 || time.Now().UnixNano() >= until
}

// outageAfter is how many calls in a row must fail to start an outage:
// one slow answer is a miss, not a reason to skip the engine.
const outageAfter = 3

// fault records a failed call. outageAfter of them in a row start an
// outage: it is logged, and the engine is skipped for Backoff. An error of
// the caller's own context (a reader that left) is no fault of the engine.
func (t *Tier) fault(ctx context.Context, op string, err error) {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return
	}
	t.stats.errors.Add(1)
	if t.failing.Add(1) < outageAfter && !t.down.Load() {
		return
	}
	now := time.Now()
	t.downUntil.Store(now.Add(t.opts.Backoff).UnixNano())
	if t.down.Swap(true) {
		return
	}
	t.downSince.Store(now.UnixNano())
	t.stats.outages.Add(1)
	if last := t.lastLog.Load(); last != 0 && now.Sub(time.Unix(0, last)) < logEvery {
		return // a flapping engine (a cluster with a node down) is logged once a minute
	}
	t.lastLog.Store(now.UnixNano())
	t.logged.Store(true)
	t.log.Warn("shared cache unreachable: reads go to the origin until it answers again", "engine", t.opts.URL, "op", op, "err", err)
}

// logEvery bounds the outages logged to one a minute.
const logEvery = time.Minute

// ok records a successful call started at start, ending an outage that
// began before it: a call in flight since before the outage proves
// nothing.
func (t *Tier) ok(start time.Time) {
	if t.failing.Load() != 0 {
		t.failing.Store(0)
	}
	if !t.down.Load() || start.UnixNano() <= t.downSince.Load() {
		return
	}
	if t.down.Swap(false) {
		t.downUntil.Store(0)
		if t.logged.Swap(false) {
			t.log.Warn("shared cache answers again", "engine", t.opts.URL)
		}
	}
}

// pack makes the stored value of val.
func (t *Tier) pack(key string, ident, val []byte) []byte {
	payload := encoder.EncodeAll(val, make([]byte, 0, len(val)/2+64))
	codec := byte(codecZstd)
	if len(payload) >= len(val) {
		payload, codec = val, codecRaw
	}
	v := make([]byte, headerSize, headerSize+len(ident)+len(payload))
	copy(v, magic)
	v[4] = codec
	if len(t.opts.Secret) > 0 {
		v[5] = flagHMAC
	}
	binary.LittleEndian.PutUint64(v[8:], uint64(len(val)))
	binary.LittleEndian.PutUint32(v[16:], uint32(len(ident)))
	v = append(append(v, ident...), payload...)
	binary.LittleEndian.PutUint32(v[20:], checksum(key, v))
	if len(t.opts.Secret) > 0 {
		copy(v[24:56], mac(t.opts.Secret, key, v))
	}
	return v
}

// unpack checks the stored value raw of key and returns its chunk, of
// size bytes, and identity record.
func (t *Tier) unpack(key string, raw []byte, size int64) (val, ident []byte, err error) {
	if len(raw) < headerSize || string(raw[:4]) != magic {
		t.stats.corrupt.Add(1)
		return nil, nil, errors.New("shared: not a value of volfs")
	}
	if binary.LittleEndian.Uint32(raw[20:]) != checksum(key, raw) {
		t.stats.corrupt.Add(1)
		return nil, nil, errors.New("shared: checksum mismatch")
	}
	if len(t.opts.Secret) > 0 && (raw[5]&flagHMAC == 0 || !hmac.Equal(raw[24:56], mac(t.opts.Secret, key, raw))) {
		t.stats.forged.Add(1)
		return nil, nil, errors.New("shared: value not signed with the fleet's secret")
	}
	n := binary.LittleEndian.Uint64(raw[8:])
	il := uint64(binary.LittleEndian.Uint32(raw[16:]))
	if n != uint64(size) || il > uint64(len(raw)-headerSize) {
		t.stats.corrupt.Add(1)
		return nil, nil, fmt.Errorf("shared: value of %d bytes, want %d", n, size)
	}
	ident = raw[headerSize : headerSize+il]
	payload := raw[headerSize+il:]
	switch raw[4] {
	case codecRaw:
		val = payload
	case codecZstd:
		val, err = decoder.DecodeAll(payload, make([]byte, 0, size))
		if err != nil {
			t.stats.corrupt.Add(1)
			return nil, nil, fmt.Errorf("shared: zstd: %w", err)
		}
	default:
		t.stats.corrupt.Add(1)
		return nil, nil, fmt.Errorf("shared: unknown codec %d", raw[4])
	}
	if int64(len(val)) != size {
		t.stats.corrupt.Add(1)
		return nil, nil, fmt.Errorf("shared: decoded %d bytes, want %d", len(val), size)
	}
	return val, ident, nil
}

// checksum is the CRC-32C of key and the value v but its checksum and MAC.
func checksum(key string, v []byte) uint32 {
	c := crc32.Checksum([]byte(key), castagnoli)
	c = crc32.Update(c, castagnoli, v[:20])
	return crc32.Update(c, castagnoli, v[headerSize:])
}

// mac is the HMAC-SHA256 under secret of key and the value v but its MAC.
func mac(secret []byte, key string, v []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(key))
	h.Write(v[:24])
	h.Write(v[headerSize:])
	return h.Sum(nil)
}

// SecretFrom returns the secret given by flag, else by EnvSecret; nil if
// neither.
func SecretFrom(flag string) []byte {
	if flag == "" {
		flag = os.Getenv(EnvSecret)
	}
	if flag == "" {
		return nil
	}
	return bytes.Clone([]byte(flag))
}
