package shared

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/volfs/volfs/internal/testenv"
)

// Settings of BenchmarkFleet200: 200 nodes read the same 64 chunks of
// 256 KiB (random bytes, which zstd does not shrink), each in an order of
// its own, from an origin that takes 50 ms to first byte and sends at
// 50 MB/s per connection, as an object store does.
const (
	simNodes   = 200
	simChunks  = 64
	simChunk   = 256 << 10
	simLatency = 50 * time.Millisecond
	simRate    = 50e6 // bytes per second per connection
)

// BenchmarkFleet200 simulates a fleet of 200 nodes, each a tier client of
// its own (its own connections, leases and subscription), against one real
// redis-server and one real memcached: each node reads every chunk once,
// as a store would (Get; on a miss, the origin, then Put, or Release when
// the origin fails). It reports origin bytes over stored bytes, origin
// requests per chunk, the engine's commands per read (what a lease costs
// it), the commands of the hottest chunk (its value, lease and parts, as
// counted by a proxy in front of the engine: census) against the mean of
// all, and the engine's peak memory (Redis: used_memory_peak; memcached:
// the most bytes its items held, sampled every 20 ms). With -v it logs
// the commands of each name per read, and Redis's own view of its hot
// keys (redis-cli --hotkeys: the test's redis-server runs allkeys-lfu,
// which the LFU counters need). Run it with
//
//	go test -run '^$' -bench BenchmarkFleet200 -benchtime 1x -v ./cache/shared
func BenchmarkFleet200(b *testing.B) {
	chunks := make([][]byte, simChunks)
	for i := range chunks {
		chunks[i] = random(simChunk)
	}
	var bytesSent, requests atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if err != nil || i < 0 || i >= simChunks {
			http.NotFound(w, r)
			return
		}
		time.Sleep(simLatency + time.Duration(float64(simChunk)/simRate*float64(time.Second)))
		n, _ := w.Write(chunks[i])
		bytesSent.Add(int64(n))
	}))
	defer origin.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: simNodes}}

	redisEngine := testenv.StartRedis(b, "--maxmemory-policy", "allkeys-lfu")
	mcEngine := testenv.StartMemcached(b)
	redisCensus := startCensus(b, redisEngine.Addr, false)
	mcCensus := startCensus(b, mcEngine.Addr, true)
	for _, eng := range []struct {
		name, url string
		census    *census
	}{
		{"redis", "redis://" + redisCensus.addr(), redisCensus},
		{"memcache", "memcache://" + mcCensus.addr(), mcCensus},
	} {
		b.Run(eng.name, func(b *testing.B) {
			for n := 0; b.Loop(); n++ {
				bytesSent.Store(0)
				requests.Store(0)
				cmdsBefore := engineCommands(b, eng.name, redisEngine.Addr, mcEngine.Addr)
				prefix := fmt.Sprintf("%s-%d/", eng.name, n)
				var wg sync.WaitGroup
				var wrong atomic.Int64
				peak := sampleMemcache(b, eng.name, mcEngine.Addr)
				for node := range simNodes {
					tier, err := Open(Options{URL: eng.url, Timeout: time.Second, Log: discardLog})
					if err != nil {
						b.Fatal(err)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer tier.Close()
						order := rand.New(rand.NewPCG(uint64(node), uint64(n))).Perm(simChunks)
						for _, i := range order {
							val, ok := simRead(tier, client, origin.URL, prefix, i)
							if !ok || string(val) != string(chunks[i]) {
								wrong.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if wrong.Load() != 0 {
					b.Fatalf("%d reads failed or were wrong", wrong.Load())
				}
				cmds := engineCommands(b, eng.name, redisEngine.Addr, mcEngine.Addr) - cmdsBefore
				reads := float64(simChunks * simNodes)
				b.ReportMetric(float64(bytesSent.Load())/float64(simChunks*simChunk), "origin-bytes/stored")
				b.ReportMetric(float64(requests.Load())/float64(simChunks), "origin-requests/chunk")
				b.ReportMetric(float64(cmds)/reads, "engine-cmds/read")
				if eng.name == "redis" {
					b.ReportMetric(float64(redisInfo(b, redisEngine.Addr, "memory", "used_memory_peak"))/(1<<20), "engine-peak-MiB")
				} else {
					b.ReportMetric(float64(peak())/(1<<20), "engine-peak-MiB")
				}
				hot, hotN, mean := eng.census.hottest()
				b.ReportMetric(float64(hotN), "hottest-chunk-cmds")
				b.ReportMetric(mean, "mean-chunk-cmds")
				var per []string
				for _, c := range eng.census.commands() {
					per = append(per, fmt.Sprintf("%s %.3f", c.name, float64(c.n)/reads))
				}
				b.Logf("%s: hottest chunk %s: %d commands (mean %.1f); commands per read: %s", eng.name, hot, hotN, mean, strings.Join(per, ", "))
				if eng.name == "redis" {
					if out, err := exec.Command("redis-cli", "-p", strings.TrimPrefix(redisEngine.Addr, "127.0.0.1:"), "--hotkeys").CombinedOutput(); err == nil {
						b.Logf("redis-cli --hotkeys:\n%s", hotTail(string(out)))
					}
				}
			}
		})
	}
}

// simRead is one node's read of chunk i through its tier, as the store
// does it.
func simRead(tier *Tier, client *http.Client, origin, prefix string, i int) ([]byte, bool) {
	key := prefix + strconv.Itoa(i)
	ctx := context.Background()
	if val, _, ok := tier.Get(ctx, key, simChunk, accept); ok {
		return val, true
	}
	resp, err := client.Get(origin + "/" + strconv.Itoa(i))
	if err != nil {
		tier.Release(key)
		return nil, false
	}
	defer resp.Body.Close()
	val, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tier.Release(key)
		return nil, false
	}
	tier.Put(key, []byte("id"), val)
	return val, true
}

// engineCommands returns the commands the engine has processed.
func engineCommands(b *testing.B, name, redisAddr, mcAddr string) int64 {
	if name == "redis" {
		return redisInfo(b, redisAddr, "stats", "total_commands_processed")
	}
	s := memcacheStats(b, mcAddr)
	return s["cmd_get"] + s["cmd_set"] + s["cmd_touch"] + s["cas_hits"] + s["cas_misses"] + s["cas_badval"]
}

// sampleMemcache samples the bytes memcached's items hold every 20 ms
// (memcached keeps no peak of its own) until the function it returns is
// called, which returns the most seen; for another engine it samples
// nothing.
func sampleMemcache(b *testing.B, name, addr string) func() int64 {
	if name != "memcache" {
		return func() int64 { return 0 }
	}
	stop := make(chan struct{})
	var most atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := memcacheStats(b, addr)["bytes"]; n > most.Load() {
				most.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		if n := memcacheStats(b, addr)["bytes"]; n > most.Load() {
			most.Store(n)
		}
		return most.Load()
	}
}

// hotTail is the lines of redis-cli --hotkeys's summary that name keys.
func hotTail(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "hot key found") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) > 5 {
		keep = keep[:5]
	}
	return strings.Join(keep, "\n")
}

func redisInfo(b *testing.B, addr, section, field string) int64 {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatalf("redis INFO %s has no %s", section, field)
	return 0
}

func memcacheStats(b *testing.B, addr string) map[string]int64 {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "stats\r\n")
	out := map[string]int64{}
	r := bufio.NewReader(c)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(l)
		if len(f) == 1 && f[0] == "END" {
			return out
		}
		if len(f) == 3 && f[0] == "STAT" {
			out[f[1]], _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
}
