package integration

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// randomGzLayer writes writeLayer's layer of n chunks, each stored as
// K.gz of random bytes (so the disk cache keeps them at their size), and
// returns its keys and decoded chunks.
func randomGzLayer(t *testing.T, src string, n int) (keys []string, chunks [][]byte) {
	t.Helper()
	gz := map[int]bool{}
	for i := range n {
		gz[i] = true
	}
	keys, chunks = writeLayer(t, src, n, gz)
	r := rand.New(rand.NewPCG(1, 2))
	for i, k := range keys {
		for j := range chunks[i] {
			chunks[i][j] = byte(r.Uint32())
		}
		writeFile(t, filepath.Join(src, k+".gz"), gzipBytes(t, chunks[i]))
	}
	return keys, chunks
}

// TestDiskCacheFullLogged: a --cache-dir on a filesystem that fills up
// (a tmpfs of 1 MiB under a --disk-cache-size of 1 GiB) serves every
// chunk right from the source and says, in one warning, that entries
// could not be written and why (on 0d63a2d: nothing in the log; the cache
// silently kept nothing more).
func TestDiskCacheFullLogged(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	src := t.TempDir()
	keys, chunks := randomGzLayer(t, src, 16)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })

	s := startVolfs(t, "mount", "--cache-dir", dir, "--disk-cache-size", "1GiB", "--cache-size", "16MiB", src)
	readAll(t, s.mnt, keys, chunks)
	stopVolfs(t, s)
	log := s.stderr.String()
	if n := strings.Count(log, "disk cache: an entry could not be written"); n != 1 || !strings.Contains(log, "no space left on device") {
		t.Errorf("%d warnings that an entry could not be written, want 1 naming ENOSPC:\n%s", n, log)
	}
}

// TestDiskCacheDamagedLogged: entries of the disk cache damaged between
// mounts (cut short, bytes flipped) are refused and the chunks read right
// from the source, with one warning naming a refused file (on 0d63a2d:
// refused in silence).
func TestDiskCacheDamagedLogged(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	keys, chunks := randomGzLayer(t, src, 4)
	parent := t.TempDir()
	mount := func() *serving {
		return startVolfs(t, "mount", "--cache-dir", parent, "--cache-size", "16MiB", "--no-disk-passthrough", src)
	}
	s := mount()
	readAll(t, s.mnt, keys, chunks)
	stopVolfs(t, s)

	own := filepath.Join(parent, "volfs-"+strconv.Itoa(os.Geteuid()))
	var damaged []string
	for i := range 2 {
		p := entryPath(own, diskKeyOf(t, src, keys[i]))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			b = b[:len(b)/2]
		} else {
			b[len(b)-100] ^= 0xff
		}
		writeFile(t, p, b)
		damaged = append(damaged, p)
	}
	s = mount()
	readAll(t, s.mnt, keys, chunks)
	stopVolfs(t, s)
	log := s.stderr.String()
	if n := strings.Count(log, "disk cache: a file refused as damaged"); n != 1 || !strings.Contains(log, damaged[0]) && !strings.Contains(log, damaged[1]) {
		t.Errorf("%d warnings of a file refused, want 1 naming one of %v:\n%s", n, damaged, log)
	}
}
