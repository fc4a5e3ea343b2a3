// Package shared is a tier of the chunk store (cache.Tier) kept on a
// distributed engine that a fleet of mounts shares: Redis (standalone,
// TLS, or a Redis Cluster) or memcached. A chunk one node decoded is
// served to every other node from the engine, so that the fleet fetches
// each chunk from the origin about once.
//
// # Values
//
// A value is an envelope (cache/envelope) of magic "VSC2": the decoded
// chunk, compressed with zstd level 1 (or stored as given where that is
// not smaller), with the store's key and the identity record of what it
// was made from, behind a header that states every length and a MAC over
// the header, key, identity and the payload's CRC-32C. Without a secret
// the MAC is keyed with nothing: a checksum. With one
// (--shared-cache-secret), it is keyed with the secret, and a value
// without the right one is refused as forged, so that another client of
// the engine cannot make the fleet serve bytes of its choosing; without
// one, the tier trusts every client that can write to the engine.
//
// A value that fails its check is a miss (the store fetches the chunk
// from the origin), never served. A value refused for its signature is
// counted (Forged), logged once and then at most once a minute with the
// fix, and not overwritten by this node: a node whose secret is wrong
// must not replace the fleet's values with ones the other nodes refuse.
//
// A reply is refused before it is read when it declares more than the
// largest value volfs writes for the chunk asked for (envelope.MaxLen of
// its size, and never more than MaxValue): Redis is asked for that many
// bytes at most (GETRANGE), and the framing of every reply is checked on
// the wire against the largest of the lookups in flight (respConn), so
// that an engine declaring a value of a terabyte costs one refused read,
// not the process; memcached's client checks each item against its own
// lookup's bound.
//
// # Keys
//
// A chunk's key in the engine is "volfs2:" and the SHA-256 (base64url) of
// the store's key, which names the source and the chunk; the identity
// record of the source objects (ETag, generation, size and mtime) travels
// in the value and is checked by the store before the value is served, so
// two datasets never share an entry and a rewritten object is never served.
//
// # Sizes
//
// A value above MaxValue (512 MiB for Redis's default proto-max-bulk-len)
// is not stored, and counted: such a chunk is fetched from the origin by
// every node. memcached stores a value above its item limit as several
// items and a manifest (see memcacheEngine).
//
// # Single flight across the fleet
//
// A node whose lookup misses takes a lease on the key (Redis: SET NX PX
// with a random token; memcached: add) before it goes to the origin, and
// renews it every LeaseTTL/3 while it fetches and decodes; its Put
// releases it by compare-and-delete (a Lua script; memcached: cas) and
// announces the value (Redis: PUBLISH). A node that finds the lease taken
// waits as long as the lease lives: it reads the value when it is
// announced (memcached: it polls, every 5 ms at first, then up to every
// 100 ms). It goes to the origin when the holder releases the lease
// without a value (its load failed, or the value could not be stored) or
// the engine fails; when the lease lapses (its holder died) it tries to
// take the lease itself. The wait is bounded by the reader's context and
// the holder's renewals (at most 10 minutes: maxRenewal), never by a fixed
// time shorter than a fetch.
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
// Go duration: timeout, backoff and lease_ttl
// ("redis://h:6379?timeout=20ms&lease_ttl=5s"). lease_wait, of earlier
// versions, is accepted and ignored. The URL is logged and reported in
// errors without its password (url.URL.Redacted).
//
// All methods are safe for concurrent use.
package shared

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/volfs/volfs/cache/envelope"
)

// Environment variables read when the flags leave them out.
const (
	EnvSecret   = "VOLFS_SHARED_CACHE_SECRET"
	EnvPassword = "VOLFS_SHARED_CACHE_PASSWORD"
)

// Defaults of Options.
const (
	DefaultTimeout  = 50 * time.Millisecond
	DefaultBackoff  = time.Second
	DefaultLeaseTTL = 2 * time.Second
	redisMaxValue   = 512 << 20
	// memcacheMaxValue bounds a value stored on memcached, in parts.
	memcacheMaxValue = 512 << 20
)

const (
	magic     = "VSC2"
	keyPrefix = "volfs2:"
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
	// LeaseTTL is how long a lease lasts unless its holder renews it
	// (every LeaseTTL/3 while it loads): how long the fleet waits for a
	// node that died holding one. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MaxValue bounds a value stored, and read; zero means the engine's
	// default.
	MaxValue int
	// Log receives one line at the start and at the end of each outage;
	// nil means slog.Default().
	Log *slog.Logger
}

