package integration

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// nginxServer serves dir with the ETag nginx makes, the modification time
// in seconds and the size ("5f1c2d3e-1a2b"), so that pinned reads send
// If-Match and two files of one size and time share an ETag.
func nginxServer(t *testing.T, dir string) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/")))); err == nil && fi.Mode().IsRegular() {
			w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.ModTime().Unix(), fi.Size()))
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// copyFile copies src to dst and gives dst src's modification time.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestReferenceSetTargetRewritten: an HDF5 file rewritten in place under
// its reference set (new values; the shuffle-only array's chunks keep
// their places and sizes, so its references do not change) reads as the
// new values through a second mount with the same --cache-dir, never as
// the decode the disk tier kept: for a local set, for one served over
// HTTP with nginx's ETags, and for a set rewritten to point at another
// file whose ETag reads the same as the first's (the same size and
// modification second): a chunk's identity names its target file, not
// only the target's version.
func TestReferenceSetTargetRewritten(t *testing.T) {
	requireH5py(t)
	for _, kind := range []string{"file", "http", "http-retargeted"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			h5 := filepath.Join(dir, "data.h5")
			run(t, python, "testdata/refsrewrite.py", "write", dir, "0")
			layout := func() map[string][2]int64 {
				var l map[string][2]int64
				b, err := os.ReadFile(filepath.Join(dir, "layout.json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				return l
			}
			before := layout()
			source := filepath.Join(dir, "refs.json")
			if kind != "file" {
				source = nginxServer(t, dir) + "/refs.json"
			}
			then := time.Now().Add(-time.Hour).Truncate(time.Second)
			setMtime(t, h5, then)
			if kind == "http-retargeted" {
				copyFile(t, h5, filepath.Join(dir, "b.h5"))
			}
			cacheDir := t.TempDir()
			mount := func() *serving {
				return startVolfs(t, "mount", "--cache-dir", cacheDir, "--cache-size", "16MiB", source)
			}
			s := mount()
			run(t, python, "testdata/refsrewrite.py", "verify", dir, s.mnt)
			stopVolfs(t, s)

			name := "data.h5"
			switch kind {
			case "file":
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1")
			case "http":
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1")
				// nginx's ETag holds whole seconds.
				setMtime(t, h5, then.Add(2*time.Second))
			case "http-retargeted":
				name = "b.h5"
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1", name)
				setMtime(t, filepath.Join(dir, name), then)
				a, _ := os.Stat(h5)
				b, _ := os.Stat(filepath.Join(dir, name))
				if a.Size() != b.Size() {
					t.Fatalf("b.h5 has %d bytes, data.h5 %d: the test needs one ETag for both", b.Size(), a.Size())
				}
			}
			after := layout()
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("the rewrite moved %s from %v to %v; the test needs it in place", k, v, after[k])
				}
			}
			s = mount()
			if out, err := runErr(python, "testdata/refsrewrite.py", "verify", dir, s.mnt, name); err != nil {
				t.Errorf("after the rewrite, the second mount reads old values: %v\n%s", err, out)
			}
			stopVolfs(t, s)
		})
	}
}

// refsWithOutsiders writes dir/refs.json, which refscheck.py wrote, with
// an array "out" whose chunk 0 lies in the set's own directory (the
// first 8 bytes of data.h5) and chunks 1 and 2 at outside, each an
// absolute URL outside the reference file's directory.
func refsWithOutsiders(t *testing.T, dir string, outside ...string) {
	t.Helper()
	var set map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	refs := set["refs"].(map[string]any)
	refs["out/.zarray"] = `{"zarr_format": 2, "shape": [24], "chunks": [8], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}`
	refs["out/0"] = []any{"data.h5", 0, 8}
	for i, u := range outside {
		refs[fmt.Sprintf("out/%d", i+1)] = []any{u, 0, 8}
	}
	if b, err = json.Marshal(set); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "refs.json"), b)
}

// checkOutsiders reads the chunks refsWithOutsiders added: the own one
// reads, the outside ones are EIO.
func checkOutsiders(t *testing.T, mnt string, n int) {
	t.Helper()
	if got, err := runErr("cat", filepath.Join(mnt, "out", "0")); err != nil || !strings.HasPrefix(got, "\x89HDF") {
		t.Errorf("out/0, in the set's own directory: %q, %v", got, err)
	}
	for i := 1; i <= n; i++ {
		out, err := runErr("cat", filepath.Join(mnt, "out", fmt.Sprint(i)))
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("out/%d, outside the set's own tree: %q, %v; want EIO", i, out, err)
		}
	}
}

