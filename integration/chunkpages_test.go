package integration

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The cases of docs/CONSISTENCY.md, "A chunk rewritten during a mount":
// a decoded chunk file whose object is rewritten under a mount with
// --metadata-ttl reads as one version, old or new, never a mix of the
// kernel's cached pages of the old with bytes of the new; once the TTL has
// passed a new open reads the new version, whether the old one is held by
// the kernel's page cache, by the memory cache, or by nobody.

// chunkArray writes, in dir, a Zarr v2 array of len(data) uint8 in one
// chunk "0" that stores data zlib-compressed (so that it is decoded and
// kept in memory, not passed through), by rename: a rewrite is a new
// file, which the local source tells apart by its inode.
func chunkArray(t *testing.T, dir string, data []byte) {
	t.Helper()
	writeFile(t, filepath.Join(dir, ".zarray"), fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1", "compressor": {"id": "zlib", "level": 1}, "fill_value": 0, "order": "C", "filters": null}`, len(data), len(data)))
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, 1)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".0.tmp")
	writeFile(t, tmp, b.Bytes())
	if err := os.Rename(tmp, filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
}

// chunkVersions are two versions of a chunk of n bytes, every byte of one
// unlike the other's at the same offset.
func chunkVersions(n int64) (v1, v2 []byte) {
	v1 = patternBytes(0, n)
	v2 = bytes.Clone(v1)
	for i := range v2 {
		v2[i] ^= 0x5a
	}
	return v1, v2
}

// readDroppingErr is readDropping that returns the error of the read
// (strerror, or "None") with the bytes read before it.
func readDroppingErr(t *testing.T, file string, off, n int64) ([]byte, string) {
	t.Helper()
	return pythonRead(t, "read of "+file, `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, int(sys.argv[2]), int(sys.argv[3]), os.POSIX_FADV_DONTNEED)
got, err = bytearray(), None
try:
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        got += b
except OSError as e:
    err = e.strerror
os.close(fd)
open(sys.argv[4], "wb").write(got)
print(err)
`, file, fmt.Sprint(off), fmt.Sprint(n))
}

