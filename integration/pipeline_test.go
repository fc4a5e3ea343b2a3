package integration

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
)

// The read pipeline through real mounts: read-ahead across chunk files,
// the disk cache across remounts, /metrics, stable inode numbers.

// mounted is a tree served at mnt by this process.
// catC runs one cat of paths (one process, so one reader) in the C locale
// and returns what it printed.
func catC(t *testing.T, paths ...string) []byte {
	t.Helper()
	cmd := exec.Command("cat", paths...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cat: %v", err)
	}
	return out
}

// lexical returns keys and chunks in the lexical order of the keys: the
// order of `cat s0/0-*` (the chunks; the views sit beside them) in the C locale. For the layer's names it is not the
// grid order ("0-64_0-64_128-160" comes before "0-64_0-64_32-64").
func lexical(keys []string, chunks [][]byte) ([]string, []byte) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	var sorted []string
	var want []byte
	for _, i := range idx {
		sorted = append(sorted, keys[i])
		want = append(want, chunks[i]...)
	}
	return sorted, want
}

// TestReadAheadSequentialCat: one `cat s0/0-*` reads 32 chunk files in the
// lexical order of their names (which is not the grid order); read-ahead
// prefetches the chunks ahead of it, and cat reads every prefetched chunk.
func TestReadAheadSequentialCat(t *testing.T) {
	src := t.TempDir()
	gz := map[int]bool{}
	for i := range 32 {
		gz[i] = true
	}
	keys, chunks := writeLayer(t, src, 32, gz)
	m := mountTree(t, src, fs.Options{ReadAhead: 8 * hostileChunk})
	sorted, want := lexical(keys, chunks)
	if slices.Equal(sorted, keys) {
		t.Fatal("the test layer's lexical order is its grid order: it tests nothing")
	}
	cmd := exec.Command("sh", "-c", `cat "$1"/s0/0-*`, "sh", m.mnt)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("cat s0/0-*: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("cat s0/0-*: %d bytes differ from the chunks written, in lexical order", len(got))
	}
	s := m.tree.StoreStats()
	t.Logf("store: %+v", s)
	if s.PrefetchIssued < 16 {
		t.Errorf("prefetches issued for a sequential cat of 32 chunks: got %d, want at least 16", s.PrefetchIssued)
	}
	if s.PrefetchUsed != s.PrefetchIssued {
		t.Errorf("prefetches used: got %d of %d issued, want all", s.PrefetchUsed, s.PrefetchIssued)
	}
}

// TestReadAheadRandomOrder: one cat of the 32 chunk files in a shuffled
// order issues few prefetches, and wastes at most a few.
func TestReadAheadRandomOrder(t *testing.T) {
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 32, nil)
	m := mountTree(t, src, fs.Options{ReadAhead: 8 * hostileChunk})
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(keys))
	var paths []string
	var want []byte
	for _, i := range order {
		paths = append(paths, filepath.Join(m.mnt, keys[i]))
		want = append(want, chunks[i]...)
	}
	if got := catC(t, paths...); !bytes.Equal(got, want) {
		t.Fatalf("cat in shuffled order: %d bytes differ from the chunks written", len(got))
	}
	s := m.tree.StoreStats()
	t.Logf("store: %+v", s)
	// A shuffled order steps to a lexical neighbour now and then, which
	// opens a window of one chunk that the next jump cancels.
	if wasted := s.PrefetchIssued - s.PrefetchUsed; wasted > 4 {
		t.Errorf("prefetches not used in a random order: got %d (of %d issued), want at most 4", wasted, s.PrefetchIssued)
	}
}

// countingOrigin serves dir over HTTP and counts the GET requests for
// chunk objects (under /s0/); HEADs, which check disk entries, are not
// counted.
func countingOrigin(t *testing.T, dir string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/s0/") && r.Method == http.MethodGet {
			n.Add(1)
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv, &n
}

