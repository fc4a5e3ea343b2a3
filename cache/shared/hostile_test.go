package shared

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// vmHWM returns the process's peak resident memory, from /proc.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// fakeEngine is a server on loopback that speaks just enough of an
// engine's protocol to answer every lookup with a value of declared
// length, whose bytes it then sends one every drip: a hostile or broken
// engine.
type fakeEngine struct {
	addr     string
	mu       sync.Mutex
	declared int // GUARDED_BY(mu); lookups answered
}

// answered returns the lookups the fake engine answered.
func (f *fakeEngine) answered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.declared
}

// startFake starts a fake engine speaking proto ("redis" or "memcache").
func startFake(t *testing.T, proto string, declared int64, drip time.Duration) *fakeEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEngine{addr: ln.Addr().String()}
	done := make(chan struct{})
	var conns sync.WaitGroup
	t.Cleanup(func() {
		close(done)
		ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				go func() { <-done; c.Close() }()
				r := bufio.NewReader(c)
				for {
					cmd, err := readCommand(r, proto)
					if err != nil || len(cmd) == 0 {
						return
					}
					if proto == "redis" {
						cmd[0] = strings.ToUpper(cmd[0])
					}
					var head string
					switch {
					case proto == "redis" && (cmd[0] == "GETRANGE" || cmd[0] == "GET"):
						head = fmt.Sprintf("$%d\r\n", declared)
					case proto == "redis" && cmd[0] == "HELLO":
						fmt.Fprintf(c, "-NOPROTO unsupported protocol version\r\n")
						continue
					case proto == "redis":
						fmt.Fprintf(c, "+OK\r\n")
						continue
					case cmd[0] == "get" || cmd[0] == "gets":
						head = fmt.Sprintf("VALUE %s 0 %d\r\n", cmd[1], declared)
					default:
						fmt.Fprintf(c, "ERROR\r\n")
						continue
					}
					f.mu.Lock()
					f.declared++
					f.mu.Unlock()
					if _, err := c.Write([]byte(head)); err != nil {
						return
					}
					for range declared {
						select {
						case <-done:
							return
						case <-time.After(drip):
						}
						if _, err := c.Write([]byte{0}); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return f
}

// readCommand reads one command: a RESP array of bulk strings, or a
// memcached line.
func readCommand(r *bufio.Reader, proto string) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if proto != "redis" {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil, fmt.Errorf("empty line")
		}
		return f, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(line, "*"))
	if err != nil {
		return nil, err
	}
	var cmd []string
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		k, err := strconv.Atoi(strings.TrimRight(strings.TrimPrefix(l, "$"), "\r\n"))
		if err != nil {
			return nil, err
		}
		b := make([]byte, k+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(b[:k]))
	}
	return cmd, nil
}

// TestHugeDeclared: an engine that answers a lookup with a value of a
// terabyte (Redis, memcached), or of 600 MiB (above the largest value
// volfs writes, 512 MiB), or above the largest value volfs writes for
// the chunk asked for, is refused before a byte of it is read: a miss
// within the tier's deadline, counted, with the process's peak memory
// unchanged. (Before, go-redis and gomemcache allocated what was
// declared: a terabyte is a fatal out of memory.)
func TestHugeDeclared(t *testing.T) {
	for _, tc := range []struct {
		proto    string
		declared int64
	}{
		{"redis", 1 << 40},
		{"redis", 600 << 20},
		{"memcache", 1 << 40},
		{"memcache", 600 << 20},
		// The bound is the chunk's own: 1 MiB for a 64 KiB chunk is
		// refused too (Redis: the largest of the lookups in flight).
		{"redis", 1 << 20},
		{"memcache", 1 << 20},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.proto, tc.declared), func(t *testing.T) {
			f := startFake(t, tc.proto, tc.declared, 10*time.Millisecond)
			tier, _ := open(t, Options{URL: tc.proto + "://" + f.addr, Timeout: 200 * time.Millisecond})
			before := vmHWM(t)
			start := time.Now()
			if _, _, ok := tier.Get(context.Background(), "k", 64<<10, accept); ok {
				t.Fatal("served a value of the fake engine")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the lookup took %v, want about the tier's deadline at most", d)
			}
			if f.answered() < 1 {
				t.Fatal("the fake engine answered no lookup")
			}
			if st := tier.Stats(); st.Refused < 1 || st.ReadBytes != 0 {
				t.Errorf("stats %+v, want the reply refused and no byte of it read", st)
			}
			if grown := vmHWM(t) - before; grown > 64<<20 {
				t.Errorf("peak memory grew by %d MiB", grown>>20)
			}
		})
	}
}

// TestSlowValue: an engine that declares a value of a plausible length
// and sends it a byte at a time is given the tier's deadline, then the
// lookup is a miss.
func TestSlowValue(t *testing.T) {
	for _, proto := range []string{"redis", "memcache"} {
		t.Run(proto, func(t *testing.T) {
			f := startFake(t, proto, 1000, 5*time.Millisecond)
			tier, _ := open(t, Options{URL: proto + "://" + f.addr, Timeout: 100 * time.Millisecond})
			start := time.Now()
			if _, _, ok := tier.Get(context.Background(), "k", 900, accept); ok {
				t.Fatal("served a value of the fake engine")
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("the lookup took %v with a deadline of 100ms", d)
			}
		})
	}
}

// TestPlantedValue: a client of a real Redis plants a 64 MiB value under a
// chunk's key; a lookup of the 64 KiB chunk reads no more than the largest
// value volfs writes for that chunk (GETRANGE), and misses.
func TestPlantedValue(t *testing.T) {
	tier, _ := open(t, Options{URL: "redis://" + testenv.StartRedis(t).Addr, Timeout: 5 * time.Second})
	ctx := context.Background()
	if err := tier.eng.set(ctx, engineKey("k"), bytes.Repeat([]byte{'x'}, 64<<20)); err != nil {
		t.Fatal(err)
	}
	before := vmHWM(t)
	if _, _, ok := tier.Get(ctx, "k", 64<<10, accept); ok {
		t.Fatal("served a planted value")
	}
	if st := tier.Stats(); st.ReadBytes > tier.readBound("k", 64<<10)*2 {
		t.Errorf("read %d bytes of a planted 64 MiB value, want at most %d", st.ReadBytes, tier.readBound("k", 64<<10)*2)
	}
	if grown := vmHWM(t) - before; grown > 32<<20 {
		t.Errorf("peak memory grew by %d MiB", grown>>20)
	}
}