// pythonRead runs the python3 program script with args and, last, a path
// it writes the bytes it read to, and returns them with what it printed
// (the error of its read, or "None"); it fails the test, naming what,
// when python3 itself fails.
func pythonRead(t *testing.T, what, script string, args ...string) ([]byte, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "got")
	msg, err := runBounded(t, time.Minute, "/usr/bin/python3", append([]string{"-c", script}, append(args, out)...)...)
	if err != nil {
		t.Fatalf("python3 %s: %v\n%s", what, err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return got, strings.TrimSpace(msg)
}

// readDropping reads file whole with python3 after asking the kernel to
// drop its cached pages of the n bytes at off (posix_fadvise DONTNEED),
// and returns what it read, or fails the test.
func readDropping(t *testing.T, file string, off, n int64) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "got")
	msg, err := runBounded(t, time.Minute, "/usr/bin/python3", "-c", `
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, int(sys.argv[2]), int(sys.argv[3]), os.POSIX_FADV_DONTNEED)
os.close(fd)
with open(sys.argv[1], "rb") as f:
    got = f.read()
open(sys.argv[4], "wb").write(got)
`, file, fmt.Sprint(off), fmt.Sprint(n), out)
	if err != nil {
		t.Fatalf("python3 read of %s: %v\n%s", file, err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// versionOf names which of v1 and v2 got is, or how it is neither.
func versionOf(got, v1, v2 []byte) string {
	switch {
	case bytes.Equal(got, v1):
		return "old"
	case bytes.Equal(got, v2):
		return "new"
	case len(got) != len(v1):
		return fmt.Sprintf("%d bytes, of neither version's size", len(got))
	}
	old, new := 0, 0
	for i := range got {
		switch got[i] {
		case v1[i]:
			old++
		case v2[i]:
			new++
		}
	}
	return fmt.Sprintf("a mix: %d bytes of the old version, %d of the new, %d of neither", old, new, len(got)-old-new)
}

// TestChunkPagesRewrittenTTL: a chunk larger than the memory cache (so
// that every load reads the source) is read whole, which leaves it in
// the kernel's page cache, then rewritten. Once --metadata-ttl has
// passed, a read that finds half of the old version's pages dropped must
// read the new version whole: before, it read the old version's cached
// half and the new version's other half.
func TestChunkPagesRewrittenTTL(t *testing.T) {
	const size = 17 << 20 // beyond the 16 MiB memory cache
	v1, v2 := chunkVersions(size)
	src := t.TempDir()
	chunkArray(t, src, v1)
	s := startVolfs(t, "mount", "--metadata-ttl", "1s", "--cache-size", "16MiB", "--read-ahead", "0", src)
	file := filepath.Join(s.mnt, "0")
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v1) {
		t.Fatalf("before the rewrite: %s, want the old version", versionOf(got, v1, v2))
	}
	chunkArray(t, src, v2)
	time.Sleep(2 * time.Second)
	for i := range 2 {
		if got := readDropping(t, file, size/2, size/2); !bytes.Equal(got, v2) {
			t.Errorf("read %d, 2 s after the rewrite, half of the pages dropped: %s, want the new version\nvolfs log:\n%s", i, versionOf(got, v1, v2), s.stderr.String())
		}
	}
}

// TestChunkPagesRewrittenNoTTL: as TestChunkPagesRewrittenTTL with the
// default --metadata-ttl 0, where an open keeps pages whose version
// memory does not hold without asking the origin: the read that loads
// the rewritten chunk for the dropped half fails with ESTALE after a
// prefix of the old version (never the new version's bytes after the
// old's), and the next open drops the pages and reads the new version
// whole.
func TestChunkPagesRewrittenNoTTL(t *testing.T) {
	const size = 17 << 20
	v1, v2 := chunkVersions(size)
	src := t.TempDir()
	chunkArray(t, src, v1)
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--read-ahead", "0", src)
	file := filepath.Join(s.mnt, "0")
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v1) {
		t.Fatalf("before the rewrite: %s, want the old version", versionOf(got, v1, v2))
	}
	chunkArray(t, src, v2)
	got, errstr := readDroppingErr(t, file, size/2, size/2)
	t.Logf("the read after the rewrite: %d bytes, error %s", len(got), errstr)
	switch {
	case errstr == "None" && !bytes.Equal(got, v1) && !bytes.Equal(got, v2):
		t.Errorf("the read after the rewrite: %s, want one version", versionOf(got, v1, v2))
	case errstr != "None" && (errstr != "Stale file handle" || !bytes.HasPrefix(v1, got) && !bytes.HasPrefix(v2, got)):
		t.Errorf("the read after the rewrite: %s after %d bytes (a prefix of the old version: %v), want ESTALE after a prefix of one version",
			errstr, len(got), bytes.HasPrefix(v1, got))
	}
	if got := readDropping(t, file, size/2, size/2); !bytes.Equal(got, v2) {
		t.Errorf("the next read: %s, want the new version\nvolfs log:\n%s", versionOf(got, v1, v2), s.stderr.String())
	}
}

// TestChunkMemoryRewrittenTTL: a chunk held by the memory cache is
// rewritten; once --metadata-ttl has passed, a new open reads the new
// version (the memory's copy is checked as the disk cache's is), whether
// the kernel still holds the old version's pages or not. Before, memory
// served the old version for the mount's life.
//
// Over HTTP, the origin names versions by ETag (etagFiles).
func TestChunkMemoryRewrittenTTL(t *testing.T) {
	for _, kind := range []string{"file", "http"} {
		t.Run(kind, func(t *testing.T) { chunkMemoryRewrittenTTL(t, kind) })
	}
}

func chunkMemoryRewrittenTTL(t *testing.T, kind string) {
	const size = 256 << 10
	v1, v2 := chunkVersions(size)
	src := t.TempDir()
	chunkArray(t, src, v1)
	source := src
	if kind == "http" {
		srv := httptest.NewServer(etagFiles(src))
		defer srv.Close()
		source = srv.URL
	}
	s := startVolfs(t, "mount", "--metadata-ttl", "1s", "--read-ahead", "0", source)
	file := filepath.Join(s.mnt, "0")
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v1) {
		t.Fatalf("before the rewrite: %s, want the old version", versionOf(got, v1, v2))
	}
	chunkArray(t, src, v2)
	// Within the TTL, the old version whole, or the new whole.
	if got := readDropping(t, file, size/2, size/2); !bytes.Equal(got, v1) && !bytes.Equal(got, v2) {
		t.Errorf("read within the TTL of the rewrite: %s, want one version", versionOf(got, v1, v2))
	}
	time.Sleep(2 * time.Second)
	for i, drop := range []int64{0, size} {
		if got := readDropping(t, file, 0, drop); !bytes.Equal(got, v2) {
			t.Errorf("read %d, 2 s after the rewrite, %d bytes of pages dropped: %s, want the new version\nvolfs log:\n%s", i, drop, versionOf(got, v1, v2), s.stderr.String())
		}
	}
}

