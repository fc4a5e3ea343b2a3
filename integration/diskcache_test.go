package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/decode"
)

// The disk cache's cases of the integrity issue (15.1: an entry made from
// another version of the source is never served) and of the hardening
// issue (16.5: the cache directory is hostile), each through a volfs
// process mounted for real and read by cat.

// stopVolfs ends a volfs process with SIGTERM and waits for it: it
// unmounts, then finishes the disk-cache writes still running.
func stopVolfs(t *testing.T, s *serving) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("volfs exited with %v after SIGTERM, want 0", err)
	}
}

// readAll cats each key under mnt within a minute and fails the test
// unless it reads want[i].
func readAll(t *testing.T, mnt string, keys []string, want [][]byte) {
	t.Helper()
	for i, k := range keys {
		out, err := runBounded(t, time.Minute, "cat", filepath.Join(mnt, k))
		if err != nil || out != string(want[i]) {
			n := 0
			for n < len(out) && n < len(want[i]) && out[n] == want[i][n] {
				n++
			}
			t.Errorf("cat %s: %v, %d bytes, first difference at byte %d; want the %d bytes of the source", k, err, len(out), n, len(want[i]))
		}
	}
}

// chunkGets counts the GET requests an HTTP origin serves per path, and
// its HEAD requests.
type chunkGets struct {
	gets  map[string]*atomic.Int64
	heads atomic.Int64
}

// TestDiskCacheSourceRewritten: chunks rewritten in the source with bytes
// of the same size after a mount filled the disk cache read as the new
// bytes through a remount with the same --cache-dir, for a local, an HTTP
// and a gs:// source; a chunk left alone is still served from the disk
// cache (over HTTP: no GET of it, one HEAD per object).
func TestDiskCacheSourceRewritten(t *testing.T) {
	for _, kind := range []string{"file", "http", "gs"} {
		t.Run(kind, func(t *testing.T) {
			src := t.TempDir()
			// Chunk 2 is stored as "<key>.gz".
			keys, chunks := writeLayer(t, src, 3, map[int]bool{2: true})
			stored := func(i int) string {
				if i == 2 {
					return keys[i] + ".gz"
				}
				return keys[i]
			}
			var source string
			var rewrite func(i int, data []byte)
			var counts *chunkGets
			switch kind {
			case "file":
				source = src
				rewrite = func(i int, data []byte) {
					if i == 2 {
						data = gzipBytes(t, data)
					}
					// In place: the same inode, a new modification time.
					writeFile(t, filepath.Join(src, stored(i)), data)
				}
			case "http":
				counts = &chunkGets{gets: make(map[string]*atomic.Int64)}
				for i := range keys {
					counts.gets["/"+stored(i)] = new(atomic.Int64)
				}
				files := http.FileServer(http.Dir(src))
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if n, ok := counts.gets[r.URL.Path]; ok && r.Method == http.MethodGet {
						n.Add(1)
					}
					if r.Method == http.MethodHead && strings.HasPrefix(r.URL.Path, "/s0/") {
						counts.heads.Add(1)
					}
					files.ServeHTTP(w, r)
				}))
				t.Cleanup(srv.Close)
				source = srv.URL
				rewrite = func(i int, data []byte) {
					if i == 2 {
						data = gzipBytes(t, data)
					}
					p := filepath.Join(src, stored(i))
					writeFile(t, p, data)
					// Go's file server sends Last-Modified, in whole
					// seconds, and no ETag: a rewrite in the same second
					// as the first write would look unchanged (README).
					later := time.Now().Add(2 * time.Second)
					if err := os.Chtimes(p, later, later); err != nil {
						t.Fatal(err)
					}
				}
			case "gs":
				e := startGCSEmulator(t)
				putLayer(t, e, "bkt", "vol", src, false)
				source = "gs://bkt/vol"
				rewrite = func(i int, data []byte) {
					if i == 2 {
						data = gzipBytes(t, data)
					}
					e.Put("bkt", "vol/"+stored(i), data, "")
				}
			}
			cacheDir := t.TempDir()
			mount := func() *serving {
				return startVolfs(t, "mount", "--cache-dir", cacheDir, "--cache-size", "16MiB", source)
			}
			s := mount()
			readAll(t, s.mnt, keys, chunks)
			stopVolfs(t, s)

			want := [][]byte{bytes.Repeat([]byte{0xee}, hostileChunk), chunks[1], bytes.Repeat([]byte{0xdd}, hostileChunk)}
			rewrite(0, want[0])
			rewrite(2, want[2])
			if counts != nil {
				for _, n := range counts.gets {
					n.Store(0)
				}
				counts.heads.Store(0)
			}
			s = mount()
			readAll(t, s.mnt, keys, want)
			stopVolfs(t, s)
			if counts != nil {
				if got := counts.gets["/"+keys[1]].Load(); got != 0 {
					t.Errorf("GETs of the unchanged chunk through the remount: got %d, want 0 (served from the disk cache)", got)
				}
				if got := counts.gets["/"+keys[0]].Load(); got != 1 {
					t.Errorf("GETs of the rewritten chunk through the remount: got %d, want 1", got)
				}
				// A HEAD of each object that has an entry: chunks 0 and 1,
				// chunk 2's ".gz" and its plain key (absent).
				t.Logf("remount: %d HEAD requests for 3 chunks (2 plain, 1 gzip sibling)", counts.heads.Load())
				if got := counts.heads.Load(); got > 4 {
					t.Errorf("HEADs through the remount: got %d, want at most 4 (one per object)", got)
				}
			}
			// A third mount, with nothing changed: every chunk from disk.
			s = mount()
			readAll(t, s.mnt, keys, want)
			stopVolfs(t, s)
		})
	}
}

