package integration

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// requireHyparquet returns the node_modules holding hyparquet-writer and
// hyparquet, which write and check the Parquet reference sets.
func requireHyparquet(t *testing.T) string {
	t.Helper()
	modules, err := filepath.Abs(zarritaModules)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"hyparquet", "hyparquet-writer"} {
		if _, err := os.Stat(filepath.Join(modules, m)); err != nil {
			if os.Getenv("VOLFS_REQUIRE_FUSE") != "" {
				t.Fatalf("%s is not installed in %s (bash .ci/run installs it): %v", m, modules, err)
			}
			testenv.Unavailable(t, "%s is not installed in %s: %v", m, modules, err)
		}
	}
	return modules
}

// writeParquetSet writes the HDF5 file and JSON references of
// testdata/refscheck.py into dir, and the same references as a Parquet
// set dir/refs.parq (record_size 3, so that arrays span several record
// files and some records are not written), with chunk raw/1.0 inline.
func writeParquetSet(t *testing.T, dir string) {
	t.Helper()
	modules := requireHyparquet(t)
	requireH5py(t)
	run(t, python, "testdata/refscheck.py", "write", dir)
	run(t, "node", nodeScript(t, modules, "refsparquet.mjs"), "convert", filepath.Join(dir, "refs.json"), filepath.Join(dir, "refs.parq"), "3", "raw/1.0")
}

// TestReferenceSetParquet mounts a Parquet reference set that
// hyparquet-writer wrote from references built from h5py's own chunk
// table: zarr-python reading the mount equals h5py reading the HDF5 file,
// and every chunk file equals the original chunk (an inline raw one,
// absent ones from null rows and from a record file never written).
func TestReferenceSetParquet(t *testing.T) {
	dir := t.TempDir()
	writeParquetSet(t, dir)
	s := startVolfs(t, "mount", filepath.Join(dir, "refs.parq"))
	if _, err := os.Stat(filepath.Join(dir, "refs.parq", "counts", "refs.1.parq")); !os.IsNotExist(err) {
		t.Fatalf("counts/refs.1.parq exists (%v): the test wants a record file never written", err)
	}
	t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
}

// TestReferenceSetParquetOverHTTP mounts the set by its http URL: reading
// one chunk fetches only the record file that holds it, and the whole
// hierarchy then reads as h5py reads the file.
func TestReferenceSetParquetOverHTTP(t *testing.T) {
	dir := t.TempDir()
	writeParquetSet(t, dir)
	var mu sync.Mutex
	got := map[string]int{}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".parq") {
			mu.Lock()
			got[strings.TrimPrefix(r.URL.Path, "/refs.parq/")]++
			mu.Unlock()
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s := startVolfs(t, "mount", "--read-ahead", "0", srv.URL+"/refs.parq")
	// temp's grid is 3 x 4: chunk 1.2 is linear index 6, row 0 of record 2.
	if b := run(t, "cat", filepath.Join(s.mnt, "temp", "1.2")); len(b) != 16*16*4 {
		t.Fatalf("temp/1.2 reads %d bytes, want %d", len(b), 16*16*4)
	}
	mu.Lock()
	if len(got) != 1 || got["temp/refs.2.parq"] != 1 {
		t.Errorf("reading temp/1.2 fetched record files %v, want temp/refs.2.parq once", got)
	}
	mu.Unlock()
	t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
}

