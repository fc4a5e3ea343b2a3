package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Engine is a redis-server or memcached process started by a test on
// loopback. It is killed at the end of the test.
type Engine struct {
	Addr  string // 127.0.0.1:PORT
	name  string
	args  []string
	ready string // the line the process prints once it accepts connections
	t     testing.TB

	mu     sync.Mutex
	cmd    *exec.Cmd     // GUARDED_BY(mu); nil once killed
	exited chan struct{} // GUARDED_BY(mu); closed once cmd has exited
}

// StartRedis starts a redis-server on a free loopback port, without
// persistence, with extra arguments args (such as cluster settings), and
// returns once it accepts connections. It ends the test with Unavailable
// when redis-server is not installed (Debian's redis-server).
func StartRedis(t testing.TB, args ...string) *Engine {
	t.Helper()
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	e := &Engine{Addr: addr, name: "redis-server", t: t, ready: "Ready to accept connections",
		args: append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)}
	e.start()
	return e
}

// StartRedisTLS starts a redis-server that accepts TLS connections only,
// with the certificate and key in PEM files cert and key (no client
// certificates asked); see StartRedis.
func StartRedisTLS(t testing.TB, cert, key string) *Engine {
	t.Helper()
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	e := &Engine{Addr: addr, name: "redis-server", t: t, ready: "Ready to accept connections",
		args: []string{"--port", "0", "--tls-port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir(),
			"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no"}}
	e.start()
	return e
}

// StartMemcached starts a memcached (64 MiB, default 1 MiB item limit) on a
// free loopback port, with extra arguments args (which override those:
// "-m", "2", "-M" for a server that refuses writes once full), and returns
// once it listens; see StartRedis.
func StartMemcached(t testing.TB, args ...string) *Engine {
	t.Helper()
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	e := &Engine{Addr: addr, name: "memcached", t: t, ready: "server listening",
		args: append([]string{"-u", "nobody", "-p", port, "-l", "127.0.0.1", "-U", "0", "-m", "64", "-vv"}, args...)}
	e.start()
	return e
}

// StartRedisCluster starts n redis-servers in cluster mode and joins them
// into one cluster without replicas (redis-cli --cluster create), then
// waits until every node reports the cluster ok.
func StartRedisCluster(t testing.TB, n int) []*Engine {
	t.Helper()
	var nodes []*Engine
	var addrs []string
	for i := range n {
		dir := t.TempDir()
		e := StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--cluster-node-timeout", "2000")
		nodes = append(nodes, e)
		addrs = append(addrs, e.Addr)
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	WaitClusterOK(t, nodes)
	return nodes
}

// WaitClusterOK waits until every node of a Redis Cluster says its state
// is ok. The nodes agree by gossip, which nothing announces: it asks each
// until it says so (a bounded wait for a state, not a timing), failing
// the test after a minute.
func WaitClusterOK(t testing.TB, nodes []*Engine) {
	t.Helper()
	for _, e := range nodes {
		host, port, _ := net.SplitHostPort(e.Addr)
		deadline := time.Now().Add(time.Minute)
		for {
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster node %s not ok within a minute:\n%s", e.Addr, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *Engine) start() {
	t := e.t
	t.Helper()
	bin := LookPath(t, e.name, "apt-get install redis-server redis-tools memcached")
	cmd := exec.Command(bin, e.args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(sc.Text(), e.ready) {
				seen = true
				close(ready)
			}
		}
		// A line too long for the scanner ends the loop: the rest is
		// still read, or the process would block writing it and Kill,
		// which waits for its exit, with it.
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	e.mu.Lock()
	e.cmd, e.exited = cmd, exited
	e.mu.Unlock()
	t.Cleanup(e.Kill)
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("%s %s exited before accepting connections: %v", e.name, strings.Join(e.args, " "), waitErr)
	case <-time.After(time.Minute):
		t.Fatalf("%s did not accept connections within a minute", e.name)
	}
}

// Kill kills the process (SIGKILL: no goodbye to its clients) and
// returns once it has exited, so that its port is free again. It may be
// called more than once.
func (e *Engine) Kill() {
	e.mu.Lock()
	cmd, exited := e.cmd, e.exited
	e.cmd = nil
	e.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-exited
	}
}

// Restart kills the process if it runs and starts a new, empty one on the
// same address. It calls t.Fatal when the new one does not start, so it
// belongs on the test's goroutine, or one whose caller survives
// runtime.Goexit (see TestFleetEngineKilled).
func (e *Engine) Restart() {
	e.t.Helper()
	e.Kill()
	e.start()
}

// FreeAddr returns a loopback address with a port free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