// etagFiles serves the files of dir with Range, and an ETag that is a
// hash of each file's bytes.
func etagFiles(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path.Clean("/"+r.URL.Path))))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, sha256.Sum256(b)))
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	})
}

// TestChunkHandleOneVersion: a handle open across the rewrite of a chunk
// that the memory cache cannot hold reads the version it began with, or
// fails with ESTALE: never the old version's first bytes and the new
// version's rest (before, every read of the handle loaded the chunk
// again from the source).
func TestChunkHandleOneVersion(t *testing.T) {
	const size = 17 << 20
	v1, v2 := chunkVersions(size)
	src := t.TempDir()
	chunkArray(t, src, v1)
	s := startVolfs(t, "mount", "--metadata-ttl", "1s", "--cache-size", "16MiB", "--read-ahead", "0", src)
	finish := openReader(t, filepath.Join(s.mnt, "0"))
	chunkArray(t, src, v2)
	got, errstr := finish()
	checkOldHandle(t, got, errstr, v1)
	if errstr != "None" && !strings.Contains(s.stderr.String(), "rewritten") {
		t.Errorf("ESTALE without a log line that says why:\n%s", s.stderr.String())
	}
}

// TestChunkHandleAcrossNewOpen: a handle opened before a chunk held in
// memory is rewritten reads a prefix; once --metadata-ttl has passed a
// new open reads the new version whole, which drops the kernel's pages
// of the old; the old handle then reads on: the old version whole or a
// prefix of it and ESTALE, with a log line naming the file, never the new
// version's bytes (before, it read the old version's head from the page
// cache and memory's old copy for the rest, while the new open read
// the old version too).
func TestChunkHandleAcrossNewOpen(t *testing.T) {
	v1, v2, src, file, s := mountChunkTTL(t)
	finish := openReader(t, file)
	chunkArray(t, src, v2)
	time.Sleep(2 * time.Second)
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v2) {
		t.Errorf("a new open 2 s after the rewrite: %s, want the new version", versionOf(got, v1, v2))
	}
	got, errstr := finish()
	checkOldHandle(t, got, errstr, v1)
	if errstr != "None" && !strings.Contains(s.stderr.String(), "c/0") && !strings.Contains(s.stderr.String(), "rewritten") {
		t.Errorf("ESTALE without a log line that says why:\n%s", s.stderr.String())
	}
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v2) {
		t.Errorf("a new open once the old handle is closed: %s, want the new version", versionOf(got, v1, v2))
	}
}

// TestViewMemoryRewrittenTTL: a stitched view reads its chunks from
// memory, which checks a chunk held longer than --metadata-ttl as a chunk
// file's read does: once the TTL has passed, a read of the view (its
// pages dropped: a view's page cache is not versioned) shows the
// rewritten chunk. Before, memory served the old chunk for the mount's
// life.
func TestViewMemoryRewrittenTTL(t *testing.T) {
	src, file, keys, chunks := mountViewTTL(t)
	old := bytes.Join(chunks, nil)
	fresh := rewriteFirstChunk(t, src, keys)
	want := bytes.Join(append([][]byte{fresh}, chunks[1:]...), nil)
	if got := readDropping(t, file, 0, int64(len(old))); !bytes.Equal(got, want) {
		t.Errorf("the view 2 s after its first chunk was rewritten: %d bytes, first chunk new %v, the rest as before %v",
			len(got), bytes.HasPrefix(got, fresh), len(got) == len(want) && bytes.Equal(got[hostileChunk:], want[hostileChunk:]))
	}
}