// TestReferenceSetObjectStores mounts reference sets by gs:// (on
// fake-gcs-server) and s3:// (on SeaweedFS) URLs: the hierarchy reads as
// h5py reads the HDF5 file beside the set, and targets in the same bucket
// outside the set's directory, or in another bucket, are EIO.
func TestReferenceSetObjectStores(t *testing.T) {
	requireH5py(t)
	t.Run("gs", func(t *testing.T) {
		dir := t.TempDir()
		run(t, python, "testdata/refscheck.py", "write", dir)
		refsWithOutsiders(t, dir, "gs://bkt/other/data.h5", "gs://bkt2/sets/data.h5")
		e := startGCSEmulator(t)
		putLayer(t, e, "bkt", "sets", dir, false)
		putLayer(t, e, "bkt", "other", dir, false)
		putLayer(t, e, "bkt2", "sets", dir, false)
		s := startVolfs(t, "mount", "gs://bkt/sets/refs.json")
		t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
		checkOutsiders(t, s.mnt, 2)
	})
	t.Run("s3", func(t *testing.T) {
		w := startWeed(t, "pub", "pub2")
		s3Env(t, "", "")
		dir := t.TempDir()
		run(t, python, "testdata/refscheck.py", "write", dir)
		refsWithOutsiders(t, dir, "s3://pub/other/data.h5", "s3://pub2/sets/data.h5")
		w.s3put(t, "put", "pub", "sets", dir)
		w.s3put(t, "put", "pub", "other", dir)
		w.s3put(t, "put", "pub2", "sets", dir)
		s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "s3://pub/sets/refs.json")
		t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
		checkOutsiders(t, s.mnt, 2)
	})
}

// TestReferenceSetSniffed: an http URL whose name does not end in ".json"
// mounts as a reference set when its content is one, and a URL of a Zarr
// directory still mounts as the directory, at the cost of one request of
// at most 16 KiB for the look at its name.
func TestReferenceSetSniffed(t *testing.T) {
	requireH5py(t)
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write", dir)
	copyFile(t, filepath.Join(dir, "refs.json"), filepath.Join(dir, "refs"))
	vol := filepath.Join(dir, "vol")
	writeFileAll(t, filepath.Join(vol, ".zgroup"), []byte(`{"zarr_format": 2}`))
	writeFileAll(t, filepath.Join(vol, "a", ".zarray"), []byte(`{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}`))
	writeFileAll(t, filepath.Join(vol, "a", "0"), []byte("abcd"))
	var volGets, volBytes atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/vol" {
			volGets.Add(1)
			w = &refsCountingWriter{ResponseWriter: w, n: &volBytes}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	s := startVolfs(t, "mount", srv.URL+"/refs")
	t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))

	s = startVolfs(t, "mount", srv.URL+"/vol")
	if got := run(t, "cat", filepath.Join(s.mnt, "a", "0")); got != "abcd" {
		t.Errorf("the Zarr directory's a/0 reads %q", got)
	}
	if n, b := volGets.Load(), volBytes.Load(); n > 1 || b > 16<<10 {
		t.Errorf("mounting the directory asked for its name %d times, %d bytes; want at most one small request", n, b)
	}
}

