package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// warmLayer writes a precomputed layer of one scale, 128^3 uint8 in 64
// chunks of 32^3 (32 KiB) of random bytes, with chunk missing absent and
// chunk corrupt cut short. It returns every chunk key present and intact,
// with the sha256 of its bytes.
func warmLayer(t *testing.T, src, missing, corrupt string) map[string]string {
	t.Helper()
	writeFile(t, filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [128, 128, 128], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[32, 32, 32]], "encoding": "raw"}]}`))
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]string{}
	for z := 0; z < 128; z += 32 {
		for y := 0; y < 128; y += 32 {
			for x := 0; x < 128; x += 32 {
				key := fmt.Sprintf("s0/%d-%d_%d-%d_%d-%d", x, x+32, y, y+32, z, z+32)
				data := make([]byte, 32*32*32)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				switch key {
				case missing:
					continue
				case corrupt:
					data = data[:10]
				default:
					sum := sha256.Sum256(data)
					want[key] = hex.EncodeToString(sum[:])
				}
				writeFile(t, filepath.Join(src, key), data)
			}
		}
	}
	return want
}

// warmOrigin serves src over loopback HTTP; while down is set, every
// request for a chunk (under /s0/) has its connection closed unanswered,
// as an origin that went away does, while the metadata stays served.
func warmOrigin(t *testing.T, src string, down *atomic.Bool) *httptest.Server {
	t.Helper()
	files := http.FileServer(http.Dir(src))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && strings.HasPrefix(r.URL.Path, "/s0/") {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// summary returns the numbers of warm's summary line.
func warmSummaryOf(t *testing.T, out string) (fetched, cached, missing, failed int) {
	t.Helper()
	m := regexp.MustCompile(`(\d+) fetched, (\d+) already cached, (\d+) missing, (\d+) failed`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in %q", out)
	}
	fmt.Sscan(m[1]+" "+m[2]+" "+m[3]+" "+m[4], &fetched, &cached, &missing, &failed)
	return
}

// TestWarmNeedsCacheDir: `volfs warm` without --cache-dir exits 1 with
// one line that says what it needs, prefixed once (it read "volfs: volfs
// warm: --cache-dir is required"), and fetches nothing.
func TestWarmNeedsCacheDir(t *testing.T) {
	out, err := runBounded(t, time.Minute, volfsBin, "warm", t.TempDir())
	want := "volfs: warm needs --cache-dir: it fills the disk cache that a mount with the same --cache-dir reads (--dry-run needs none)\n"
	if err == nil || out != want {
		t.Errorf("volfs warm without --cache-dir: %v, %q; want exit 1 and %q", err, out, want)
	}
}

// TestWarm: `volfs warm` of a layer over HTTP stages every chunk in the
// disk cache, names the chunk that fails with a non-zero exit, skips what
// is cached when run again, and a mount with the same --cache-dir then
// reads every warmed chunk exactly while the origin's chunks are
// unreachable. With --bbox only the chunks that meet the box are cached,
// as a --dry-run over the whole scale shows.
func TestWarm(t *testing.T) {
	src := t.TempDir()
	const missing, corrupt = "s0/96-128_96-128_96-128", "s0/32-64_0-32_0-32"
	want := warmLayer(t, src, missing, corrupt)
	var down atomic.Bool
	srv := warmOrigin(t, src, &down)
	cacheDir := t.TempDir()

	start := time.Now()
	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, srv.URL)
	elapsed := time.Since(start)
	t.Logf("warm: %v\n%s", elapsed.Round(time.Millisecond), out)
	if err == nil || !strings.Contains(out, "1 chunks failed: "+corrupt) {
		t.Errorf("warm with a corrupt chunk: %v, want a non-zero exit naming %s", err, corrupt)
	}
	if f, c, m, x := warmSummaryOf(t, out); f != 62 || c != 0 || m != 1 || x != 1 {
		t.Errorf("first warm: %d fetched, %d cached, %d missing, %d failed; want 62, 0, 1, 1", f, c, m, x)
	}

	// Resumed: what is on disk is skipped (one HEAD per object, no body).
	out, _ = runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, srv.URL, "s0")
	t.Logf("warm again:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); f != 0 || c != 62 || m != 1 || x != 1 {
		t.Errorf("second warm: %d fetched, %d cached, %d missing, %d failed; want 0, 62, 1, 1", f, c, m, x)
	}
	// The bytes still moved are the corrupt chunk's 10 and the 404's body.
	if !regexp.MustCompile(`; \d+ B from the origin`).MatchString(out) {
		t.Errorf("second warm moved chunks' bytes from the origin:\n%s", out)
	}

	// The origin's chunks go away; the mount reads the warmed ones.
	down.Store(true)
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--cache-dir", cacheDir, srv.URL)
	var paths []string
	for key := range want {
		paths = append(paths, filepath.Join(s.mnt, key))
	}
	const hashAll = `
import hashlib, sys
for p in sys.argv[1:]:
    with open(p, "rb") as f:
        print(p, hashlib.sha256(f.read()).hexdigest())
`
	start = time.Now()
	out, err = runBounded(t, 2*time.Minute, python, append([]string{"-c", hashAll}, paths...)...)
	t.Logf("read %d warmed chunks with the origin's chunks unreachable: %v", len(paths), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("reading the warmed chunks: %v\n%s", err, out)
	}
	got := 0
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		p, sum, _ := strings.Cut(line, " ")
		key, _ := filepath.Rel(s.mnt, p)
		if want[key] != sum {
			t.Errorf("%s: sha256 %s, want %s", key, sum, want[key])
		}
		got++
	}
	if got != len(want) {
		t.Errorf("read %d chunks, want %d", got, len(want))
	}
	down.Store(false)

	// --bbox: x 0:32, y 0:64, z 32:64 meets two chunks.
	boxDir := t.TempDir()
	out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", boxDir, "--bbox", "0:32,0:64,32:64", srv.URL, "s0")
	t.Logf("warm --bbox:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 2 || c != 0 || m != 0 || x != 0 {
		t.Errorf("warm --bbox: %v, %d fetched, %d cached, %d missing, %d failed; want 2, 0, 0, 0", err, f, c, m, x)
	}
	out, err = runBounded(t, 2*time.Minute, volfsBin, "warm", "--dry-run", "--cache-dir", boxDir, srv.URL, "s0")
	if err != nil || !strings.Contains(out, "dry run: 64 chunks: 62 would be fetched, 2 already cached") {
		t.Errorf("warm --dry-run after the box: %v\n%s", err, out)
	}
	for _, key := range []string{"s0/0-32_0-32_32-64", "s0/0-32_32-64_32-64"} {
		if strings.Contains(out, "would fetch "+key+" ") {
			t.Errorf("dry run would fetch %s, which the box warmed", key)
		}
	}
	if !strings.Contains(out, "would fetch s0/0-32_0-32_0-32 (32 KiB)") {
		t.Errorf("dry run does not list s0/0-32_0-32_0-32, outside the box:\n%s", out)
	}
}
