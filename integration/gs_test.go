package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/volfs/volfs/internal/gcsfake"
)

// startGCSEmulator starts fake-gcs-server (gcsfake), on a file-backed
// store in memory, and points STORAGE_EMULATOR_HOST at it for the rest of
// the test, for the volfs binary to find.
func startGCSEmulator(t *testing.T) *gcsfake.Server {
	t.Helper()
	e := gcsfake.Start(t, gcsfake.Options{Root: shmDir(t)})
	t.Setenv("STORAGE_EMULATOR_HOST", e.Host)
	return e
}

// putLayer uploads the layer in dir below prefix: with gzipEncoded, each
// "X.gz" file becomes object X stored with Content-Encoding: gzip, as
// CloudVolume uploads; otherwise every file is uploaded as it is.
func putLayer(t *testing.T, e *gcsfake.Server, bucket, prefix, dir string, gzipEncoded bool) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name, enc := path.Join(prefix, filepath.ToSlash(rel)), ""
		if gzipEncoded {
			if plain, ok := strings.CutSuffix(name, ".gz"); ok {
				name, enc = plain, "gzip"
			}
		}
		e.Put(bucket, name, data, enc)
		names = append(names, name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// volumeEntries returns the paths that the mount shows for a volume
// written by mkprecomputed.py: its rewritten and original metadata, the
// passthrough files, and every chunk of the grid (missing ones included).
func volumeEntries(t *testing.T, truth string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(truth, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Scales []struct {
			Key    string            `json:"key"`
			Chunks map[string]string `json:"chunks"`
		} `json:"scales"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	entries := []string{"info", "info.orig", "README.txt", "mesh", "mesh/1:0"}
	for _, s := range m.Scales {
		entries = append(entries, s.Key)
		for name := range s.Chunks {
			entries = append(entries, s.Key+"/"+name)
		}
	}
	return entries
}

// withParents returns names and every directory above them.
func withParents(names []string) map[string]bool {
	set := make(map[string]bool)
	for _, n := range names {
		for ; n != "." && n != ""; n = path.Dir(n) {
			set[n] = true
		}
	}
	return set
}

// pattern returns n bytes that differ at every offset within a 1 MiB
// window and between objects (seed).
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i>>10) ^ seed
	}
	return b
}

// TestGCSMount mounts a bucket of the emulator with the volfs binary and
// reads it through the mount with cat, cmp, dd, find, diff and numpy.
func TestGCSMount(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	e := startGCSEmulator(t)

	const bucket = "vols"
	e.Store.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	names := putLayer(t, e, bucket, "layers/encoded", vol, true)
	names = append(names, putLayer(t, e, bucket, "layers/gzobjects", vol, false)...)
	plain := map[string][]byte{
		"files/empty":          {},
		"files/one":            {42},
		"files/page+1":         pattern(4097, 1),
		"files/a/b/c/deep.txt": []byte("nested prefixes\n"),
		"files/mib":            pattern(1<<20+3, 2),
		"files/large.bin":      pattern(64<<20+12345, 3),
		"top-level":            []byte("at the root\n"),
	}
	for name, data := range plain {
		e.Put(bucket, name, data, "")
		names = append(names, name)
	}
	// A pass-through object stored gzip-encoded shows its stored bytes.
	gzText := gzipBytes(t, bytes.Repeat([]byte("stored with Content-Encoding: gzip\n"), 1000))
	e.Put(bucket, "files/encoded.txt", gzText, "gzip")
	names = append(names, "files/encoded.txt")

	s := startVolfs(t, "mount", "--anonymous", "gs://"+bucket)
	mnt := s.mnt

	t.Run("ranged read", func(t *testing.T) {
		// 4 KiB from the middle of the 64 MiB object moves about 4 KiB
		// plus the kernel's read-ahead, not the object. First, before
		// any other read of it fills the page cache.
		const skip = 5000 // 4 KiB blocks: offset 20 MB
		before := e.Served.Load()
		out := filepath.Join(t.TempDir(), "piece")
		run(t, "dd", "if="+filepath.Join(mnt, "files/large.bin"), "of="+out, "bs=4096", "count=1", fmt.Sprintf("skip=%d", skip))
		moved := e.Served.Load() - before
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if want := plain["files/large.bin"][skip*4096 : skip*4096+4096]; !bytes.Equal(got, want) {
			t.Errorf("dd read %d bytes that differ from the object's", len(got))
		}
		if moved < 4096 || moved > 4<<20 {
			t.Errorf("a 4 KiB read moved %d bytes, want at least 4 KiB and at most 4 MiB", moved)
		}
		t.Logf("a 4 KiB read of a %d-byte object moved %d bytes", len(plain["files/large.bin"]), moved)
	})

	t.Run("volumes", func(t *testing.T) {
		check(t, truth, filepath.Join(mnt, "layers/encoded"), vol)
		check(t, truth, filepath.Join(mnt, "layers/gzobjects"), vol)
		if n := e.GzRanges.Load(); n != 0 {
			t.Errorf("%d Range requests on gzip-encoded objects, want 0", n)
		}
	})

	t.Run("objects", func(t *testing.T) {
		dir := t.TempDir()
		for name, data := range plain {
			src := filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, "cmp", src, filepath.Join(mnt, name))
		}
		out := run(t, "stat", "-c", "%s", filepath.Join(mnt, "files/encoded.txt"))
		if got := strings.TrimSpace(out); got != strconv.Itoa(len(gzText)) {
			t.Errorf("size of files/encoded.txt: got %s, want its stored %d bytes", got, len(gzText))
		}
		src := filepath.Join(dir, "encoded.txt")
		os.WriteFile(src, gzText, 0o644)
		run(t, "cmp", src, filepath.Join(mnt, "files/encoded.txt"))
	})

	t.Run("find", func(t *testing.T) {
		// The bucket listing, with each volume's objects replaced by what
		// the mount shows for a volume.
		var want []string
		for n := range withParents(names) {
			if !strings.HasPrefix(n, "layers/encoded/") && !strings.HasPrefix(n, "layers/gzobjects/") {
				want = append(want, n)
			}
		}
		for _, v := range []string{"layers/encoded", "layers/gzobjects"} {
			for _, n := range volumeEntries(t, truth) {
				want = append(want, v+"/"+n)
			}
		}
		var got []string
		for _, p := range strings.Split(strings.TrimSpace(run(t, "find", mnt, "-mindepth", "1", "-printf", "%P\n")), "\n") {
			// The stitched views of each scale are checked in views_test.go.
			if base := path.Base(p); strings.HasPrefix(base, "volume.") || base == "sections" || base == "slabs" ||
				strings.Contains(p, "/sections/") || strings.Contains(p, "/slabs/") {
				continue
			}
			got = append(got, p)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("find lists %d paths, want %d:\n got %q\nwant %q", len(got), len(want), got, want)
		}
	})

	t.Run("same bytes from disk, HTTP and gs", func(t *testing.T) {
		disk := startVolfs(t, "mount", vol)
		hs := httptest.NewServer(http.FileServer(http.Dir(vol)))
		t.Cleanup(hs.Close)
		web := startVolfs(t, "mount", hs.URL+"/")
		for _, other := range []string{web.mnt, filepath.Join(mnt, "layers/gzobjects"), filepath.Join(mnt, "layers/encoded")} {
			run(t, "diff", "-r", disk.mnt, other)
		}
	})

	t.Run("info and cat", func(t *testing.T) {
		out := run(t, volfsBin, "info", "gs://"+bucket+"/layers/encoded")
		for _, want := range []string{"s0", "s1", "uint16", "70x45x9"} {
			if !strings.Contains(out, want) {
				t.Errorf("info output lacks %q:\n%s", want, out)
			}
		}
		const chunk = "s0/-13-19_5-21_-3-1"
		got, err := exec.Command(volfsBin, "cat", "gs://"+bucket+"/layers/encoded", chunk).Output()
		if err != nil {
			t.Fatalf("volfs cat: %v", err)
		}
		want := run(t, "cat", filepath.Join(mnt, "layers/gzobjects", chunk))
		if string(got) != want {
			t.Errorf("volfs cat %s: %d bytes differ from the mount's %d", chunk, len(got), len(want))
		}
	})
}

// TestGCSListing mounts a prefix of 20 000 objects (4000 under -race): it
// lists in pages of at most 1000, and ls -l costs listing requests only.
// Under -race the emulator, built into the test binary, takes seconds to
// answer each page of a 20 000-object bucket, and the mount's listing
// then outlasts startVolfs's minute: the race build checks the paging
// over 4 pages instead of 20.
func TestGCSListing(t *testing.T) {
	requireFUSE(t)
	e := startGCSEmulator(t)
	n := 20_000
	if raceEnabled {
		n = 4_000
	}
	e.Store.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "many"})
	for i := range n {
		e.Put("many", fmt.Sprintf("big/%05d", i), []byte(strconv.Itoa(i)), "")
	}
	s := startVolfs(t, "mount", "gs://many/big")
	lists, others := e.Lists.Load(), e.Others.Load()
	out := run(t, "ls", "-l", s.mnt)
	lines := strings.Split(strings.TrimSpace(out), "\n")[1:] // after "total"
	if len(lines) != n {
		t.Fatalf("ls -l shows %d entries, want %d", len(lines), n)
	}
	for i, line := range lines {
		f := strings.Fields(line)
		if want := fmt.Sprintf("%05d", i); f[len(f)-1] != want || f[4] != strconv.Itoa(len(strconv.Itoa(i))) {
			t.Fatalf("ls -l line %d: %q, want %s of %d bytes", i, line, want, len(strconv.Itoa(i)))
		}
	}
	// The mount may have listed the root already, when it started.
	if pages := e.Lists.Load(); pages < int64(n/1000) {
		t.Errorf("%d listing requests in all, want at least %d pages of at most 1000", pages, n/1000)
	}
	t.Logf("listing requests: %d at mount, %d for ls -l", lists, e.Lists.Load()-lists)
	if got := e.Others.Load() - others; got != 0 {
		t.Errorf("ls -l of %d objects made %d requests other than listings, want 0", n, got)
	}
	if got := run(t, "cat", filepath.Join(s.mnt, "01234")); got != "1234" {
		t.Errorf("cat 01234: got %q", got)
	}
}

// shmDir returns a new directory in memory (/dev/shm) where there is one,
// since the emulator's file store syncs every object it writes; on disk
// otherwise.
func shmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "volfs-gcs-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
