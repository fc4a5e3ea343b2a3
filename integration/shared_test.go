package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/volfs/volfs/cache/shared"
	"github.com/volfs/volfs/internal/testenv"
)

// The fleet cases of issue 20: several volfs processes mount one loopback
// HTTP origin with --shared-cache on a real redis-server, Redis Cluster or
// memcached started by the test, and read the whole volume at the same
// time, each with its own cat.

// fleetChunks is the number of chunks of the fleet's volume: 128 KiB
// each, 4 MiB in all.
const fleetChunks = 32

// byteOrigin serves dir over HTTP and counts the bytes of the bodies it
// sends and the GETs of chunk objects (under /s0/). Before serving the
// chunk GET numbered pause (from 1) it closes paused and waits for resume,
// so that a test can act in the middle of a read.
type byteOrigin struct {
	*httptest.Server
	bytes, chunkGets atomic.Int64
	requests         atomic.Int64 // every request, of any object and method
	chunkRequests    atomic.Int64 // requests of chunk objects (under /s0/), of any method
	pause            int64
	delay            time.Duration // before each chunk GET's answer: an origin far away
	paused, resume   chan struct{}

	mu     sync.Mutex
	byPath map[string]int // GUARDED_BY(mu); requests other than chunk GETs, by method and path
}

// bodyCounter counts the bytes of a response body.
type bodyCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w bodyCounter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func newByteOrigin(t *testing.T, dir string) *byteOrigin {
	t.Helper()
	o := &byteOrigin{paused: make(chan struct{}), resume: make(chan struct{})}
	files := http.FileServer(http.Dir(dir))
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.requests.Add(1)
		if !strings.HasPrefix(r.URL.Path, "/s0/") || r.Method != http.MethodGet || r.URL.Path == "/s0/" {
			o.mu.Lock()
			if o.byPath == nil {
				o.byPath = make(map[string]int)
			}
			o.byPath[r.Method+" "+r.URL.Path]++
			o.mu.Unlock()
		}
		if strings.HasPrefix(r.URL.Path, "/s0/") && r.URL.Path != "/s0/" {
			o.chunkRequests.Add(1)
		}
		if strings.HasPrefix(r.URL.Path, "/s0/") && r.Method == http.MethodGet {
			if o.chunkGets.Add(1) == o.pause {
				close(o.paused)
				<-o.resume
			}
			time.Sleep(o.delay)
		}
		files.ServeHTTP(bodyCounter{w, &o.bytes}, r)
	}))
	t.Cleanup(func() {
		o.CloseClientConnections()
		o.Close()
	})
	return o
}

// storedBytes is the size of every file under dir: what the volume costs
// to fetch once.
func storedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// startFleet mounts origin n times, each a volfs process of its own with
// args.
func startFleet(t *testing.T, origin string, n int, args ...string) []*serving {
	t.Helper()
	var fleet []*serving
	for range n {
		fleet = append(fleet, startVolfs(t, append(append([]string{"mount", "--read-ahead", "1MiB"}, args...), origin)...))
	}
	return fleet
}

// readFleet runs one `cat s0/0-*` under each mount at the same time and
// fails the test unless each reads want.
func readFleet(t *testing.T, fleet []*serving, want []byte) {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([][]byte, len(fleet))
	errs := make([]error, len(fleet))
	for i, s := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("sh", "-c", `cat "$1"/s0/0-*`, "sh", s.mnt)
			cmd.Env = append(os.Environ(), "LC_ALL=C")
			outs[i], errs[i] = cmd.Output()
		}()
	}
	wg.Wait()
	for i := range fleet {
		if errs[i] != nil || !bytes.Equal(outs[i], want) {
			t.Errorf("node %d: cat: %v, %d bytes, want the volume's %d", i, errs[i], len(outs[i]), len(want))
		}
	}
}

// fleetVolume writes the fleet's volume and returns its directory and
// its chunks in the order `cat s0/0-*` reads them.
func fleetVolume(t *testing.T) (string, []string, []byte) {
	t.Helper()
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, fleetChunks, nil)
	keys, want := lexical(keys, chunks)
	return src, keys, want
}

// bigChunk is the size of the chunks of bigFleetVolume: 2 MiB, above
// memcached's item limit of 1 MiB, the size of the chunks real volumes use
// (128x128x64 uint16).
const bigChunk = 128 * 128 * 128

