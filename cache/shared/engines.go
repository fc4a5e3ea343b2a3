package shared

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/redis/go-redis/v9"
)

// announceChannel is the Redis channel on which a lease's holder announces
// the key whose value it set.
const announceChannel = "volfs1:set"

// redisEngine is Redis, standalone or a cluster.
type redisEngine struct {
	c   redis.UniversalClient
	sub *redis.PubSub
}

// openRedis makes the client of a redis:// (rediss://) or
// redis+cluster:// (rediss+cluster://) URL. It does not connect.
func openRedis(u *url.URL, opts Options) (*redisEngine, error) {
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
		return &redisEngine{c: redis.NewClient(ro)}, nil
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
		return &redisEngine{c: redis.NewClusterClient(co)}, nil
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

func (r *redisEngine) get(ctx context.Context, key string) ([]byte, error) {
	b, err := r.c.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, errMiss
	}
	return b, err
}

func (r *redisEngine) set(ctx context.Context, key string, val []byte) error {
	return r.c.Set(ctx, key, val, 0).Err()
}

func leaseKey(key string) string { return key + ":lease" }

func (r *redisEngine) lease(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return r.c.SetNX(ctx, leaseKey(key), 1, ttl).Result()
}

func (r *redisEngine) release(ctx context.Context, key string) error {
	if err := r.c.Del(ctx, leaseKey(key)).Err(); err != nil {
		return err
	}
	return r.c.Publish(ctx, announceChannel, key).Err()
}

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

// memcacheEngine is one or more memcached servers; keys are spread over
// them by gomemcache's ServerList.
type memcacheEngine struct{ c *memcache.Client }

func openMemcache(u *url.URL, opts Options) (*memcacheEngine, error) {
	addrs, err := hosts(u, "memcache")
	if err != nil {
		return nil, err
	}
	c := memcache.New(addrs...)
	c.Timeout = opts.Timeout
	c.MaxIdleConns = 16
	return &memcacheEngine{c}, nil
}

func (m *memcacheEngine) name() string { return "memcache" }

// get bounds the call by the client's Timeout: gomemcache takes no
// context.
func (m *memcacheEngine) get(_ context.Context, key string) ([]byte, error) {
	it, err := m.c.Get(key)
	if errors.Is(err, memcache.ErrCacheMiss) {
		return nil, errMiss
	}
	if err != nil {
		return nil, err
	}
	return it.Value, nil
}

func (m *memcacheEngine) set(_ context.Context, key string, val []byte) error {
	return m.c.Set(&memcache.Item{Key: key, Value: val})
}

func (m *memcacheEngine) close() error { return m.c.Close() }
