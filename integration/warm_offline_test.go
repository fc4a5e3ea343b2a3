package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hashChunks reads every chunk of keys under mnt with one python3
// process and returns the sha256 of each, and the keys whose read failed
// with the errno it failed with ("EIO").
func hashChunks(t *testing.T, mnt string, keys []string) (sums, failed map[string]string) {
	t.Helper()
	const script = `
import errno, hashlib, os, sys
for k in sys.argv[2:]:
    try:
        with open(os.path.join(sys.argv[1], k), "rb") as f:
            print("ok", k, hashlib.sha256(f.read()).hexdigest())
    except OSError as e:
        print("err", k, errno.errorcode.get(e.errno, str(e.errno)))
`
	out, err := runBounded(t, 2*time.Minute, python, append([]string{"-c", script, mnt}, keys...)...)
	if err != nil {
		t.Fatalf("reading chunks: %v\n%s", err, out)
	}
	sums, failed = map[string]string{}, map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("python3 printed %q", line)
		}
		if f[0] == "ok" {
			sums[f[1]] = f[2]
		} else {
			failed[f[1]] = f[2]
		}
	}
	return sums, failed
}

// TestWarmOriginGone: after `volfs warm` of part of a layer, the origin
// goes away entirely (its listener closed: every connection refused). A
// mount with the same --cache-dir builds its tree from the metadata and
// listings warm kept on disk, with one warning, and reads every warmed
// chunk exactly, and the one warm found missing as zeros; a chunk that
// was not warmed is EIO, never zeros.
func TestWarmOriginGone(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	src := t.TempDir()
	const missing = "s0/96-128_96-128_0-32"
	want := warmLayer(t, src, missing, "")
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	defer srv.Close()
	cacheDir := t.TempDir()

	// The lower half in z: 31 chunks warmed and one found missing; 32
	// not warmed.
	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, "--bbox", ",,0:64", srv.URL, "s0")
	t.Logf("warm:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 31 || c != 0 || m != 1 || x != 0 {
		t.Fatalf("warm: %v, %d fetched, %d cached, %d missing, %d failed; want 31, 0, 1, 0", err, f, c, m, x)
	}
	srv.Close()
	if _, err := http.Get(srv.URL + "/info"); err == nil {
		t.Fatal("the origin still answers after Close")
	}

	start := time.Now()
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--cache-dir", cacheDir, srv.URL)
	t.Logf("mounted with the origin gone in %v", time.Since(start).Round(time.Millisecond))
	warmed, cold := splitWarmed(want)
	if len(warmed) != 31 || len(cold) != 32 {
		t.Fatalf("%d warmed and %d cold chunks, want 31 and 32", len(warmed), len(cold))
	}
	// The chunk warm found missing reads as the fill value, as it did.
	zero := sha256.Sum256(make([]byte, 32*32*32))
	want[missing] = hex.EncodeToString(zero[:])
	warmed = append(warmed, missing)
	start = time.Now()
	sums, failed := hashChunks(t, s.mnt, warmed)
	t.Logf("read %d warmed chunks with the origin gone: %v", len(warmed), time.Since(start).Round(time.Millisecond))
	for _, key := range warmed {
		if sums[key] != want[key] {
			t.Errorf("%s: sha256 %q (failed: %q), want %s", key, sums[key], failed[key], want[key])
		}
	}
	// The tree itself: the root lists, info reads.
	if names, err := os.ReadDir(s.mnt); err != nil || len(names) < 2 {
		t.Errorf("ls of the mount with the origin gone: %v, %v", names, err)
	}
	var info struct{ Scales []struct{ Encoding string } }
	if b, err := os.ReadFile(filepath.Join(s.mnt, "info")); err != nil || json.Unmarshal(b, &info) != nil || len(info.Scales) != 1 {
		t.Errorf("info with the origin gone: %v\n%s", err, b)
	}
	start = time.Now()
	sums, failed = hashChunks(t, s.mnt, cold[:3])
	t.Logf("read 3 chunks not warmed: %v", time.Since(start).Round(time.Millisecond))
	for _, key := range cold[:3] {
		if failed[key] != "EIO" {
			t.Errorf("%s, not warmed, with the origin gone: %q (sha256 %q), want EIO", key, failed[key], sums[key])
		}
	}
	if n := strings.Count(s.stderr.String(), "the origin cannot be reached"); n != 1 {
		t.Errorf("%d warnings that the origin cannot be reached, want 1:\n%s", n, s.stderr.String())
	}
	checkPeak(t, s)
}

// TestWarmMetadataChanged: metadata that changed at an origin that
// answers is served as the origin has it now, not as warm kept it; and
// the copy on disk is replaced, so that the origin going away afterwards
// leaves the new metadata in force.
func TestWarmMetadataChanged(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	warmLayer(t, src, "", "")
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	defer srv.Close()
	cacheDir := t.TempDir()
	if out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--cache-dir", cacheDir, srv.URL, "s0"); err != nil {
		t.Fatalf("warm: %v\n%s", err, out)
	}

	// The layer shrinks to 96 in z: the chunks of the last 32 go.
	info, err := os.ReadFile(filepath.Join(src, "info"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(info), `"size": [128, 128, 128]`, `"size": [128, 128, 96]`, 1)
	if changed == string(info) {
		t.Fatal("info not changed")
	}
	writeFile(t, filepath.Join(src, "info"), []byte(changed))

	sizeOf := func(mnt string) (int, int) {
		t.Helper()
		var got struct {
			Scales []struct{ Size []int } `json:"scales"`
		}
		b, err := os.ReadFile(filepath.Join(mnt, "info"))
		if err != nil || json.Unmarshal(b, &got) != nil || len(got.Scales) != 1 || len(got.Scales[0].Size) != 3 {
			t.Fatalf("info: %v\n%s", err, b)
		}
		names, err := os.ReadDir(filepath.Join(mnt, "s0"))
		if err != nil {
			t.Fatal(err)
		}
		chunks := 0
		for _, n := range names {
			if strings.Count(n.Name(), "_") == 2 {
				chunks++
			}
		}
		return got.Scales[0].Size[2], chunks
	}
	s := startVolfs(t, "mount", "--cache-dir", cacheDir, srv.URL)
	if z, n := sizeOf(s.mnt); z != 96 || n != 48 {
		t.Errorf("origin up, info changed: z size %d and %d chunk files, want 96 and 48 (the origin's, not the disk copy's)", z, n)
	}
	stopVolfs(t, s)

	srv.Close()
	s = startVolfs(t, "mount", "--cache-dir", cacheDir, srv.URL)
	if z, n := sizeOf(s.mnt); z != 96 || n != 48 {
		t.Errorf("origin gone after the change: z size %d and %d chunk files, want 96 and 48 (the copy the last mount replaced)", z, n)
	}
}

// splitWarmed splits the chunk keys of want into those of z 0 to 64 (what
// `warm --bbox ,,0:64` fetched: keys ending _0-32 or _32-64) and the rest.
func splitWarmed(want map[string]string) (warmed, cold []string) {
	for key := range want {
		if strings.HasSuffix(key, "_0-32") || strings.HasSuffix(key, "_32-64") {
			warmed = append(warmed, key)
		} else {
			cold = append(cold, key)
		}
	}
	return warmed, cold
}
