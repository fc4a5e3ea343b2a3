package integration

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// Tests of what a fleet's node takes from another's value in the shared
// tier (docs/CONSISTENCY.md, "Verified by the fleet"): a value signed with
// the fleet's secret stands in for a version check within the metadata
// TTL, and no longer; a value without a signature is checked at the
// origin, and never served while the origin is offline.

// switchOrigin serves src over loopback HTTP, counts the requests of each
// key, and answers every request 503 while down is set (an origin that is
// gone: overloaded, or its network cut).
type switchOrigin struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	seen map[string]int // GUARDED_BY(mu)
}

func newSwitchOrigin(t *testing.T, src string) *switchOrigin {
	t.Helper()
	o := &switchOrigin{seen: map[string]int{}}
	files := http.FileServer(http.Dir(src))
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen[strings.TrimPrefix(r.URL.Path, "/")]++
		o.mu.Unlock()
		if o.down.Load() {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *switchOrigin) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[key]
}

// TestSharedOfflineUnsigned: a node fills the shared tier, then a second
// node (its tree built while the origin answered) reads the same chunks
// with the origin gone. Without --shared-cache-secret the values could
// have been written by any client of the engine: they are not served, the
// reads fail with EIO. With the secret they are the fleet's own, and are
// served while offline, as the disk cache's entries are.
func TestSharedOfflineUnsigned(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	keys := []string{"s0/0-32_0-32_0-32", "s0/32-64_0-32_0-32"}
	for _, tc := range []struct {
		name   string
		args   []string
		served bool
	}{
		{"unsigned", nil, false},
		{"signed", []string{"--shared-cache-secret", "fleet-secret"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newSwitchOrigin(t, src)
			args := append([]string{"mount", "--shared-cache", "redis://" + testenv.StartRedis(t).Addr + loaded, "--retries", "1"}, tc.args...)
			first := startVolfs(t, append(args, o.URL)...)
			sums, failed := hashChunks(t, first.mnt, keys)
			for _, k := range keys {
				if sums[k] != want[k] {
					t.Fatalf("first node, %s: sha256 %q, error %q; want %s", k, sums[k], failed[k], want[k])
				}
			}
			stopVolfs(t, first)

			second := startVolfs(t, append(args, o.URL)...)
			if out, err := runBounded(t, time.Minute, "ls", filepath.Join(second.mnt, "s0")); err != nil {
				t.Fatalf("ls: %v\n%s", err, out)
			}
			o.down.Store(true)
			sums, failed = hashChunks(t, second.mnt, keys)
			for _, k := range keys {
				switch {
				case tc.served && sums[k] != want[k]:
					t.Errorf("%s, signed value, origin offline: sha256 %q, error %q; want %s", k, sums[k], failed[k], want[k])
				case !tc.served && failed[k] != "EIO":
					t.Errorf("%s, unsigned value, origin offline: sha256 %q (the value's: %v), error %q; want EIO", k, sums[k], sums[k] == want[k], failed[k])
				}
			}
			stopVolfs(t, second)
		})
	}
}

// TestFleetVerifiedTTL: with --shared-cache-secret and --metadata-ttl, a
// node reading a chunk that another node just loaded takes that node's
// version check as its own and asks the origin nothing, even though the
// chunk was rewritten at the origin meanwhile (the old version, within
// the TTL the user chose); a node reading it once the TTL has passed since
// the load checks it at the origin and reads the new bytes.
func TestFleetVerifiedTTL(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	o := newSwitchOrigin(t, src)
	const ttl = 15 * time.Second
	args := []string{"mount", "--shared-cache", "redis://" + testenv.StartRedis(t).Addr + loaded,
		"--shared-cache-secret", "fleet-secret", "--metadata-ttl", ttl.String(), o.URL}
	const key = "s0/0-32_0-32_0-32"

	first := startVolfs(t, args...)
	loadedAt := time.Now()
	if sums, failed := hashChunks(t, first.mnt, []string{key}); sums[key] != want[key] {
		t.Fatalf("first node: sha256 %q, error %q; want %s", sums[key], failed[key], want[key])
	}
	stopVolfs(t, first)
	newSum := rewriteChunk(t, src, key, 3)

	second := startVolfs(t, args...)
	if _, err := runBounded(t, time.Minute, "ls", filepath.Join(second.mnt, "s0")); err != nil {
		t.Fatal(err)
	}
	before := o.count(key)
	sums, failed := hashChunks(t, second.mnt, []string{key})
	if since := time.Since(loadedAt); since >= ttl {
		t.Skipf("the second node read %v after the first node's load, past the TTL of %v: the machine is too slow for this test", since, ttl)
	}
	if sums[key] != want[key] {
		t.Errorf("second node, within the TTL of the first node's check: sha256 %q (the new bytes: %v), error %q; want the fleet's value %s",
			sums[key], sums[key] == newSum, failed[key], want[key])
	}
	if n := o.count(key) - before; n != 0 {
		t.Errorf("second node, within the TTL of the first node's check: %d requests of %s at the origin, want 0", n, key)
	}
	stopVolfs(t, second)

	time.Sleep(time.Until(loadedAt.Add(ttl + time.Second)))
	third := startVolfs(t, args...)
	sums, failed = hashChunks(t, third.mnt, []string{key})
	if sums[key] != newSum {
		t.Errorf("third node, past the TTL: sha256 %q (the old bytes: %v), error %q; want the new bytes %s", sums[key], sums[key] == want[key], failed[key], newSum)
	}
	stopVolfs(t, third)
}