// TestReferenceSetParquetHostile: a row whose range ends past its
// target, a row of 2^63-1 bytes, a record file that is not Parquet and a
// truncated one read as EIO, each with one log line naming the key, in
// bounded time; a null row reads as the fill value.
func TestReferenceSetParquetHostile(t *testing.T) {
	modules := requireHyparquet(t)
	requireFUSE(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data.bin"), []byte(strings.Repeat("\x05", 8)))
	run(t, "node", nodeScript(t, modules, "refsparquet.mjs"), "hostile", filepath.Join(dir, "refs.parq"))
	v := startLogged(t, "mount", filepath.Join(dir, "refs.parq"))
	if got := run(t, "cat", filepath.Join(v.mnt, "b", "1")); got != strings.Repeat("\x05", 2) {
		t.Errorf("b/1 reads %q", got)
	}
	if got := run(t, "cat", filepath.Join(v.mnt, "b", "0")); got != strings.Repeat("\x09", 2) {
		t.Errorf("b/0 (a null row) reads %q, want the fill value", got)
	}
	for _, c := range []struct{ key, url string }{
		{"a/0", "data.bin"}, {"a/1", "data.bin"},
		{"junk/0", "file://" + dir + "/refs.parq/junk/refs.0.parq"}, {"trunc/0", "file://" + dir + "/refs.parq/trunc/refs.0.parq"},
	} {
		start := time.Now()
		out, err := runErr("cat", filepath.Join(v.mnt, c.key))
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("%s: cat gave %q, %v; want EIO", c.key, out, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: EIO took %v", c.key, d)
		}
		v.waitLog(t, "key="+c.key+" url="+c.url)
	}
}

// TestReferenceSetParquetObjectStores mounts the Parquet set, under a name
// that does not say it is one, with its HDF5 file by gs:// (on
// fake-gcs-server), s3:// (on SeaweedFS) and http URL: found by its
// .zmetadata's content, it reads as h5py reads the file.
func TestReferenceSetParquetObjectStores(t *testing.T) {
	dir := t.TempDir()
	writeParquetSet(t, dir)
	if err := os.Rename(filepath.Join(dir, "refs.parq"), filepath.Join(dir, "virt")); err != nil {
		t.Fatal(err)
	}
	t.Run("gs", func(t *testing.T) {
		e := startGCSEmulator(t)
		putLayer(t, e, "bkt", "sets", dir, false)
		s := startVolfs(t, "mount", "gs://bkt/sets/virt")
		t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
	})
	t.Run("s3", func(t *testing.T) {
		w := startWeed(t, "pub")
		s3Env(t, "", "")
		w.s3put(t, "put", "pub", "sets", dir)
		s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "s3://pub/sets/virt/")
		t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
	})
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
		t.Cleanup(srv.Close)
		s := startVolfs(t, "mount", srv.URL+"/virt")
		t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
	})
}

// TestReferenceSetParquetRegenerated: a Parquet set written again while it
// is mounted (hyparquet-writer over the same directory, so .zmetadata is a
// new version) is not mixed with the one mounted: a chunk whose record
// file is first read after that fails with ESTALE and one log line naming
// it, while a chunk of a record read before still reads its bytes.
func TestReferenceSetParquetRegenerated(t *testing.T) {
	dir := t.TempDir()
	writeParquetSet(t, dir)
	s := startVolfs(t, "mount", "--read-ahead", "0", filepath.Join(dir, "refs.parq"))
	// temp's grid is 3 x 4: chunk 1.2 is row 0 of record 2, chunk 0.0
	// row 0 of record 0.
	before := run(t, "cat", filepath.Join(s.mnt, "temp", "1.2"))
	time.Sleep(10 * time.Millisecond) // a later modification time, on any file system
	run(t, "node", nodeScript(t, requireHyparquet(t), "refsparquet.mjs"), "convert", filepath.Join(dir, "refs.json"), filepath.Join(dir, "refs.parq"), "3", "raw/1.0")
	out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "temp", "0.0"))
	if err == nil || !strings.Contains(out, "Stale file handle") {
		t.Errorf("temp/0.0 of a record first read after the set was written again: %v, %q; want ESTALE", err, out[:min(len(out), 200)])
	}
	if !strings.Contains(s.stderr.String(), "refs.0.parq") {
		t.Errorf("no log line names temp/refs.0.parq:\n%s", s.stderr.String())
	}
	if again := run(t, "cat", filepath.Join(s.mnt, "temp", "1.2")); again != before {
		t.Errorf("temp/1.2, of a record read before, changed")
	}
}