// TestReferenceSetCoalesced: reading the chunks of an array whose stored
// chunks are neighbours in one file, served over HTTP, in order with
// read-ahead, sends fewer requests than chunks and moves about the
// referenced bytes; one chunk read alone moves its bytes in one request.
// The server answers each ranged request of the file after 5 ms, as a
// server a round trip away does.
func TestReferenceSetCoalesced(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	const n, chunk, gap = 24, 32 << 10, 16
	var data []byte
	refs := map[string]any{
		".zgroup":   `{"zarr_format": 2}`,
		"a/.zarray": fmt.Sprintf(`{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1", "compressor": {"id": "zlib", "level": 1}, "filters": null, "fill_value": 0, "order": "C"}`, n*chunk, chunk),
	}
	want := make([][]byte, n)
	referenced := int64(0)
	rng := uint32(1)
	for i := range n {
		want[i] = make([]byte, chunk)
		for j := range want[i] {
			rng = rng*1664525 + 1013904223
			want[i][j] = byte(rng>>28) + 'a'
		}
		z := zlibBytes(t, want[i])
		refs[fmt.Sprintf("a/%d", i)] = []any{"data.bin", len(data), len(z)}
		referenced += int64(len(z))
		data = append(data, z...)
		data = append(data, make([]byte, gap)...)
	}
	writeFile(t, filepath.Join(dir, "data.bin"), data)
	b, _ := json.Marshal(map[string]any{"version": 1, "refs": refs})
	writeFile(t, filepath.Join(dir, "refs.json"), b)
	var reqs, moved atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/data.bin" {
			reqs.Add(1)
			w = &refsCountingWriter{ResponseWriter: w, n: &moved}
			time.Sleep(5 * time.Millisecond) // a round trip to a nearby server
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	s := startVolfs(t, "mount", srv.URL+"/refs.json")
	args := make([]string, n)
	for i := range n {
		args[i] = filepath.Join(s.mnt, "a", fmt.Sprint(i))
	}
	if got := run(t, "cat", args...); got != string(bytes.Join(want, nil)) {
		t.Fatalf("cat of the %d chunks: %d bytes, not the chunks' values", n, len(got))
	}
	t.Logf("%d chunks read in order: %d requests, %d bytes moved for %d referenced", n, reqs.Load(), moved.Load(), referenced)
	if reqs.Load() >= n {
		t.Errorf("%d requests for %d neighbouring chunks, want fewer", reqs.Load(), n)
	}
	// A run spans gaps of up to 64 KiB, which may hold ranges that
	// another request reads too.
	if m := moved.Load(); m < referenced || m > referenced*5/4 {
		t.Errorf("%d bytes moved for %d referenced", m, referenced)
	}

	reqs.Store(0)
	moved.Store(0)
	s = startVolfs(t, "mount", "--read-ahead", "0", srv.URL+"/refs.json")
	if got := run(t, "cat", filepath.Join(s.mnt, "a", "3")); got != string(want[3]) {
		t.Fatalf("a/3 alone: %d bytes, not its values", len(got))
	}
	if r := refs["a/3"].([]any); reqs.Load() != 1 || moved.Load() != int64(r[2].(int)) {
		t.Errorf("a/3 alone: %d requests, %d bytes moved; want 1, its %d bytes", reqs.Load(), moved.Load(), r[2])
	}
}

func zlibBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestSpeed)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReferenceSetMillion mounts a version 1 set of a million ranged
// references (45 MB of JSON) and reads a chunk: the mount peaks well
// under the 490 MiB it reached when the set was read whole into a map of
// references (docs/PERFORMANCE.md, "Reference sets"). Most of what the
// chunk read adds is the tree's listing of the array's directory, a
// million names.
func TestReferenceSetMillion(t *testing.T) {
	requireFUSE(t)
	if raceEnabled {
		t.Skip("measures the mount's memory and time, which -race inflates; .ci/run runs it without")
	}
	dir := t.TempDir()
	const side = 1000
	var b bytes.Buffer
	b.WriteString(`{"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}", "data/.zarray": `)
	za, _ := json.Marshal(fmt.Sprintf(`{"zarr_format": 2, "shape": [%d, %d], "chunks": [16, 16], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}`, side*16, side*16))
	b.Write(za)
	for i := range side {
		for j := range side {
			fmt.Fprintf(&b, `, "data/%d.%d": ["data.bin", %d, 256]`, i, j, (i*side+j)*256)
		}
	}
	b.WriteString(`}}`)
	writeFile(t, filepath.Join(dir, "refs.json"), b.Bytes())
	f, err := os.Create(filepath.Join(dir, "data.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{7}, int64(side*side-1)*256+5); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(side * side * 256); err != nil {
		t.Fatal(err)
	}
	f.Close()
	began := time.Now()
	s := startVolfs(t, "mount", filepath.Join(dir, "refs.json"))
	took := time.Since(began)
	mounted := peakRSS(t, s.cmd.Process.Pid)
	got := run(t, "cat", filepath.Join(s.mnt, "data", fmt.Sprintf("%d.%d", side-1, side-1)))
	if len(got) != 256 || got[5] != 7 {
		t.Errorf("the last chunk reads %d bytes, byte 5 %d; want 256, 7", len(got), got[5])
	}
	run(t, "ls", s.mnt)
	peak := peakRSS(t, s.cmd.Process.Pid)
	t.Logf("a million references (%d bytes of JSON): mounted in %v, peak RSS %d MiB mounted, %d MiB after a chunk read (the tree lists the array's directory)",
		b.Len(), took.Round(10*time.Millisecond), mounted>>20, peak>>20)
	if mounted > 200<<20 || peak > 384<<20 {
		t.Errorf("peak RSS %d MiB mounted, %d MiB after a chunk read; want under 200 and 384 MiB", mounted>>20, peak>>20)
	}
}