// bigFleetVolume writes a raw precomputed volume of n chunks of bigChunk
// random bytes each (which zstd does not shrink) and returns its
// directory and its chunks in the order `cat s0/0-*` reads them.
func bigFleetVolume(t *testing.T, n int) (string, []byte) {
	t.Helper()
	src := t.TempDir()
	info := fmt.Sprintf(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [128, 128, %d], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1],
   "chunk_sizes": [[128, 128, 128]], "encoding": "raw"}]}`, 128*n)
	if err := os.MkdirAll(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "info"), []byte(info))
	var keys []string
	var chunks [][]byte
	for i := range n {
		key := fmt.Sprintf("s0/0-128_0-128_%d-%d", 128*i, 128*(i+1))
		data := make([]byte, bigChunk)
		rand.Read(data)
		writeFile(t, filepath.Join(src, key), data)
		keys, chunks = append(keys, key), append(chunks, data)
	}
	_, want := lexical(keys, chunks)
	return src, want
}

// loaded are the tier's settings for four race-built volfs processes on a
// small machine under load (CI's, and the 2 cores of the development
// machine at load average 15-18): a lookup may take longer than the default
// deadline, which would measure the machine rather than the single flight.
// (A waiter waits as long as the lease holder works: no setting of that.)
const loaded = "?timeout=500ms"

// bigFleetChunks is the number of 2 MiB chunks of TestFleetShared's
// larger volume (64 MiB): enough that each mount's metadata is a share of
// the origin's requests a real volume would show, not most of them.
const bigFleetChunks = 32

// TestFleetShared: four volfs processes reading the whole volume at once
// through one shared engine make the origin serve it about once: at most
// 1.2x its stored bytes with Redis (standalone or a 3-node cluster) and
// memcached, whose leases make one node fetch a chunk while the others
// wait for it, both with chunks of 128 KiB and of 2 MiB (above memcached's
// item limit, stored in parts) from an origin that takes 400 ms to answer
// each (longer than the 300 ms a waiter used to give the lease holder
// before it went to the origin itself).
//
// The origin's requests per chunk read are reported beside its bytes: all
// of them (every mount's listings and metadata included), and those of
// chunk objects (the loads and the version checks). With a secret and a
// metadata TTL (redis-signed, memcache-signed), a node takes the version
// checks the loading node made (its signed value says when) as its own,
// and the listings and metadata another node read within the TTL: at most
// 0.3 requests of any kind per chunk read for the whole fleet, where
// without a secret every node checks every chunk once (about 1.0) and
// reads its own metadata. With a TTL of 0 (redis-signed-ttl0) a mount
// takes only what was read since it started, so each mount's metadata
// (started one after the other) is its own: at most 0.3 chunk-object
// requests per chunk read. Four processes without the tier are the
// baseline (about 4x).
func TestFleetShared(t *testing.T) {
	small, _, smallWant := fleetVolume(t)
	big, bigWant := bigFleetVolume(t, bigFleetChunks)
	secret := []string{"--shared-cache-secret", "fleet-secret", "--metadata-ttl", "1m"}
	for _, tc := range []struct {
		name     string
		engine   func(t *testing.T) string
		maxRatio float64
		args     []string
		// maxPerRead bounds the origin's requests per chunk read,
		// maxChunkPerRead those of chunk objects; 0: not asserted.
		maxPerRead, maxChunkPerRead float64
	}{
		{"none", func(*testing.T) string { return "" }, 4.5, nil, 0, 0},
		{"redis", func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr + loaded }, 1.2, nil, 0, 0},
		{"redis-cluster", func(t *testing.T) string {
			var addrs []string
			for _, e := range testenv.StartRedisCluster(t, 3) {
				addrs = append(addrs, e.Addr)
			}
			return "redis+cluster://" + strings.Join(addrs, ",") + loaded
		}, 1.2, nil, 0, 0},
		{"memcache", func(t *testing.T) string { return "memcache://" + testenv.StartMemcached(t).Addr + loaded }, 1.2, nil, 0, 0},
		{"redis-signed", func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr + loaded }, 1.2, secret, 0.3, 0.3},
		{"memcache-signed", func(t *testing.T) string { return "memcache://" + testenv.StartMemcached(t).Addr + loaded }, 1.2, secret, 0.3, 0.3},
		{"redis-signed-ttl0", func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr + loaded }, 1.2,
			[]string{"--shared-cache-secret", "fleet-secret"}, 0, 0.3},
	} {
		for _, vol := range []struct {
			name   string
			src    string
			want   []byte
			chunks int
			delay  time.Duration
		}{{"128KiB", small, smallWant, fleetChunks, 0}, {"2MiB", big, bigWant, bigFleetChunks, 400 * time.Millisecond}} {
			t.Run(tc.name+"/"+vol.name, func(t *testing.T) {
				origin := newByteOrigin(t, vol.src)
				origin.delay = vol.delay
				var args []string
				if u := tc.engine(t); u != "" {
					args = append([]string{"--shared-cache", u}, tc.args...)
				}
				const nodes = 4
				fleet := startFleet(t, origin.URL, nodes, args...)
				readFleet(t, fleet, vol.want)
				for _, s := range fleet {
					stopVolfs(t, s)
				}
				stored := storedBytes(t, vol.src)
				ratio := float64(origin.bytes.Load()) / float64(stored)
				perRead := float64(origin.requests.Load()) / float64(nodes*vol.chunks)
				chunkPerRead := float64(origin.chunkRequests.Load()) / float64(nodes*vol.chunks)
				origin.mu.Lock()
				other := fmt.Sprint(origin.byPath)
				origin.mu.Unlock()
				if len(other) > 300 {
					other = other[:300] + "..."
				}
				t.Logf("%s, %s chunks: the origin served %d bytes for a volume of %d: %.2fx; %d requests (%d of chunk objects, %d chunk GETs) for %d chunk reads: %.2f requests per chunk read, %.2f of chunk objects; other than chunk GETs: %s",
					tc.name, vol.name, origin.bytes.Load(), stored, ratio, origin.requests.Load(), origin.chunkRequests.Load(), origin.chunkGets.Load(), nodes*vol.chunks, perRead, chunkPerRead, other)
				if tc.maxPerRead > 0 && perRead > tc.maxPerRead {
					t.Errorf("origin requests, metadata and listings included: %.2f per chunk read, want at most %.2f", perRead, tc.maxPerRead)
				}
				if tc.maxChunkPerRead > 0 && chunkPerRead > tc.maxChunkPerRead {
					t.Errorf("chunk-object requests: %.2f per chunk read, want at most %.2f", chunkPerRead, tc.maxChunkPerRead)
				}
				if ratio > tc.maxRatio {
					t.Errorf("origin bytes: %.2fx the volume, want at most %.1fx", ratio, tc.maxRatio)
				}
				if gets := origin.chunkGets.Load(); tc.maxRatio < 2 && float64(gets) > 1.2*float64(vol.chunks) {
					t.Errorf("chunk GETs: %d for %d chunks, want at most 1.2 per chunk", gets, vol.chunks)
				}
			})
		}
	}
}

// TestFleetEngineKilled kills the engine (SIGKILL: a redis-server, a
// memcached, or one node of a 3-node cluster) while the fleet of four
// reads, when the origin's chunk GETs reach half the volume's chunks:
// every read still returns
// the volume's bytes, each process logs the outage at most once, and, with
// the engine back (restarted, or with the cluster's other nodes), two
// fresh processes read the volume with the second one served by the
// engine, not the origin. memcache-parts reads 2 MiB chunks, which
// memcached holds in parts, so that the engine dies between the parts of
// a value. In the "restarted" runs the engine is killed and started
// again, empty, at that GET, while the fleet reads on, the nodes
// holding the fleet's secret and a TTL (so that the shared metadata and
// the leases of the chunks in flight are lost mid-read too): every read is
// still exact.
func TestFleetEngineKilled(t *testing.T) {
	small, _, smallWant := fleetVolume(t)
	big, bigWant := bigFleetVolume(t, 8)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (url string, kill, restart func())
		big   bool // the 2 MiB volume, stored on memcached in parts
	}{
		{"redis", func(t *testing.T) (string, func(), func()) {
			e := testenv.StartRedis(t)
			return "redis://" + e.Addr, e.Kill, e.Restart
		}, false},
		{"memcache", func(t *testing.T) (string, func(), func()) {
			e := testenv.StartMemcached(t)
			return "memcache://" + e.Addr, e.Kill, e.Restart
		}, false},
		{"memcache-parts", func(t *testing.T) (string, func(), func()) {
			e := testenv.StartMemcached(t)
			return "memcache://" + e.Addr, e.Kill, e.Restart
		}, true},
		{"redis-cluster", func(t *testing.T) (string, func(), func()) {
			nodes := testenv.StartRedisCluster(t, 3)
			var addrs []string
			for _, e := range nodes {
				addrs = append(addrs, e.Addr)
			}
			// The restarted node keeps its identity and slots (its
			// nodes.conf) but not its data; the cluster takes it back
			// by gossip, which the helper waits for.
			return "redis+cluster://" + strings.Join(addrs, ","), nodes[2].Kill, func() {
				nodes[2].Restart()
				testenv.WaitClusterOK(t, nodes)
			}
		}, false},
	} {
		for _, mode := range []string{"killed", "restarted"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				src, want, chunks := small, smallWant, int64(fleetChunks)
				if tc.big {
					src, want, chunks = big, bigWant, 8
				}
				url, kill, restart := tc.start(t)
				// The fresh node's reads of 2 MiB values (memcache-parts)
				// outlast the default deadline under -race: a lookup
				// that times out marks the engine unreachable and sends
				// the node to the origin (loaded).
				args := []string{"--shared-cache", url + loaded}
				if mode == "restarted" {
					args = append(args, "--shared-cache-secret", "fleet-secret", "--metadata-ttl", "1m")
				}
				origin := newByteOrigin(t, src)
				origin.pause = chunks / 2
				fleet := startFleet(t, origin.URL, 4, args...)
				go func() {
					// A restart that fails ends this goroutine by
					// t.Fatal's Goexit: the paused GET must be let go
					// even then, or the fleet's reads hang.
					defer close(origin.resume)
					<-origin.paused
					if mode == "restarted" {
						restart()
					} else {
						kill()
					}
				}()
				readFleet(t, fleet, want)
				select {
				case <-origin.paused:
				default:
					t.Fatalf("the fleet read the volume without the origin's chunk GET %d", chunks/2)
				}
				outages := 0
				for i, s := range fleet {
					stopVolfs(t, s)
					n := strings.Count(s.stderr.String(), "shared cache unreachable")
					if n > 1 {
						t.Errorf("node %d logged the outage %d times, want at most once:\n%s", i, n, s.stderr.String())
					}
					outages += n
				}
				if outages == 0 && mode == "killed" {
					t.Error("no node logged the outage")
				}

				if mode == "killed" {
					restart()
				}
				first := startFleet(t, origin.URL, 1, args...)
				readFleet(t, first, want)
				stopVolfs(t, first[0])
				before := origin.chunkGets.Load()
				second := startFleet(t, origin.URL, 1, args...)
				readFleet(t, second, want)
				stopVolfs(t, second[0])
				if got := origin.chunkGets.Load() - before; got > chunks/10 {
					t.Errorf("chunk GETs of a fresh node after the engine came back: got %d, want about 0 (served by the engine)", got)
				}
			})
		}
	}
}

// TestFleetEngineFull: four nodes read the 2 MiB volume (16 MiB) through an
// engine that cannot hold it: a Redis with room for no value (3 MB,
// noeviction: every SET fails with OOM) or for a few (12 MB, allkeys-lru,
// evicting), a memcached of 2 MB that refuses writes once full (-M: every
// SET of a part fails "out of memory"), and one of 10 MB that evicts (the
// parts of a value go one by one, so a manifest may name parts no longer
// there). The memcached nodes hold the fleet's secret and a TTL, so that
// the shared metadata meets the full engine too. Every read is right, no
// node waits for a value that cannot be stored, and the origin serves at
// most what four nodes without the tier would fetch.
func TestFleetEngineFull(t *testing.T) {
	src, want := bigFleetVolume(t, 8)
	secret := []string{"--shared-cache-secret", "fleet-secret", "--metadata-ttl", "1m"}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) string
		args  []string
	}{
		{"redis-noeviction", func(t *testing.T) string {
			return "redis://" + testenv.StartRedis(t, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction").Addr
		}, nil},
		{"redis-allkeys-lru", func(t *testing.T) string {
			return "redis://" + testenv.StartRedis(t, "--maxmemory", "12mb", "--maxmemory-policy", "allkeys-lru").Addr
		}, nil},
		{"memcache-refusing", func(t *testing.T) string {
			return "memcache://" + testenv.StartMemcached(t, "-m", "2", "-M").Addr
		}, secret},
		{"memcache-evicting", func(t *testing.T) string {
			return "memcache://" + testenv.StartMemcached(t, "-m", "10").Addr
		}, secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.start(t)
			origin := newByteOrigin(t, src)
			start := time.Now()
			fleet := startFleet(t, origin.URL, 4, append([]string{"--shared-cache", u + loaded}, tc.args...)...)
			readFleet(t, fleet, want)
			for _, s := range fleet {
				stopVolfs(t, s)
			}
			ratio := float64(origin.bytes.Load()) / float64(storedBytes(t, src))
			t.Logf("%s: %.2fx the volume from the origin, %d chunk GETs, in %v", tc.name, ratio, origin.chunkGets.Load(), time.Since(start).Round(time.Millisecond))
			if ratio > 4.5 {
				t.Errorf("origin bytes: %.2fx the volume, want at most 4.5x", ratio)
			}
		})
	}
}

// engineKey is the key of a chunk in the engine, as cache/shared
// documents it.
func engineKey(t *testing.T, dir, origin, key string) string {
	sum := sha256.Sum256([]byte(tierKeyOf(t, dir, origin, key)))
	return "volfs2:" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestSharedCorruptAndForged: values corrupted in Redis by another client
// (garbage, another key's value, cut short, a byte flipped) are refetched
// from the origin and read right, with one warning (on 0d63a2d: none);
// with --shared-cache-secret, values planted by a client without the
// secret (well-formed, with a valid checksum, other bytes) are refused and
// the chunks read right.
func TestSharedCorruptAndForged(t *testing.T) {
	src, keys, want := fleetVolume(t)
	e := testenv.StartRedis(t)
	url := "redis://" + e.Addr
	origin := newByteOrigin(t, src)
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr})
	defer rdb.Close()
	ctx := context.Background()

	for _, tc := range []struct {
		name   string
		args   []string
		damage func(t *testing.T)
	}{
		{"corrupt", nil, func(t *testing.T) {
			other, err := rdb.Get(ctx, engineKey(t, src, origin.URL, keys[2])).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				v, err := rdb.Get(ctx, engineKey(t, src, origin.URL, k)).Bytes()
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				switch i {
				case 0:
					v = []byte("garbage") // a redis-cli SET
				case 1:
					v = other // another key's value
				case 3:
					v = v[:len(v)/2] // cut short
				default:
					v[len(v)-1] ^= 0x01
				}
				if err := rdb.Set(ctx, engineKey(t, src, origin.URL, k), v, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"forged", []string{"--shared-cache-secret", "fleet-secret"}, func(t *testing.T) {
			forger, err := shared.Open(shared.Options{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer forger.Close()
			for _, k := range keys {
				v, err := rdb.Get(ctx, engineKey(t, src, origin.URL, k)).Bytes()
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				// The envelope's header (cache/envelope): the key's
				// length at 16, the identity's at 20, the key from 64.
				kl := binary.LittleEndian.Uint32(v[16:])
				il := binary.LittleEndian.Uint32(v[20:])
				ident := v[64+kl : 64+kl+il]
				forger.Put(tierKeyOf(t, src, origin.URL, k), ident, bytes.Repeat([]byte{0x66}, hostileChunk))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--shared-cache", url}, tc.args...)
			first := startFleet(t, origin.URL, 1, args...)
			readFleet(t, first, want)
			stopVolfs(t, first[0])
			tc.damage(t)
			before := origin.chunkGets.Load()
			second := startFleet(t, origin.URL, 1, args...)
			readFleet(t, second, want)
			stopVolfs(t, second[0])
			if got := origin.chunkGets.Load() - before; got < fleetChunks {
				t.Errorf("chunk GETs after the values were damaged: got %d, want at least %d (each refetched)", got, fleetChunks)
			}
			// Damaged values were written again: a third node is served
			// by the engine. Values that failed their signature were left
			// in place (a node whose own secret is wrong must not replace
			// the fleet's): the third node refetches them too, and the
			// refusal was logged once, with the fix.
			before = origin.chunkGets.Load()
			third := startFleet(t, origin.URL, 1, args...)
			readFleet(t, third, want)
			stopVolfs(t, third[0])
			got := origin.chunkGets.Load() - before
			if tc.name == "corrupt" && got > fleetChunks/10 {
				t.Errorf("chunk GETs of a node after the refetch: got %d, want about 0", got)
			}
			if n := strings.Count(second[0].stderr.String(), "values refused as damaged"); tc.name == "corrupt" && n != 1 {
				t.Errorf("the damaged values were logged %d times, want once:\n%s", n, second[0].stderr.String())
			}
			if tc.name == "forged" {
				if got < fleetChunks {
					t.Errorf("chunk GETs of a node after the forged values: got %d, want %d (left in place, refused again)", got, fleetChunks)
				}
				if n := strings.Count(second[0].stderr.String(), "check --shared-cache-secret"); n != 1 {
					t.Errorf("the refusal was logged %d times, want once:\n%s", n, second[0].stderr.String())
				}
			}
		})
	}
}

// TestFleetSecretMismatch: one node of a fleet on a real redis-server has
// a typo in its --shared-cache-secret. Its mount logs that the engine
// answers and that values are signed; it reads every chunk right (from the
// origin), says once, with the fix, that the fleet's values were refused,
// and does not overwrite them: a correctly configured node that comes
// after is still served by the engine. (Before, the node was silent and
// replaced every value it read with one the rest of the fleet refused.)
func TestFleetSecretMismatch(t *testing.T) {
	src, _, want := fleetVolume(t)
	e := testenv.StartRedis(t)
	origin := newByteOrigin(t, src)
	right := []string{"--shared-cache", "redis://" + e.Addr, "--shared-cache-secret", "fleet-secret"}
	typo := []string{"--shared-cache", "redis://" + e.Addr, "--shared-cache-secret", "fleet-secert"}

	first := startFleet(t, origin.URL, 1, right...)
	readFleet(t, first, want)
	stopVolfs(t, first[0])
	if log := first[0].stderr.String(); !strings.Contains(log, "shared cache answers") || !strings.Contains(log, "signed=true") {
		t.Errorf("no line at mount saying the engine answers and values are signed:\n%s", log)
	}

	before := origin.chunkGets.Load()
	wrong := startFleet(t, origin.URL, 1, typo...)
	readFleet(t, wrong, want)
	stopVolfs(t, wrong[0])
	if got := origin.chunkGets.Load() - before; got < fleetChunks {
		t.Errorf("the node with the wrong secret made %d chunk GETs, want %d (every value refused)", got, fleetChunks)
	}
	if n := strings.Count(wrong[0].stderr.String(), "check --shared-cache-secret"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once, with the fix:\n%s", n, wrong[0].stderr.String())
	}

	before = origin.chunkGets.Load()
	after := startFleet(t, origin.URL, 1, right...)
	readFleet(t, after, want)
	stopVolfs(t, after[0])
	if got := origin.chunkGets.Load() - before; got > fleetChunks/10 {
		t.Errorf("a node with the right secret, after the wrong one: %d chunk GETs, want about 0 (the fleet's values were overwritten)", got)
	}
}

// TestSharedCacheRefused: a --shared-cache that is not understood, or a
// secret without it, is refused by name before the source is read.
func TestSharedCacheRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range [][]string{
		{"--shared-cache", "http://127.0.0.1:6379"},
		{"--shared-cache", "redis://127.0.0.1:6379?timeout=soon"},
		{"--shared-cache", "memcache://"},
		{"--shared-cache-secret", "s3cret"},
	} {
		flag := tc[len(tc)-2]
		out, err := runErr(volfsBin, append(append([]string{"info"}, tc...), missing)...)
		if err == nil || !strings.Contains(out, flag+":") || strings.Contains(out, missing) {
			t.Errorf("volfs info %s: got %v:\n%s\nwant a refusal naming %s and not the source", strings.Join(tc, " "), err, out, flag)
		}
	}
}
