package shared

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// benchChunk is the size of the chunks the benchmarks move: 1 MiB.
const benchChunk = 1 << 20

// benchValues are a chunk that zstd shrinks (an image of slow ramps with
// two bits of noise, about 3:1) and one it cannot (random bytes, stored
// raw). A chunk of long runs of one byte is not one of them: klauspost's
// zstd decodes runs of offset 1 at about 100 MB/s, slower than a fetch.
func benchValues() map[string][]byte {
	noisy := random(benchChunk)
	for i := range noisy {
		noisy[i] = byte(i/4096) + noisy[i]&3
	}
	return map[string][]byte{"compressible": noisy, "random": random(benchChunk)}
}

// BenchmarkSharedHit reads a 1 MiB chunk from a shared tier on a real
// engine over loopback: the cost of a hit, header check and zstd included.
// memcached's limit is 1 MiB per item, so its random chunk (stored raw,
// above the limit) is left out.
func BenchmarkSharedHit(b *testing.B) {
	engines := map[string]string{
		"redis":    "redis://" + testenv.StartRedis(b).Addr,
		"memcache": "memcache://" + testenv.StartMemcached(b).Addr,
	}
	for name, u := range engines {
		// A deadline far above the default, so that a machine under load
		// measures slow hits rather than misses.
		tier, err := Open(Options{URL: u, Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer tier.Close()
		for kind, val := range benchValues() {
			tier.Put(kind, []byte("id"), val)
			if _, _, ok := tier.Get(context.Background(), kind, benchChunk, accept); !ok {
				continue // above the engine's limit
			}
			b.Run(name+"/"+kind, func(b *testing.B) {
				b.SetBytes(benchChunk)
				b.ReportAllocs()
				for b.Loop() {
					if _, _, ok := tier.Get(context.Background(), kind, benchChunk, accept); !ok {
						b.Fatal("miss")
					}
				}
			})
		}
	}
}

// BenchmarkSharedPut writes a 1 MiB chunk to Redis: the cost a load pays
// behind the reader (zstd level 1, then SET).
func BenchmarkSharedPut(b *testing.B) {
	tier, err := Open(Options{URL: "redis://" + testenv.StartRedis(b).Addr})
	if err != nil {
		b.Fatal(err)
	}
	defer tier.Close()
	for kind, val := range benchValues() {
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(benchChunk)
			b.ReportAllocs()
			for b.Loop() {
				tier.Put(kind, []byte("id"), val)
			}
		})
	}
}

// BenchmarkOriginFetch is the other side of a hit: a GET of the same 1 MiB
// from an HTTP server on loopback, the cheapest origin there is (a real
// bucket adds its latency, 20-100 ms to first byte, and its bandwidth).
func BenchmarkOriginFetch(b *testing.B) {
	val := benchValues()["random"]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "chunk", testTime, bytes.NewReader(val))
	}))
	defer srv.Close()
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkEngineDown is what the tier costs a lookup while its engine is
// down: "refused" tries the engine at every call (a back-off of 1 ns: a
// refused connection each time), "outage" is the default, where calls
// during the back-off are skipped.
func BenchmarkEngineDown(b *testing.B) {
	for _, tc := range []struct {
		name    string
		backoff Options
	}{
		{"refused", Options{Backoff: 1}},
		{"outage", Options{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := testenv.StartRedis(b)
			opts := tc.backoff
			opts.URL = "redis://" + e.Addr
			opts.Log = discardLog
			tier, err := Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer tier.Close()
			e.Kill()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, ok := tier.Get(context.Background(), "k", benchChunk, accept); ok {
					b.Fatal("hit with the engine down")
				}
			}
		})
	}
}
