package shared

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// announceChannel is the Redis channel on which a lease's holder announces
// the key whose value it set.
const announceChannel = "volfs2:set"

// redisEngine is Redis, standalone or a cluster.
type redisEngine struct {
	c        redis.UniversalClient
	sub      *redis.PubSub
	inFlight *inFlight // the bounds of the lookups in flight, for respConn
}

// openRedis makes the client of a redis:// (rediss://) or
// redis+cluster:// (rediss+cluster://) URL. It does not connect. Its
// connections refuse a reply that declares a value above maxValue, or
// above what the lookups in flight may read (respConn).
func openRedis(u *url.URL, opts Options, maxValue int64) (*redisEngine, error) {
	f := newInFlight()
	password := opts.Password
	if p, ok := u.User.Password(); ok {
		password = p
	}
	// No retries and short socket deadlines: a slow engine is a miss,
	// and the origin is there. go-redis's own log lines (a failed dial,
	// each time) go to the debug log: the tier logs outages once.
	quietRedis.Do(func() { redis.SetLogger(debugLogger{}) })
	const dialTimeout = 200 * time.Millisecond
	switch u.Scheme {
	case "redis", "rediss":
		ro, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("shared: %s: %w", u.Redacted(), err)
		}
		if ro.Password == "" {
			ro.Password = password
		}
		ro.MaxRetries = -1
		ro.DialerRetries = 1
		ro.DialTimeout = dialTimeout
		ro.ReadTimeout, ro.WriteTimeout = opts.Timeout, opts.Timeout
		ro.ContextTimeoutEnabled = true
		if ro.TLSConfig != nil && opts.RootCAs != nil {
			ro.TLSConfig.RootCAs = opts.RootCAs
		}
		ro.Dialer = dialLimited(redis.NewDialer(ro), maxValue, f)
		return &redisEngine{c: redis.NewClient(ro), inFlight: f}, nil
	default: // redis+cluster, rediss+cluster
		addrs, err := hosts(u, u.Scheme)
		if err != nil {
			return nil, err
		}
		co := &redis.ClusterOptions{
			Addrs:         addrs,
			Username:      u.User.Username(),
			Password:      password,
			MaxRetries:    -1,
			DialerRetries: 1,
			MaxRedirects:  -1, // a node down is a miss, not a retry on another

			DialTimeout:           dialTimeout,
			ReadTimeout:           opts.Timeout,
			WriteTimeout:          opts.Timeout,
			ContextTimeoutEnabled: true,
		}
		if u.Scheme == "rediss+cluster" {
			co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}
		}
		co.Dialer = dialLimited(redis.NewDialer(&redis.Options{DialTimeout: dialTimeout, TLSConfig: co.TLSConfig}), maxValue, f)
		return &redisEngine{c: redis.NewClusterClient(co), inFlight: f}, nil
	}
}

var quietRedis sync.Once

// debugLogger sends go-redis's log lines to slog's default logger at debug
// level.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, fmt.Sprintf(format, v...))
}

func (r *redisEngine) name() string { return "redis" }

// get reads at most max bytes of key's value (GETRANGE): a longer value,
// which volfs did not write for this chunk, is not read whole.
func (r *redisEngine) get(ctx context.Context, key string, max int64) ([]byte, error) {
	defer r.inFlight.add(max)()
	b, err := r.c.GetRange(ctx, key, 0, max-1).Bytes()
	if err == nil && len(b) == 0 {
		return nil, errMiss // GETRANGE of a missing key
	}
	return b, err
}

func (r *redisEngine) set(ctx context.Context, key string, val []byte) error {
	return r.c.Set(ctx, key, val, 0).Err()
}

func leaseKey(key string) string { return key + ":lease" }

func (r *redisEngine) lease(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return r.c.SetNX(ctx, leaseKey(key), token, ttl).Result()
}

// renewScript extends the lease KEYS[1] by ARGV[2] ms if ARGV[1] holds it;
// releaseScript deletes it if ARGV[1] holds it.
var (
	renewScript   = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`)
	releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`)
)

func (r *redisEngine) renew(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	n, err := renewScript.Run(ctx, r.c, []string{leaseKey(key)}, token, ttl.Milliseconds()).Int()
	return n == 1, err
}

// release deletes the lease if token holds it (compare-and-delete: a
// lease that lapsed and another node took is left alone), and announces
// the key, whose value is set or will not be: the waiters look for it,
// and go to the origin when it is not there.
func (r *redisEngine) release(ctx context.Context, key, token string, _ bool) error {
	if err := releaseScript.Run(ctx, r.c, []string{leaseKey(key)}, token).Err(); err != nil {
		return err
	}
	return r.c.Publish(ctx, announceChannel, key).Err()
}

func (r *redisEngine) leased(ctx context.Context, key string) (leaseState, error) {
	n, err := r.c.Exists(ctx, leaseKey(key)).Result()
	if n > 0 {
		return leaseHeld, err
	}
	return leaseNone, err
}

func (r *redisEngine) announces() bool { return true }

func (r *redisEngine) ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// subscribe listens to the announcements on a connection of its own,
// which go-redis re-establishes after a fault, until close.
func (r *redisEngine) subscribe(done func(key string)) {
	r.sub = r.c.Subscribe(context.Background(), announceChannel)
	ch := r.sub.Channel()
	go func() {
		for m := range ch {
			done(m.Payload)
		}
	}()
}

func (r *redisEngine) close() error {
	if r.sub != nil {
		r.sub.Close()
	}
	return r.c.Close()
}