// TestViewPagesRewrittenTTL: a stitched view is of one version per chunk.
// Its pages are kept by the kernel across opens; once one of its chunks
// is rewritten and --metadata-ttl has passed, an open must not read the
// chunk's region part from the old version's cached pages and part from
// the new version (before, a read that found half the region's pages
// dropped did: the view's pages named no versions). Each case reads the
// view whole, rewrites its first chunk, and 2 s later:
//
//   - drops the second half of the chunk's region from the page cache and
//     reads the view: the chunk's region is the new version whole;
//   - the same, with a handle opened before the rewrite still reading:
//     the new open reads the new version whole, the old handle the old
//     view whole or a prefix of it and ESTALE;
//   - the same on a --direct-io mount, where no pages are kept and each
//     handle reads through a record of its own: the old handle, which read
//     the chunk's head before the rewrite, must not read its tail from the
//     new version (a record per handle, not only per page cache).
func TestViewPagesRewrittenTTL(t *testing.T) {
	for _, c := range []struct {
		name   string
		paused bool
		flags  []string
	}{
		{"paused=false", false, nil},
		{"paused=true", true, nil},
		{"direct-io", true, []string{"--direct-io"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, file, keys, chunks := mountViewTTL(t, c.flags...)
			old := bytes.Join(chunks, nil)
			var finish func() ([]byte, string)
			if c.paused {
				finish = openReader(t, file)
			}
			fresh := rewriteFirstChunk(t, src, keys)
			want := bytes.Join(append([][]byte{fresh}, chunks[1:]...), nil)
			got := readDropping(t, file, hostileChunk/2, hostileChunk/2)
			if !bytes.Equal(got, want) {
				first := got[:min(len(got), hostileChunk)]
				t.Errorf("the view 2 s after its first chunk was rewritten, half its region's pages dropped: %d bytes; the chunk's region: %d bytes old, %d new, want all %d new",
					len(got), bytes.Count(first, chunks[0][:1]), bytes.Count(first, fresh[:1]), hostileChunk)
			}
			if finish != nil {
				got, errstr := finish()
				checkOldHandle(t, got, errstr, old)
			}
		})
	}
}

// mountViewTTL writes a layer of four chunks (writeLayer) to a directory,
// mounts it with --metadata-ttl 1s and no read-ahead, and reads its
// stitched view whole, as the view-rewrite tests begin: it returns the
// source directory, the view's path, and the chunks' keys and bytes.
// flags are more flags of the mount.
func mountViewTTL(t *testing.T, flags ...string) (src, file string, keys []string, chunks [][]byte) {
	t.Helper()
	src = t.TempDir()
	keys, chunks = writeLayer(t, src, 4, nil)
	s := startVolfs(t, append(append([]string{"mount", "--metadata-ttl", "1s", "--read-ahead", "0"}, flags...), src)...)
	file = filepath.Join(s.mnt, "s0", "volume.raw")
	old := bytes.Join(chunks, nil)
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, old) {
		t.Fatalf("the view before the rewrite: %d bytes, want the %d of its chunks", len(got), len(old))
	}
	return src, file, keys, chunks
}

// rewriteFirstChunk rewrites the first chunk of mountViewTTL's layer as
// 0xee bytes and waits 2 s, past the mount's TTL: it returns the new bytes.
func rewriteFirstChunk(t *testing.T, src string, keys []string) []byte {
	t.Helper()
	fresh := bytes.Repeat([]byte{0xee}, hostileChunk)
	time.Sleep(10 * time.Millisecond) // a modification time the file system can tell apart
	writeFile(t, filepath.Join(src, keys[0]), fresh)
	time.Sleep(2 * time.Second)
	return fresh
}

// mmapRead maps file with mmap(2), MAP_PRIVATE when private (Python's
// ACCESS_COPY), MAP_SHARED otherwise (ACCESS_READ), and reads it whole
// through the mapping: it returns the bytes, or the error of the mmap
// (strerror) with none.
func mmapRead(t *testing.T, file string, private bool) ([]byte, string) {
	t.Helper()
	access := "mmap.ACCESS_READ"
	if private {
		access = "mmap.ACCESS_COPY"
	}
	return pythonRead(t, "mmap of "+file, `
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
err = None
try:
    m = mmap.mmap(fd, 0, access=`+access+`)
    got = m[:]
    m.close()
except OSError as e:
    err, got = e.strerror, b""
os.close(fd)
open(sys.argv[2], "wb").write(got)
print(err)
`, file)
}

// TestChunkHandleAcrossMmap: a chunk file mapped with mmap(2) once it is
// rewritten, while a handle opened before reads it through the page
// cache. The new version gets a kernel inode of its own (pages.go), so the
// mapping, private or shared, reads the new version whole, and the old
// handle reads on the old version (or a prefix and ESTALE), never pages of
// the new. Before, the new open read past the page cache
// (FOPEN_DIRECT_IO), which the kernel refused to map shared (ENODEV) and
// mapped privately through the inode's one page cache, filling the old
// handle's pages with the new version: it read a mix.
func TestChunkHandleAcrossMmap(t *testing.T) {
	for _, private := range []bool{true, false} {
		t.Run(fmt.Sprintf("private=%v", private), func(t *testing.T) {
			v1, v2, src, file, _ := mountChunkTTL(t)
			finish := openReader(t, file)
			chunkArray(t, src, v2)
			time.Sleep(2 * time.Second)
			if got, errstr := mmapRead(t, file, private); errstr != "None" || !bytes.Equal(got, v2) {
				t.Errorf("a mapping opened 2 s after the rewrite: %s, error %s, want the new version", versionOf(got, v1, v2), errstr)
			}
			got, errstr := finish()
			checkOldHandle(t, got, errstr, v1)
		})
	}
}