// diskKeyOf is the disk cache key of a chunk of the layer writeLayer wrote
// in the local source src, as the fs package makes it (its tierKey).
func diskKeyOf(t *testing.T, src, key string) string { return tierKeyOf(t, src, "file://"+src, key) }

// tierKeyOf is the name in the tiers below memory (disk, shared) of the
// chunk at key of the layer writeLayer wrote in dir, served from origin,
// as the fs package makes it: the source's name, NUL, the scale's recipe
// fingerprint (decode.Array.Recipe), NUL, the chunk key.
func tierKeyOf(t *testing.T, dir, origin, key string) string {
	t.Helper()
	info, err := os.ReadFile(filepath.Join(dir, "info"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := decode.ParsePrecomputed("", info)
	if err != nil {
		t.Fatal(err)
	}
	return origin + "\x00" + v.Arrays[0].Recipe() + "\x00" + key
}

// entryPath returns the path of the entry of dkey in the cache's own
// directory own, as the disk package's documentation lays it out.
func entryPath(own, dkey string) string {
	sum := sha256.Sum256([]byte(dkey))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(own, h[:2], h[2:]+".vdc")
}

// TestDiskCacheHostileDirectory: what is planted in the cache's directory
// is never served and never blocks or floods a read (a FIFO, a link to
// /dev/zero, a well-formed entry made with another secret, an entry moved
// from another chunk's name: each chunk reads as the source's bytes, in a
// bounded time and memory); the user's own *.tmp files under --cache-dir
// survive a mount; and a cache directory that its group can write is
// refused with a message that says how to fix it.
func TestDiskCacheHostileDirectory(t *testing.T) {
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 6, nil)
	parent := t.TempDir()
	foreign := []string{"notes.tmp", "00/draft.tmp", "volfs-" + strconv.Itoa(os.Geteuid()) + ".tmp"}
	for _, f := range foreign {
		os.MkdirAll(filepath.Join(parent, filepath.Dir(f)), 0o755)
		writeFile(t, filepath.Join(parent, f), []byte("the user's"))
	}
	mount := func() *serving {
		return startVolfs(t, "mount", "--cache-dir", parent, "--cache-size", "16MiB", src)
	}
	s := mount()
	readAll(t, s.mnt, keys, chunks)
	stopVolfs(t, s)

	own := filepath.Join(parent, "volfs-"+strconv.Itoa(os.Geteuid()))
	if fi, err := os.Lstat(own); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("the cache's own directory %s: %v, %v; want a directory of mode 0700", own, fi.Mode(), err)
	}
	entry := func(i int) string { return entryPath(own, diskKeyOf(t, src, keys[i])) }
	for i := range keys {
		if _, err := os.Lstat(entry(i)); err != nil {
			t.Fatalf("no disk entry for %s: %v", keys[i], err)
		}
	}
	// The identity record of chunk 2's genuine entry (key length at 16,
	// identity length at 20, header of 64 bytes: cache/envelope).
	genuine, err := os.ReadFile(entry(2))
	if err != nil {
		t.Fatal(err)
	}
	klen, ilen := binary.LittleEndian.Uint32(genuine[16:]), binary.LittleEndian.Uint32(genuine[20:])
	ident := genuine[64+klen : 64+klen+ilen]
	forger, err := disk.Open(disk.Options{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := forger.Put(diskKeyOf(t, src, keys[2]), ident, bytes.Repeat([]byte{0x66}, hostileChunk)); err != nil {
		t.Fatal(err)
	}
	forged, err := os.ReadFile(entryPath(forger.Dir(), diskKeyOf(t, src, keys[2])))
	if err != nil {
		t.Fatal(err)
	}
	forger.Close()
	moved, err := os.ReadFile(entry(4))
	if err != nil {
		t.Fatal(err)
	}
	for i, plant := range map[int]func(p string) error{
		0: func(p string) error { return syscall.Mkfifo(p, 0o600) },
		1: func(p string) error { return os.Symlink("/dev/zero", p) },
		2: func(p string) error { return os.WriteFile(p, forged, 0o600) },
		3: func(p string) error { return os.WriteFile(p, moved, 0o600) },
	} {
		os.Remove(entry(i))
		if err := plant(entry(i)); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	s = mount()
	readAll(t, s.mnt, keys, chunks)
	t.Logf("remount over a FIFO, a link to /dev/zero, a forged and a moved entry: 6 chunks read right in %v", time.Since(start).Round(time.Millisecond))
	checkPeak(t, s)
	stopVolfs(t, s)
	for _, f := range foreign {
		if _, err := os.Lstat(filepath.Join(parent, f)); err != nil {
			t.Errorf("%s under --cache-dir: gone after two mounts (%v), want it kept", f, err)
		}
	}

	if err := os.Chmod(own, 0o770); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	refusedMount(t, mnt, own+" is writable by its group or by others (mode 0770): refusing it, as ssh refuses such a directory; run chmod 700 "+own,
		"--cache-dir", parent, src)
}
