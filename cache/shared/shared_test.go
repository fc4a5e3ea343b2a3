package shared

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volfs/volfs/cache/envelope"
	"github.com/volfs/volfs/internal/testenv"
)

// logBuffer collects a tier's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer // GUARDED_BY(mu)
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func open(t *testing.T, opts Options) (*Tier, *logBuffer) {
	t.Helper()
	logs := new(logBuffer)
	opts.Log = slog.New(slog.NewTextHandler(logs, nil))
	tier, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	return tier, logs
}

// engineURL starts a real engine of kind, "redis" or "memcache", for the
// test, and returns its URL.
func engineURL(t *testing.T, kind string) string {
	t.Helper()
	if kind == "redis" {
		return "redis://" + testenv.StartRedis(t).Addr
	}
	return "memcache://" + testenv.StartMemcached(t).Addr
}

func accept([]byte) error { return nil }

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestRoundTrip puts values into a real redis-server and memcached and
// reads them back: compressible ones stored as zstd, random ones raw, with
// and without a secret; a lookup of another size misses.
func TestRoundTrip(t *testing.T) {
	engines := map[string]string{"redis": engineURL(t, "redis"), "memcache": engineURL(t, "memcache")}
	for name, u := range engines {
		for _, secret := range []string{"", "s3cret"} {
			tier, _ := open(t, Options{URL: u, Secret: []byte(secret)})
			for _, tc := range []struct {
				name string
				val  []byte
			}{
				{"zeros", make([]byte, 256<<10)},
				{"random", random(100 << 10)},
				{"empty", nil},
			} {
				key := name + secret + tc.name
				ident := []byte("etag:" + tc.name)
				tier.Put(key, ident, tc.val)
				got, gotIdent, ok := tier.Get(context.Background(), key, int64(len(tc.val)), accept)
				if !ok || !bytes.Equal(got, tc.val) || !bytes.Equal(gotIdent, ident) {
					t.Errorf("%s %q %s: got %d bytes, %q, %v; want %d bytes, %q", name, secret, tc.name, len(got), gotIdent, ok, len(tc.val), ident)
				}
				if _, _, ok := tier.Get(context.Background(), key, int64(len(tc.val))+1, accept); ok {
					t.Errorf("%s %s: served at another size", name, tc.name)
				}
			}
			if st := tier.Stats(); st.Puts != 3 || st.Corrupt != 3 || st.Errors != 0 {
				t.Errorf("%s: stats %+v, want 3 puts, 3 refused for their size, no errors", name, st)
			}
			if st := tier.Stats(); st.WrittenBytes >= 256<<10 {
				t.Errorf("%s: %d bytes written for 256 KiB of zeros and 100 KiB random: the zeros were not compressed", name, st.WrittenBytes)
			}
		}
	}
}

// TestConnect reaches engines that ask more than an address: a Redis with
// a password (in the URL, or from Options.Password, which cmd/volfs fills
// from VOLFS_SHARED_CACHE_PASSWORD), and one that speaks TLS only
// (rediss://, a certificate of the test's own authority). A wrong
// password is an outage, not a hit.
func TestConnect(t *testing.T) {
	pw := testenv.StartRedis(t, "--requirepass", "pa55")
	cert, key, pool := selfSigned(t)
	tlsEngine := testenv.StartRedisTLS(t, cert, key)
	for _, tc := range []struct {
		name string
		opts Options
		want bool
	}{
		{"password in the URL", Options{URL: "redis://:pa55@" + pw.Addr}, true},
		{"password from the environment", Options{URL: "redis://" + pw.Addr, Password: "pa55"}, true},
		{"wrong password", Options{URL: "redis://:nope@" + pw.Addr}, false},
		// A TLS handshake under -race takes longer than the default deadline.
		{"tls", Options{URL: "rediss://" + tlsEngine.Addr, RootCAs: pool, Timeout: 5 * time.Second}, true},
		{"tls, unknown authority", Options{URL: "rediss://" + tlsEngine.Addr, Timeout: 5 * time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tier, _ := open(t, tc.opts)
			val := random(1000)
			tier.Put("k", []byte("id"), val)
			_, _, ok := tier.Get(context.Background(), "k", int64(len(val)), accept)
			if ok != tc.want {
				t.Errorf("hit: got %v, want %v (stats %+v)", ok, tc.want, tier.Stats())
			}
			if st := tier.Stats(); !tc.want && st.Errors == 0 {
				t.Errorf("no error counted: %+v", st)
			}
		})
	}
}

