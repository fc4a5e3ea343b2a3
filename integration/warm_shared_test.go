package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/volfs/volfs/internal/testenv"
)

// TestWarmShared: `volfs warm` walks the tiers a read walks. A layer warmed
// into a disk cache alone, then warmed again with a shared tier on a real
// redis-server, is copied from disk into the shared tier (reported as
// copied, not fetched, with no chunk GET at the origin), leaves no fleet
// lease held once it exits, and a node with only the shared tier then
// reads every chunk exactly without the origin serving one. A third warm
// finds every chunk in both tiers.
func TestWarmShared(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	origin := newByteOrigin(t, src)
	e := testenv.StartRedis(t)
	url := "redis://" + e.Addr + loaded
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr})
	defer rdb.Close()
	ctx := context.Background()
	cacheDir := t.TempDir()

	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, origin.URL)
	t.Logf("warm to disk:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 64 || c != 0 || m != 0 || x != 0 {
		t.Fatalf("warm to disk: %v, %d fetched, %d cached, %d missing, %d failed; want 64, 0, 0, 0", err, f, c, m, x)
	}
	gets := origin.chunkGets.Load()

	out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--shared-cache", url, origin.URL)
	t.Logf("warm to disk and redis:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 0 || c != 0 || m != 0 || x != 0 || !strings.Contains(out, "64 kept, 0 not kept, 64 copied between tiers") {
		t.Errorf("warm with the disk full and redis empty: %v, %d fetched, %d cached, %d missing, %d failed; want 0, 0, 0, 0 and 64 copied", err, f, c, m, x)
	}
	if n := origin.chunkGets.Load() - gets; n != 0 {
		t.Errorf("the warm that copied from disk to redis sent %d chunk GETs to the origin, want 0", n)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	values := 0
	for _, k := range keys {
		if strings.Contains(k, "lease") {
			t.Errorf("lease %s still held after warm exited", k)
		} else {
			values++
		}
	}
	if values != len(want) {
		t.Errorf("redis holds %d values after the warm, want %d", values, len(want))
	}

	// A node with only the shared tier reads the whole layer from it.
	gets = origin.chunkGets.Load()
	s := startVolfs(t, "mount", "--shared-cache", url, origin.URL)
	var paths []string
	for key := range want {
		paths = append(paths, key)
	}
	sums, failed := hashChunks(t, s.mnt, paths)
	for key, sum := range want {
		if sums[key] != sum {
			t.Errorf("%s through the shared tier: sha256 %q (failed %q), want %s", key, sums[key], failed[key], sum)
		}
	}
	if n := origin.chunkGets.Load() - gets; n != 0 {
		t.Errorf("a node reading after the warm sent %d chunk GETs to the origin, want 0 (all in redis)", n)
	}
	stopVolfs(t, s)

	out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--shared-cache", url, origin.URL)
	t.Logf("warm again:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 0 || c != 64 || m != 0 || x != 0 {
		t.Errorf("warm with both tiers full: %v, %d fetched, %d cached, %d missing, %d failed; want 0, 64, 0, 0", err, f, c, m, x)
	}
}
