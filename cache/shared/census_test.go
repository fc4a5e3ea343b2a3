package shared

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// census is a TCP proxy in front of an engine that counts, from what the
// clients send, the commands of each name and the commands that touch
// each chunk's keys (a value, its lease and its parts count as one chunk:
// they live together, on one server of a memcached pool, in one slot of
// a cluster only if hash tags say so). It speaks just enough of RESP and
// of memcached's text protocol to find the commands and their keys; the
// engine's replies pass through untouched.
type census struct {
	ln     net.Listener
	target string
	parse  func(r *bufio.Reader, count func(cmd string, keys ...string)) error

	mu     sync.Mutex
	cmds   map[string]int64 // GUARDED_BY(mu); by command name
	chunks map[string]int64 // GUARDED_BY(mu); by chunk (engine key without suffixes)
}

// startCensus listens on loopback and forwards to target.
func startCensus(tb testing.TB, target string, memcache bool) *census {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c := &census{ln: ln, target: target, parse: parseRESP, cmds: map[string]int64{}, chunks: map[string]int64{}}
	if memcache {
		c.parse = parseMemcache
	}
	go c.serve()
	tb.Cleanup(func() { ln.Close() })
	return c
}

func (c *census) addr() string { return c.ln.Addr().String() }

func (c *census) serve() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			server, err := net.Dial("tcp", c.target)
			if err != nil {
				client.Close()
				return
			}
			go func() {
				io.Copy(client, server)
				client.Close()
			}()
			c.parse(bufio.NewReader(io.TeeReader(client, server)), c.count)
			server.Close()
		}()
	}
}

// chunkOf is the chunk an engine key belongs to: the key without the
// suffixes of a lease and of parts.
func chunkOf(key string) string {
	if i := strings.Index(key, ":lease"); i > 0 {
		return key[:i]
	}
	if i := strings.Index(key, ":p:"); i > 0 {
		return key[:i]
	}
	return key
}

func (c *census) count(cmd string, keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds[strings.ToUpper(cmd)]++
	seen := map[string]bool{}
	for _, k := range keys {
		if ch := chunkOf(k); strings.HasPrefix(ch, keyPrefix) && !seen[ch] {
			seen[ch] = true
			c.chunks[ch]++
		}
	}
}

// hottest returns the chunk most commands touched, how many, and the mean
// over every chunk touched.
func (c *census) hottest() (key string, n int64, mean float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for k, v := range c.chunks {
		sum += v
		if v > n || v == n && k < key {
			key, n = k, v
		}
	}
	if len(c.chunks) > 0 {
		mean = float64(sum) / float64(len(c.chunks))
	}
	return key, n, mean
}

// commands returns the count of each command, most first.
func (c *census) commands() []cmdCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cmdCount
	for k, v := range c.cmds {
		out = append(out, cmdCount{k, v})
	}
	slices.SortFunc(out, func(a, b cmdCount) int { return int(b.n - a.n) })
	return out
}

type cmdCount struct {
	name string
	n    int64
}

// parseRESP reads RESP arrays of bulk strings (the requests of a Redis
// client) and counts each command with its keys: the first argument, or
// for EVALSHA and EVAL the keys after numkeys; PUBLISH counts the key it
// announces.
func parseRESP(r *bufio.Reader, count func(cmd string, keys ...string)) error {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "*") {
			continue // an inline command (none from go-redis)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		args := make([]string, 0, n)
		for range n {
			h, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			l, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "$")))
			b := make([]byte, l+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return err
			}
			args = append(args, string(b[:l]))
		}
		if len(args) == 0 {
			continue
		}
		cmd := strings.ToUpper(args[0])
		switch {
		case (cmd == "EVALSHA" || cmd == "EVAL") && len(args) > 2:
			k, _ := strconv.Atoi(args[2])
			count(cmd, args[3:3+min(k, len(args)-3)]...)
		case cmd == "PUBLISH" && len(args) > 2:
			count(cmd, args[2])
		case len(args) > 1:
			count(cmd, args[1])
		default:
			count(cmd)
		}
	}
}

// parseMemcache reads memcached's text protocol as a client sends it:
// retrievals name their keys, storage commands one key and a data block.
func parseMemcache(r *bufio.Reader, count func(cmd string, keys ...string)) error {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "get", "gets":
			count(f[0], f[1:]...)
		case "set", "add", "cas", "replace", "append", "prepend":
			if len(f) < 5 {
				continue
			}
			n, _ := strconv.Atoi(f[4])
			if _, err := r.Discard(n + 2); err != nil {
				return err
			}
			count(f[0], f[1])
		case "delete", "touch", "incr", "decr":
			count(f[0], f[1:2]...)
		default:
			count(f[0])
		}
	}
}