// mountChunkTTL writes chunkArray's array of one 4 MiB chunk (the first
// of chunkVersions) to a directory and mounts it with --metadata-ttl 1s
// and no read-ahead, as the tests of a handle across a rewrite begin: it
// returns both versions, the source directory, the chunk file's path and
// the mount.
func mountChunkTTL(t *testing.T) (v1, v2 []byte, src, file string, s *serving) {
	t.Helper()
	v1, v2 = chunkVersions(4 << 20)
	src = t.TempDir()
	chunkArray(t, src, v1)
	s = startVolfs(t, "mount", "--metadata-ttl", "1s", "--read-ahead", "0", src)
	return v1, v2, src, filepath.Join(s.mnt, "0"), s
}

// TestChunkOpenThroughOldHandle: a chunk file rewritten while a handle
// reads it moves to a kernel inode of its own at the next open by name
// (TestChunkHandleAcrossNewOpen); an open made afterwards through the old
// handle's /proc/self/fd link reaches the old inode, which no lookup can
// move on, and must read the current version whole (past the old
// version's pages), not fail with ESTALE nor read the old pages.
func TestChunkOpenThroughOldHandle(t *testing.T) {
	v1, v2, src, file, _ := mountChunkTTL(t)
	dir := t.TempDir()
	finish := pausedPython(t, "open of "+file, `
import os, sys

def whole(path):
    got, err = bytearray(), None
    try:
        with open(path, "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                got += b
    except OSError as e:
        err = e.strerror
    return got, err

fd = os.open(sys.argv[1], os.O_RDONLY)
head = os.read(fd, 65536)
print("ready", flush=True)
sys.stdin.readline()
byname, err1 = whole(sys.argv[1])
open(sys.argv[2] + "/byname", "wb").write(byname)
byfd, err2 = whole("/proc/self/fd/%d" % fd)
open(sys.argv[2] + "/byfd", "wb").write(byfd)
print(err1, err2, flush=True)
`, file, dir)
	chunkArray(t, src, v2)
	time.Sleep(2 * time.Second)
	last := finish()
	if last != "None None" {
		t.Errorf("errors of the open by name and of the open through the old handle's fd: %q, want none", last)
	}
	for _, name := range []string{"byname", "byfd"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v2) {
			t.Errorf("the open %s after the rewrite read %s, want the new version", name, versionOf(got, v1, v2))
		}
	}
}

// rawChunkArray is chunkArray with the chunk stored raw (no compressor):
// a verbatim chunk, which a remote source's open of a large one reads in
// ranged parts.
func rawChunkArray(t *testing.T, dir string, data []byte) {
	t.Helper()
	writeFile(t, filepath.Join(dir, ".zarray"), fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, len(data), len(data)))
	tmp := filepath.Join(dir, ".0.tmp")
	writeFile(t, tmp, data)
	if err := os.Rename(tmp, filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
}

// TestChunkPartsPagesRewrittenTTL: a large raw chunk of a remote source,
// read in ranged parts (chunkparts.go), is read whole, which leaves it in
// the kernel's page cache, then rewritten. Once --metadata-ttl has passed,
// a read that finds half of the old version's pages dropped must read the
// new version whole, never the old version's cached half and the new
// version's other half.
func TestChunkPartsPagesRewrittenTTL(t *testing.T) {
	const size = 17 << 20 // read in parts: at least 16 MiB
	v1, v2 := chunkVersions(size)
	src := t.TempDir()
	rawChunkArray(t, src, v1)
	srv := httptest.NewServer(etagFiles(src))
	defer srv.Close()
	s := startVolfs(t, "mount", "--metadata-ttl", "1s", "--read-ahead", "0", srv.URL)
	file := filepath.Join(s.mnt, "0")
	if got := readDropping(t, file, 0, 0); !bytes.Equal(got, v1) {
		t.Fatalf("before the rewrite: %s, want the old version", versionOf(got, v1, v2))
	}
	rawChunkArray(t, src, v2)
	time.Sleep(2 * time.Second)
	for i := range 2 {
		if got := readDropping(t, file, size/2, size/2); !bytes.Equal(got, v2) {
			t.Errorf("read %d, 2 s after the rewrite, half the pages dropped: %s, want the new version", i, versionOf(got, v1, v2))
		}
	}
}