// selfSigned writes a certificate for 127.0.0.1, signed by itself, and its
// key, and returns their files and a pool that trusts it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "volfs test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	// Readable by redis-server, which may run as another user.
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// TestCorruptAndForged damages a value in the engine (a bit flipped by
// another client) and plants one not signed with the fleet's secret: both
// are refused, never served, and counted.
func TestCorruptAndForged(t *testing.T) {
	u := "redis://" + testenv.StartRedis(t).Addr
	signed, _ := open(t, Options{URL: u, Secret: []byte("fleet")})
	unsigned, _ := open(t, Options{URL: u})
	val := random(64 << 10)
	ctx := context.Background()

	signed.Put("a", []byte("id"), val)
	raw, err := signed.eng.get(ctx, engineKey("a"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{5, 9, 30, len(raw) - 1} {
		bad := bytes.Clone(raw)
		bad[off] ^= 0x10
		if err := signed.eng.set(ctx, engineKey("a"), bad); err != nil {
			t.Fatal(err)
		}
		if got, _, ok := signed.Get(ctx, "a", int64(len(val)), accept); ok {
			t.Errorf("byte %d flipped: served %d bytes", off, len(got))
		}
	}
	for _, n := range []int{0, 10, envelope.HeaderSize, len(raw) / 2, len(raw) - 1} {
		if err := signed.eng.set(ctx, engineKey("a"), raw[:n]); err != nil {
			t.Fatal(err)
		}
		if got, _, ok := signed.Get(ctx, "a", int64(len(val)), accept); ok {
			t.Errorf("truncated to %d bytes: served %d bytes", n, len(got))
		}
	}
	// The value cut to nothing is a miss (an empty value is no value);
	// the others are refused.
	if st := signed.Stats(); st.Corrupt+st.Forged != 8 || st.Misses != 9 {
		t.Errorf("refused: %+v, want 8 corrupt or forged in 9 misses", st)
	}

	// A well-formed value with a valid checksum, written without the
	// secret: the signed tier refuses it, the unsigned one serves it.
	forged := bytes.Repeat([]byte{0x66}, len(val))
	unsigned.Put("b", []byte("id"), forged)
	if got, _, ok := signed.Get(ctx, "b", int64(len(forged)), accept); ok {
		t.Errorf("a value without the fleet's HMAC was served: %d bytes", len(got))
	}
	if st := signed.Stats(); st.Forged < 1 {
		t.Errorf("forged: got %d, want at least 1", st.Forged)
	}
	if _, _, ok := unsigned.Get(ctx, "b", int64(len(forged)), accept); !ok {
		t.Error("the unsigned tier missed its own value")
	}
}

// TestCollector registers a tier in a pedantic registry, which checks
// its descriptions against its metrics, and reads a hit back.
func TestCollector(t *testing.T) {
	tier, _ := open(t, Options{URL: "redis://" + testenv.StartRedis(t).Addr})
	val := random(100)
	tier.Put("k", []byte("id"), val)
	tier.Get(context.Background(), "k", int64(len(val)), accept)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(tier); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] = m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{"volfs_shared_hits_total": 1, "volfs_shared_puts_total": 1, "volfs_shared_saved_bytes_total": 100} {
		if got[name] != want {
			t.Errorf("%s: got %v, want %v", name, got[name], want)
		}
	}
}

// TestMemcacheParts: a value above memcached's item limit is stored as
// parts and a manifest, and read back whole; a part damaged or evicted is
// a miss, never wrong bytes.
func TestMemcacheParts(t *testing.T) {
	e := testenv.StartMemcached(t)
	tier, logs := open(t, Options{URL: "memcache://" + e.Addr, Timeout: 5 * time.Second})
	ctx := context.Background()
	val := random(5<<20 + 123)
	tier.Put("big", []byte("id"), val)
	got, _, ok := tier.Get(ctx, "big", int64(len(val)), accept)
	if !ok || !bytes.Equal(got, val) {
		t.Fatalf("a value of 5 MiB: got %d bytes, %v", len(got), ok)
	}
	if st := tier.Stats(); st.TooLarge != 0 || st.Errors != 0 || st.Puts != 1 {
		t.Errorf("stats %+v, want 1 put, none too large, no errors", st)
	}
	if n := logs.count("item limit read"); n != 1 {
		t.Errorf("item limit logged %d times, want once\n%s", n, logs.b.String())
	}

	m := tier.eng.(*memcacheEngine)
	ek := engineKey("big")
	man, err := m.get(ctx, ek+"-raw", 1) // nothing there: a miss
	if !errors.Is(err, errMiss) || man != nil {
		t.Fatalf("get of a missing key: %v", err)
	}
	var manifest []byte
	m.do(ctx, ek, func(c *mcConn) error {
		items, err := c.retrieve("get", []string{ek}, func(string, int64) bool { return true })
		if len(items) == 1 {
			manifest = items[0].val
		}
		return err
	})
	if len(manifest) != manifestSize {
		t.Fatalf("manifest of %d bytes, want %d", len(manifest), manifestSize)
	}
	gen := hex.EncodeToString(manifest[20:36])
	// A part of the right length but other bytes: the envelope's check
	// refuses the whole.
	part1 := partKey(ek, gen, 1)
	var orig []byte
	m.do(ctx, ek, func(c *mcConn) error {
		items, err := c.retrieve("get", []string{part1}, func(string, int64) bool { return true })
		orig = items[0].val
		return err
	})
	bad := bytes.Clone(orig)
	bad[100] ^= 1
	m.do(ctx, ek, func(c *mcConn) error { return c.store("set", part1, 0, bad, 0) })
	if _, _, ok := tier.Get(ctx, "big", int64(len(val)), accept); ok {
		t.Error("served a value with a damaged part")
	}
	// A part of another length is refused before it is read.
	m.do(ctx, ek, func(c *mcConn) error { return c.store("set", part1, 0, orig[:10], 0) })
	if _, _, ok := tier.Get(ctx, "big", int64(len(val)), accept); ok {
		t.Error("served a value with a short part")
	}
	if st := tier.Stats(); st.Corrupt != 1 || st.Refused < 1 {
		t.Errorf("stats %+v, want 1 corrupt (the damaged part), the short one refused", st)
	}
}

// TestOutage kills the engine: lookups miss at once and writes are
// dropped, with one log line for the outage however many calls fail;
// the engine restarted, the next call ends the outage (one line) and the
// tier serves again.
func TestOutage(t *testing.T) {
	for _, kind := range []string{"redis", "memcache"} {
		t.Run(kind, func(t *testing.T) {
			var e *testenv.Engine
			if kind == "redis" {
				e = testenv.StartRedis(t)
			} else {
				e = testenv.StartMemcached(t)
			}
			// A back-off of 1ns tries the engine at every call, so the
			// test needs no clock: each call fails or succeeds.
			tier, logs := open(t, Options{URL: kind + "://" + e.Addr, Backoff: time.Nanosecond})
			ctx := context.Background()
			val := random(1000)
			tier.Put("k", []byte("id"), val)
			e.Kill()
			for range 20 {
				if _, _, ok := tier.Get(ctx, "k", int64(len(val)), accept); ok {
					t.Fatal("served with the engine killed")
				}
				tier.Put("k", []byte("id"), val)
			}
			if n := logs.count("shared cache unreachable"); n != 1 {
				t.Errorf("outage log lines: got %d, want 1\n%s", n, logs.b.String())
			}
			if st := tier.Stats(); st.Errors < 20 || st.Outages != 1 {
				t.Errorf("stats %+v, want at least 20 errors in 1 outage", st)
			}
			e.Restart()
			// go-redis redials a pool whose dials all failed once a second
			// in the background: a bounded wait for that state.
			deadline := time.Now().Add(time.Minute)
			for {
				tier.Put("k", []byte("id"), val)
				if _, _, ok := tier.Get(ctx, "k", int64(len(val)), accept); ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the restarted engine did not serve the value put again within a minute")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n := logs.count("shared cache answers again"); n != 1 {
				t.Errorf("recovery log lines: got %d, want 1", n)
			}
		})
	}
}

// TestLease, on Redis and memcached: of two nodes that miss the same key,
// the first takes the lease and the second waits for its value instead of
// going to the origin, for as long as the holder works (it renews its
// lease: the wait here is many times the lease's TTL); a holder whose load
// fails releases the lease and the waiter goes to the origin at once; a
// holder that dies lets its lease lapse, and a waiter then takes it.
func TestLease(t *testing.T) {
	for _, kind := range []string{"redis", "memcache"} {
		t.Run(kind, func(t *testing.T) {
			u := engineURL(t, kind)
			ttl := 300 * time.Millisecond
			if kind == "memcache" {
				ttl = time.Second // memcached's expiry counts whole seconds
			}
			opts := Options{URL: u, LeaseTTL: ttl, Timeout: time.Second}
			a, _ := open(t, opts)
			b, _ := open(t, opts)
			ctx := context.Background()
			val := random(5000)
			if _, _, ok := a.Get(ctx, "k", int64(len(val)), accept); ok {
				t.Fatal("hit in an empty engine")
			}
			got := make(chan bool, 1)
			go func() {
				_, _, ok := b.Get(ctx, "k", int64(len(val)), accept)
				got <- ok
			}()
			// The holder works for five times the lease's TTL.
			select {
			case ok := <-got:
				t.Fatalf("the waiter gave up (hit %v) while the holder's lease lived", ok)
			case <-time.After(5 * ttl):
			}
			a.Put("k", []byte("id"), val)
			if !<-got {
				t.Error("the waiting node did not get the lease holder's value")
			}
			if sa, sb := a.Stats(), b.Stats(); sa.LeasesWon != 1 || sa.LeasesRenewed < 3 || sb.LeasesWaited != 1 || sb.LeasesTimedOut != 0 || sb.Hits != 1 {
				t.Errorf("holder %+v, waiter %+v: want 1 lease won and renewed, 1 waited, 0 timed out, 1 hit", sa, sb)
			}

			// A holder whose origin load fails releases the lease without
			// a value: the waiter goes to the origin at once.
			if _, _, ok := a.Get(ctx, "failed", 10, accept); ok {
				t.Fatal("hit in an empty engine")
			}
			go func() {
				_, _, ok := b.Get(ctx, "failed", 10, accept)
				got <- ok
			}()
			testenv.WaitBlocked(t, "github.com/volfs/volfs/cache/shared.(*Tier).waitValue", 1)
			start := time.Now()
			a.Release("failed")
			if <-got {
				t.Error("a value nobody wrote was served")
			}
			if d := time.Since(start); d > ttl {
				t.Errorf("the waiter went to the origin %v after the release, want less than the lease's TTL", d)
			}
			if st := b.Stats(); st.LeasesWaited != 2 || st.LeasesTimedOut != 1 || st.LeasesWon != 0 {
				t.Errorf("waiter %+v: want 2 waits, 1 without a value, no lease", st)
			}

			// A holder that dies (closed without releasing): its lease
			// lapses and the waiter takes it.
			c, _ := open(t, opts)
			if _, _, ok := c.Get(ctx, "lost", 10, accept); ok {
				t.Fatal("hit in an empty engine")
			}
			c.Close()
			start = time.Now()
			if _, _, ok := b.Get(ctx, "lost", 10, accept); ok {
				t.Fatal("a value nobody wrote was served")
			}
			if st := b.Stats(); st.LeasesLapsed != 1 || st.LeasesWon != 1 {
				t.Errorf("waiter %+v: want 1 lease lapsed, then won", st)
			}
			if d := time.Since(start); d > 3*ttl+time.Second {
				t.Errorf("the lapsed lease took %v to notice", d)
			}
			b.Release("lost")
		})
	}
}

// TestLeaseToken: a release by a node whose lease lapsed and was taken by
// another leaves the other's lease alone (compare-and-delete).
func TestLeaseToken(t *testing.T) {
	for _, kind := range []string{"redis", "memcache"} {
		t.Run(kind, func(t *testing.T) {
			u := engineURL(t, kind)
			tier, _ := open(t, Options{URL: u, Timeout: time.Second})
			ctx := context.Background()
			ek := engineKey("k")
			if won, err := tier.eng.lease(ctx, ek, "first", time.Minute); !won || err != nil {
				t.Fatalf("lease: %v, %v", won, err)
			}
			if err := tier.eng.release(ctx, ek, "second", false); err != nil {
				t.Fatal(err)
			}
			if st, err := tier.eng.leased(ctx, ek); st != leaseHeld || err != nil {
				t.Errorf("after another token's release: %v, %v; want the lease held", st, err)
			}
			if ok, err := tier.eng.renew(ctx, ek, "second", time.Minute); ok || err != nil {
				t.Errorf("another token renewed the lease: %v, %v", ok, err)
			}
			if err := tier.eng.release(ctx, ek, "first", false); err != nil {
				t.Fatal(err)
			}
			if st, err := tier.eng.leased(ctx, ek); st != leaseNone || err != nil {
				t.Errorf("after its holder's release: %v, %v; want no lease", st, err)
			}
		})
	}
}

// testTime is a fixed modification time for the benchmarks' origin.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// discardLog drops what the tier logs.
var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestPasswordRedacted: the engine's password appears in no log line and
// no error, whether the URL cannot be parsed, names an unknown scheme, or
// names an engine that refuses the password or is down.
func TestPasswordRedacted(t *testing.T) {
	const pw = "hunter2secret"
	for _, u := range []string{"redis://:" + pw + "@127.0.0.1:6379/%zz", "redis://:" + pw + "@127.0.0.1:6379/?timeout=bad", "ftp://:" + pw + "@host/"} {
		if _, err := Open(Options{URL: u}); err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("%s: error %v, want one without the password", u, err)
		}
	}
	live := testenv.StartRedis(t, "--requirepass", "other")
	for _, u := range []string{"redis://:" + pw + "@" + live.Addr, "redis://:" + pw + "@" + testenv.FreeAddr(t)} {
		tier, logs := open(t, Options{URL: u, Backoff: time.Nanosecond})
		for range 5 {
			tier.Get(context.Background(), "k", 10, accept)
			tier.Put("k", nil, []byte("x"))
		}
		err := tier.Ping(context.Background())
		if logs.count("shared cache unreachable") != 1 || logs.count(pw) != 0 || err == nil || strings.Contains(err.Error(), pw) || strings.Contains(tier.URL(), pw) {
			t.Errorf("%s: ping %v, URL %s, logs:\n%s", u, err, tier.URL(), logs.b.String())
		}
	}
}

// TestRendezvous: one server joining a pool of N moves at most 1/N + 1%
// of the keys (rendezvous hashing moves 1/(N+1) of them, those the new
// server wins), and none between the old servers.
func TestRendezvous(t *testing.T) {
	const keys = 100000
	for n := 1; n <= 10; n++ {
		var nodes []string
		for i := range n {
			nodes = append(nodes, fmt.Sprintf("10.0.0.%d:11211", i+1))
		}
		grown := append(slices.Clone(nodes), "10.0.1.1:11211")
		moved, strayed := 0, 0
		for k := range keys {
			key := engineKey(strconv.Itoa(k))
			before, after := rendezvous(nodes, key), rendezvous(grown, key)
			switch {
			case before == after:
			case after == n:
				moved++
			default:
				strayed++
			}
		}
		if frac := float64(moved) / keys; frac > 1/float64(n)+0.01 || strayed != 0 {
			t.Errorf("%d servers and one more: %.2f%% of the keys moved to it (want at most %.2f%%), %d between the old ones",
				n, 100*frac, 100/float64(n)+1, strayed)
		}
	}
}