// engine is one distributed key-value engine with fleet-wide leases.
type engine interface {
	name() string
	// get returns the value of key, refusing one above max bytes
	// without reading it; errMiss when there is none.
	get(ctx context.Context, key string, max int64) ([]byte, error)
	set(ctx context.Context, key string, val []byte) error
	// lease takes the lease of key for ttl under token; false when
	// another holds it.
	lease(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// renew extends the lease of key for ttl if token holds it.
	renew(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// release drops the lease of key if token holds it, and announces
	// the key; gaveUp says no value was set (the load failed).
	release(ctx context.Context, key, token string, gaveUp bool) error
	// leased reports who holds the lease of key.
	leased(ctx context.Context, key string) (leaseState, error)
	// announces reports whether subscribe delivers announcements;
	// without them waiters poll.
	announces() bool
	// subscribe calls done with each key announced, until close.
	subscribe(done func(key string))
	ping(ctx context.Context) error
	close() error
}

// errMiss is an engine's answer for a key it does not hold.
var errMiss = errors.New("shared: miss")

// Tier is a cache.Tier on a shared engine.
type Tier struct {
	eng  engine
	opts Options
	url  string // opts.URL without its password, for logs and errors
	log  *slog.Logger

	health

	// LOCK ORDERING: mu is held only to change waiters, held and
	// unverified.
	mu         sync.Mutex
	waiters    map[string][]chan struct{} // GUARDED_BY(mu); announcements awaited, by engine key
	held       map[string]*heldLease      // GUARDED_BY(mu); leases this process holds, by engine key
	unverified map[string]struct{}        // GUARDED_BY(mu); engine keys whose value failed its signature

	stats stats
}

// Open connects to the engine opts.URL names (lazily: an engine down at
// Open is an outage, not an error) and returns the tier. A URL that is not
// understood is an error, which never shows its password.
func Open(opts Options) (*Tier, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, fmt.Errorf("shared: the engine's URL: %w", err)
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
		{"lease_wait", new(time.Duration), time.Second},
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
	t := &Tier{opts: opts, url: u.Redacted(), log: opts.Log, waiters: make(map[string][]chan struct{}),
		held: make(map[string]*heldLease), unverified: make(map[string]struct{})}
	if t.log == nil {
		t.log = slog.Default()
	}
	switch u.Scheme {
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		if t.opts.MaxValue == 0 {
			t.opts.MaxValue = redisMaxValue
		}
		r, err := openRedis(u, opts, int64(t.opts.MaxValue))
		if err != nil {
			return nil, err
		}
		t.eng = r
	case "memcache":
		if t.opts.MaxValue == 0 {
			t.opts.MaxValue = memcacheMaxValue
		}
		m, err := openMemcache(u, func(msg string, args ...any) { t.log.Info(msg, append(args, "engine", t.url)...) })
		if err != nil {
			return nil, err
		}
		t.eng = m
	default:
		return nil, fmt.Errorf("shared: %s: want redis://, rediss://, redis+cluster:// or memcache://", u.Redacted())
	}
	t.eng.subscribe(t.announced)
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

// URL returns the engine's URL without its password.
func (t *Tier) URL() string { return t.url }

// Signed reports whether the tier signs and checks values with a secret.
func (t *Tier) Signed() bool { return len(t.opts.Secret) > 0 }

// Ping asks the engine (every server of a memcached pool) whether it
// answers, within the tier's deadline.
func (t *Tier) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(t.opts.Timeout, time.Second))
	defer cancel()
	return t.eng.ping(ctx)
}

// Close stops the renewal of the leases held and closes the connections
// to the engine.
func (t *Tier) Close() error {
	t.mu.Lock()
	for ek, l := range t.held {
		close(l.stop)
		delete(t.held, ek)
	}
	t.mu.Unlock()
	return t.eng.close()
}

// engineKey is the key of the store's key in the engine.
func engineKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return keyPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// readBound is the most bytes the engine may send for a chunk of size.
func (t *Tier) readBound(key string, size int64) int64 {
	return min(envelope.MaxLen(key, size), int64(t.opts.MaxValue))
}

// Get returns the chunk kept under key if the engine has a sound value of
// size bytes that check accepts. On a miss it takes the key's lease (the
// store then loads the chunk from the origin, and Put or Release lets the
// lease go), or waits for the node that holds it (see "Single flight").
func (t *Tier) Get(ctx context.Context, key string, size int64, check func([]byte) error) ([]byte, []byte, bool) {
	ek := engineKey(key)
	bound := t.readBound(key, size)
	raw, ok := t.fetch(ctx, ek, bound)
	if !ok && t.up() {
		raw, _, ok = t.awaitLease(ctx, ek, bound)
	}
	if !ok {
		t.stats.misses.Add(1)
		return nil, nil, false
	}
	val, ident, err := t.unpack(ek, key, raw, size)
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

// fetch reads ek, at most bound bytes, from the engine: false on a miss or
// a fault.
func (t *Tier) fetch(ctx context.Context, ek string, bound int64) ([]byte, bool) {
	if !t.up() {
		t.stats.skipped.Add(1)
		return nil, false
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	start := time.Now()
	raw, err := t.eng.get(cctx, ek, bound)
	t.stats.getLatency.observe(time.Since(start))
	switch {
	case errors.Is(err, errMiss):
		t.ok(start)
		return nil, false
	case errors.Is(err, errCorruptValue):
		t.ok(start)
		t.refusedCorrupt(err)
		return nil, false
	case errors.Is(err, errDeclared):
		t.stats.refused.Add(1)
		t.fault(ctx, "get", err)
		return nil, false
	case err != nil:
		t.fault(ctx, "get", err)
		return nil, false
	}
	t.ok(start)
	t.stats.readBytes.Add(int64(len(raw)))
	return raw, true
}

// Put stores val, made from what ident describes, under key, and releases
// the key's lease if this process holds it. A value above MaxValue is not
// stored (counted as too large), nor one over a value this node could not
// verify (a node with a wrong secret must not replace the fleet's values).
func (t *Tier) Put(key string, ident, val []byte) { _ = t.Keep(key, ident, val) }

// Keep is Put that says why a value was not stored: the engine is in an
// outage, the value is above MaxValue, the entry there could not be
// verified by this node, or the engine refused the write (cache.Keeper).
func (t *Tier) Keep(key string, ident, val []byte) error {
	return t.keep(key, anyHolder, ident, val)
}

// keep is Keep that lets go the lease of key held under token (see
// releaseLease).
func (t *Tier) keep(key, token string, ident, val []byte) error {
	ek := engineKey(key)
	stored := false
	defer func() { t.releaseLease(ek, token, stored) }()
	if !t.up() {
		t.stats.skipped.Add(1)
		return fmt.Errorf("shared: %s is skipped after failed calls", t.eng.name())
	}
	t.mu.Lock()
	_, unverified := t.unverified[ek]
	t.mu.Unlock()
	if unverified {
		t.stats.notOverwritten.Add(1)
		return errors.New("shared: the entry in the engine could not be verified with this node's secret, so it is left in place")
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
	stored = true
	t.stats.puts.Add(1)
	t.stats.writtenBytes.Add(int64(len(v)))
	return nil
}

// pack makes the stored value of val.
func (t *Tier) pack(key string, ident, val []byte) []byte {
	form, payload := envelope.Compress(val)
	return envelope.Seal(magic, t.opts.Secret, key, ident, form, payload)
}

// unpack checks the stored value raw of key (engine key ek) and returns
// its chunk, of size bytes, and identity record.
func (t *Tier) unpack(ek, key string, raw []byte, size int64) (val, ident []byte, err error) {
	ident, payload, form, err := envelope.Open(magic, t.opts.Secret, key, size, raw)
	if err == nil {
		val, err = envelope.Decode(form, payload, size)
	}
	switch {
	case err == nil:
		return val, ident, nil
	case errors.Is(err, envelope.ErrSignature):
		t.refusedSignature(ek, err)
	default:
		t.refusedCorrupt(err)
	}
	return nil, nil, fmt.Errorf("shared: %w", err)
}

// maxUnverified bounds the engine keys remembered as not to overwrite.
const maxUnverified = 1 << 16

// refusedSignature counts a value refused for its signature, remembers
// not to overwrite it, and logs it once, then at most once a minute.
func (t *Tier) refusedSignature(ek string, err error) {
	n := t.stats.forged.Add(1)
	t.mu.Lock()
	if len(t.unverified) >= maxUnverified {
		clear(t.unverified)
	}
	t.unverified[ek] = struct{}{}
	t.mu.Unlock()
	now := time.Now().UnixNano()
	last := t.lastForgedLog.Load()
	if last != 0 && now-last < int64(logEvery) || !t.lastForgedLog.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn("shared cache: values refused as not signed with this node's secret; this node reads them from the origin and leaves them in place: check --shared-cache-secret (or "+EnvSecret+") on every node",
		"engine", t.url, "refused", n, "signed", t.Signed(), "err", err)
}

// refusedCorrupt counts a value refused as damaged or not volfs's (cut
// short, another key's, garbage written by another client of the engine),
// and logs it once, then at most once a minute: the chunk is read from the
// origin and written over it.
func (t *Tier) refusedCorrupt(err error) {
	n := t.stats.corrupt.Add(1)
	now := time.Now().UnixNano()
	last := t.lastCorruptLog.Load()
	if last != 0 && now-last < int64(logEvery) || !t.lastCorruptLog.CompareAndSwap(last, now) {
		return
	}
	t.log.Warn("shared cache: values refused as damaged or not written by volfs; the chunks are read from the origin and written again",
		"engine", t.url, "refused", n, "err", err)
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

// health is the tier's record of the engine's faults and outages.
type health struct {
	downUntil     atomic.Int64 // unix nanoseconds; the engine is skipped before it
	down          atomic.Bool  // an outage is on
	downSince     atomic.Int64 // unix nanoseconds: when the outage began
	failing       atomic.Int64 // calls failed in a row
	logged        atomic.Bool  // the outage on was logged
	lastLog       atomic.Int64 // unix nanoseconds of the last outage logged
	lastForgedLog atomic.Int64 // unix nanoseconds of the last refused signature logged
	// lastCorruptLog is lastForgedLog of values refused as corrupt.
	lastCorruptLog atomic.Int64
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
	t.log.Warn("shared cache unreachable: reads go to the origin until it answers again", "engine", t.url, "op", op, "err", err)
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
			t.log.Warn("shared cache answers again", "engine", t.url)
		}
	}
}