// TestDiskCacheAcrossRemount: a mount with a disk cache reads every chunk
// from the origin once; a second mount of a fresh process state (a new
// tree, the cache directory reopened) reads them without a single GET
// from the origin (a HEAD per object checks each entry); a cache file damaged on disk is detected and that one
// chunk fetched again, with the right bytes.
func TestDiskCacheAcrossRemount(t *testing.T) {
	src := t.TempDir()
	gz := map[int]bool{0: true, 3: true}
	keys, chunks := writeLayer(t, src, 8, gz)
	_, want := lexical(keys, chunks)
	origin, requests := countingOrigin(t, src)
	cacheDir := t.TempDir()
	mountWithDisk := func() *mounted {
		d, err := disk.Open(disk.Options{Dir: cacheDir, MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return mountTree(t, origin.URL, fs.Options{Disk: cache.NewDisk(d)})
	}
	catAll := func(m *mounted) []byte {
		cmd := exec.Command("sh", "-c", `cat "$1"/s0/0-*`, "sh", m.mnt)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("cat s0/0-*: %v", err)
		}
		return out
	}

	m := mountWithDisk()
	if got := catAll(m); !bytes.Equal(got, want) {
		t.Fatalf("first mount: %d bytes differ from the chunks written", len(got))
	}
	m.unmount()
	if got := requests.Load(); got < 8 {
		t.Fatalf("chunk requests of the first mount: got %d, want at least 8", got)
	}

	requests.Store(0)
	m = mountWithDisk()
	if got := catAll(m); !bytes.Equal(got, want) {
		t.Fatalf("remount: %d bytes differ from the chunks written", len(got))
	}
	m.unmount()
	if got := requests.Load(); got != 0 {
		t.Errorf("chunk GETs of the remount: got %d, want 0 (all in the disk cache, checked by HEAD)", got)
	}

	// Damage one chunk's cache file's last byte (its payload). The
	// others hold the metadata and listings the tree read, keyed
	// SOURCE NUL NUL KIND NUL KEY (fetcher/keep: "Kept answers").
	var files []string
	filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".vdc") {
			b, _ := os.ReadFile(p)
			// The key follows the envelope's 64-byte header.
			if len(b) >= 64 && !bytes.Contains(b[64:64+min(int(binary.LittleEndian.Uint32(b[16:])), len(b)-64)], []byte("\x00\x00")) {
				files = append(files, p)
			}
		}
		return nil
	})
	if len(files) != 8 {
		t.Fatalf("cache files: got %d, want 8", len(files))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	writeFile(t, files[0], data)

	requests.Store(0)
	m = mountWithDisk()
	if got := catAll(m); !bytes.Equal(got, want) {
		t.Fatalf("remount with a damaged cache file: %d bytes differ from the chunks written", len(got))
	}
	m.unmount()
	// One chunk again: its plain key, then ".gz" when it is stored so.
	if got := requests.Load(); got < 1 || got > 2 {
		t.Errorf("chunk requests after damaging one cache file: got %d, want 1 or 2 (that chunk only)", got)
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMetricsEndpoint: `volfs mount --metrics-addr` serves the named series
// of the store, read-ahead, disk cache, loads and fetcher.
func TestMetricsEndpoint(t *testing.T) {
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 4, map[int]bool{1: true})
	origin, _ := countingOrigin(t, src)
	addr := freeAddr(t)
	s := startVolfs(t, "mount", "--metrics-addr", addr, "--cache-dir", t.TempDir(), origin.URL)
	if got := catC(t, filepath.Join(s.mnt, keys[1])); !bytes.Equal(got, chunks[1]) {
		t.Fatalf("cat %s: %d bytes differ from the chunk written", keys[1], len(got))
	}
	body := scrapeMetrics(t, addr)
	for _, want := range []string{
		"volfs_cache_misses_total 1",
		"volfs_cache_hits_total",
		"volfs_prefetch_issued_total",
		"volfs_readahead_max_bytes 6.7108864e+07",
		"volfs_store_batches_total{mode=\"pooled\"}",
		"volfs_disk_cache_puts_total", // written behind the read: 0 or 1 by now
		"volfs_chunk_loads_total{encoding=\"raw\"} 1",
		"volfs_chunk_load_seconds_total{encoding=\"raw\"}",
		"volfs_fetch_objects_total",
		"volfs_fetch_bytes_total",
		"volfs_fetch_dials_total",
		"volfs_fetch_retries_total 0",
		"volfs_fetch_errors_total{kind=\"not_found\"} 1", // the plain key of a ".gz" chunk
		"go_goroutines",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// TestStableInodes: a chunk file's st_ino is the same after the kernel
// forgets its inodes (drop_caches), and two chunks' differ.
func TestStableInodes(t *testing.T) {
	src := t.TempDir()
	keys, _ := writeLayer(t, src, 4, nil)
	m := mountTree(t, src, fs.Options{})
	stat := func() string {
		return run(t, "stat", "-c", "%i", filepath.Join(m.mnt, keys[0]), filepath.Join(m.mnt, keys[1]), filepath.Join(m.mnt, "s0"), filepath.Join(m.mnt, "info"))
	}
	before := stat()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2\n"), 0); err != nil {
		t.Skipf("cannot drop the kernel's inode caches: %v", err)
	}
	after := stat()
	if before != after {
		t.Errorf("inode numbers changed after drop_caches:\nbefore %q\nafter  %q", before, after)
	}
	f := strings.Fields(before)
	if len(f) != 4 || len(slices.Compact(slices.Sorted(slices.Values(f)))) != 4 {
		t.Errorf("inode numbers of two chunks, a directory and a file: got %q, want 4 distinct", before)
	}
	t.Logf("inodes: %s", strings.Join(f, " "))
}

// TestCatProgress: `volfs cat` of a large file draws a progress bar on
// stderr when stderr is a terminal (script(1) gives it one), and writes
// nothing to stderr otherwise.
func TestCatProgress(t *testing.T) {
	src := t.TempDir()
	sparse(t, filepath.Join(src, "big"), 64<<20)
	cmd := exec.Command(volfsBin, "cat", "--log-level", "warn", src, "big")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("volfs cat: %v\n%s", err, stderr.String())
	}
	if stdout.Len() != 64<<20 || stderr.Len() != 0 {
		t.Errorf("volfs cat into pipes: got %d bytes out and stderr %q, want %d bytes and no stderr", stdout.Len(), stderr.String(), 64<<20)
	}
	script := testenv.LookPath(t, "script", "util-linux; for a terminal to give volfs cat")
	// Inside script, stderr is the terminal and stdout goes to /dev/null.
	out, err := exec.Command(script, "-qec", volfsBin+" cat --log-level warn "+src+" big >/dev/null", "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("100%")) || !bytes.Contains(out, []byte("big")) {
		t.Errorf("volfs cat on a terminal: no progress bar reaching 100%% for big in %q", out)
	}
}

// TestViewReadAhead: a sequential cat of volume.raw has the chunks under the
// bytes after each read prefetched, and every prefetched chunk is then
// read; the bytes are the volume's.
func TestViewReadAhead(t *testing.T) {
	src := t.TempDir()
	vol := writeRawLayer(t, src, 256, 256, 64, 64, 64, 16)
	m := mountTree(t, src, fs.Options{ReadAhead: 64 << 20})
	got := catC(t, filepath.Join(m.mnt, "s0", "volume.raw"))
	if !bytes.Equal(got, vol) {
		t.Fatalf("volume.raw: %d bytes differ from the volume's %d", len(got), len(vol))
	}
	s := m.tree.StoreStats()
	t.Logf("store: %+v", s)
	if s.PrefetchIssued < 32 {
		t.Errorf("prefetches issued for a sequential cat of volume.raw over 64 chunks: got %d, want at least 32", s.PrefetchIssued)
	}
	if s.PrefetchUsed != s.PrefetchIssued {
		t.Errorf("prefetches used: got %d of %d issued, want all", s.PrefetchUsed, s.PrefetchIssued)
	}
}

// TestMetadataTTL: through a mount, an object added to the source after a
// lookup missed it shows once the listing is older than --metadata-ttl
// (the kernel's negative entry expires as soon), and never without one.
func TestMetadataTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want bool
	}{{0, false}, {time.Millisecond, true}} {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		m := mountTree(t, src, fs.Options{MetadataTTL: tc.ttl})
		if _, err := runErr("stat", filepath.Join(m.mnt, "b")); err == nil {
			t.Fatalf("ttl %v: b exists before it was written", tc.ttl)
		}
		if err := os.WriteFile(filepath.Join(src, "b"), []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // past the TTL, not a timing assertion
		out, err := runErr("cat", filepath.Join(m.mnt, "b"))
		listed := strings.Contains(run(t, "ls", m.mnt), "b")
		if got := err == nil && out == "b"; got != tc.want || listed != tc.want {
			t.Errorf("ttl %v: added object reads %v (%q, %v), is listed %v; want %v", tc.ttl, got, out, err, listed, tc.want)
		}
	}
}
