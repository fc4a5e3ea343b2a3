package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// requireH5py skips (or, with VOLFS_REQUIRE_FUSE, fails) without h5py and
// zarr-python.
func requireH5py(t *testing.T) {
	t.Helper()
	requirePython(t)
	if out, err := runErr(python, "-c", "import h5py, zarr"); err != nil {
		testenv.Unavailable(t, "python3-h5py and python3-zarr unavailable: %v\n%s", err, out)
	}
}

// TestReferenceSetHDF5 mounts a kerchunk reference set that the test's
// Python builds from h5py's own chunk table over an HDF5 file h5py wrote
// (gzip, shuffle, fletcher32, absent chunks): zarr-python reading the
// mount equals h5py reading the file, and every chunk file equals the
// original chunk.
func TestReferenceSetHDF5(t *testing.T) {
	requireH5py(t)
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write", dir)
	s := startVolfs(t, "mount", filepath.Join(dir, "refs.json"))
	t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
}

// countingServer serves dir and counts the body bytes it sends of name.
func countingServer(t *testing.T, dir, name string) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/"+name) {
			w = &refsCountingWriter{ResponseWriter: w, n: &n}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

type refsCountingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *refsCountingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// TestReferenceSetHDF5OverHTTP mounts the reference set by its http URL:
// the targets resolve against it, one chunk file moves about that chunk's
// stored bytes of the HDF5 file (a ranged read), and the whole hierarchy
// reads as h5py reads the file.
func TestReferenceSetHDF5OverHTTP(t *testing.T) {
	requireH5py(t)
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write", dir)
	var chunks map[string][2]int64
	raw, err := os.ReadFile(filepath.Join(dir, "chunks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &chunks); err != nil {
		t.Fatal(err)
	}
	url, moved := countingServer(t, dir, "data.h5")
	s := startVolfs(t, "mount", "--read-ahead", "0", url+"/refs.json")
	moved.Store(0)
	got := run(t, "cat", filepath.Join(s.mnt, "temp", "1.2"))
	if len(got) != 16*16*4 {
		t.Fatalf("temp/1.2 reads %d bytes, want %d", len(got), 16*16*4)
	}
	want := chunks["temp/1.2"][1]
	if n := moved.Load(); n < want || n > want+512 {
		t.Errorf("reading one chunk moved %d bytes of data.h5, want about its %d stored bytes", n, want)
	}
	t.Log(run(t, python, "testdata/refscheck.py", "verify", dir, s.mnt))
}

// TestReferenceSetHostile: targets that climb out of the reference file's
// directory, lie on another host, or end before their range read as EIO,
// each with one log line naming the key and the URL; a key the set does
// not hold reads as the fill value. Sets that cannot be honoured at all
// (a 2^63 length, a gen over 2^40 keys, JSON nested 100000 deep) are
// refused at mount with a message that says why.
func TestReferenceSetHostile(t *testing.T) {
	requireFUSE(t)
	root := t.TempDir()
	dir := filepath.Join(root, "set")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "outside.bin"), make([]byte, 64))
	writeFile(t, filepath.Join(dir, "data.bin"), []byte(strings.Repeat("\x05", 8)))
	zarray := `{"zarr_format": 2, "shape": [40], "chunks": [8], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 9, "order": "C"}`
	set := map[string]any{"version": 1, "refs": map[string]any{
		".zgroup":   `{"zarr_format": 2}`,
		"a/.zarray": zarray,
		"a/0":       []any{"data.bin", 0, 8},
		"a/1":       []any{"../outside.bin", 0, 8},
		"a/2":       []any{"http://other.example/data.bin", 0, 8},
		"a/3":       []any{"data.bin", 4, 8},
		// a/4 is absent: fill
	}}
	b, _ := json.Marshal(set)
	writeFile(t, filepath.Join(dir, "refs.json"), b)
	v := startLogged(t, "mount", filepath.Join(dir, "refs.json"))
	if got := run(t, "cat", filepath.Join(v.mnt, "a", "0")); got != strings.Repeat("\x05", 8) {
		t.Errorf("a/0 reads %q", got)
	}
	if got := run(t, "cat", filepath.Join(v.mnt, "a", "4")); got != strings.Repeat("\x09", 8) {
		t.Errorf("absent a/4 reads %q, want the fill value", got)
	}
	for _, c := range []struct{ key, url string }{
		{"a/1", "../outside.bin"}, {"a/2", "http://other.example/data.bin"}, {"a/3", "data.bin"},
	} {
		out, err := runErr("cat", filepath.Join(v.mnt, c.key))
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("%s: cat gave %q, %v; want EIO", c.key, out, err)
		}
		v.waitLog(t, fmt.Sprintf("key=%s url=%s", c.key, c.url))
	}

	for name, body := range map[string]string{
		"2^63 length":  `{"version": 1, "refs": {".zgroup": "{}", "a/0": ["data.bin", 0, 9223372036854775807]}}`,
		"huge gen":     `{"version": 1, "refs": {".zgroup": "{}"}, "gen": [{"key": "a/{{i}}", "url": "data.bin", "offset": "0", "length": "1", "dimensions": {"i": {"stop": 1099511627776}}}]}`,
		"deep nesting": `{"version": 1, "refs": {".zgroup": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`,
	} {
		p := filepath.Join(dir, "bad.json")
		writeFile(t, p, []byte(body))
		mnt := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := runErr(volfsBin, "mount", p, mnt)
		if err == nil {
			forceUnmount(t, mnt)
			t.Errorf("%s: mounted", name)
			continue
		}
		if !strings.Contains(out, "reference set") {
			t.Errorf("%s: the refusal does not name the reference set: %s", name, out)
		}
		t.Logf("%s: %s", name, strings.TrimSpace(out))
	}
}

// TestReferenceSetTemplateBomb mounts a set of 400 KB whose 24576
// references name distinct URLs built of one template of 64000 bytes:
// expanded they are 1.5 GB, which the mount held (its RSS past 1.5 GiB)
// before it was refused or served. It is refused (volfs info, which reads
// a set as mount does) with exit 1, a message naming a key and the bound
// on what templates make, and the process's peak RSS under 768 MiB (not
// held under -race).
func TestReferenceSetTemplateBomb(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, `{"version": 1, "templates": {"t": "%s"}, "refs": {".zgroup": "{\"zarr_format\": 2}"`, strings.Repeat("d", 64000))
	for i := range 24576 {
		fmt.Fprintf(&b, `, "a/%d": ["{{t}}/%d", 0, 1]`, i, i)
	}
	b.WriteString("}}")
	writeFile(t, filepath.Join(dir, "refs.json"), []byte(b.String()))
	// volfs info reads the set as a mount does, and exits either way.
	cmd := exec.Command(volfsBin, "info", filepath.Join(dir, "refs.json"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `key "a/`) || !strings.Contains(string(out), "templates and gen expand to more than") {
		t.Errorf("volfs info: %v, %.300s; want exit 1 naming a key and the bound on what templates make", err, out)
	}
	// Under -race the detector's shadow of the 256 MiB allowed, and a
	// collector that falls behind on a loaded machine, made 0.9-1.8 GiB of
	// it: the bound is held by the pass without -race.
	if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > 768<<20 && !raceEnabled {
		t.Errorf("peak RSS %d MiB, want under 768 MiB", rss>>20)
	} else {
		t.Logf("peak RSS %d MiB", rss>>20)
	}
}

// TestReferenceSetGenPython mounts a version 1 set whose gen offsets use
// // on negative numbers, "{{ (i - 3) // 2 * 8 + 16 }}", and reads every
// chunk with cat: each equals what fsspec's ReferenceFileSystem (which
// renders gen with jinja2, Python's floor division) reads for the key.
// Go's truncating division made key a/0's offset 8, not 0: the mount
// served bytes 8-15 where fsspec reads 0-7.
func TestReferenceSetGenPython(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	if out, err := runErr(python, "-c", "import fsspec, jinja2"); err != nil {
		testenv.Unavailable(t, "python3-fsspec and python3-jinja2 unavailable: %v\n%s", err, out)
	}
	dir := t.TempDir()
	data := make([]byte, 64)
	for i := range data {
		data[i] = byte(i)
	}
	writeFile(t, filepath.Join(dir, "data.bin"), data)
	writeFile(t, filepath.Join(dir, "refs.json"), []byte(`{"version": 1, "refs": {".zgroup": "{\"zarr_format\": 2}",
		"a/.zarray": "{\"zarr_format\": 2, \"shape\": [32], \"chunks\": [8], \"dtype\": \"|u1\", \"compressor\": null, \"filters\": null, \"fill_value\": 0, \"order\": \"C\"}"},
		"gen": [{"key": "a/{{i}}", "url": "data.bin", "offset": "{{ (i - 3) // 2 * 8 + 16 }}", "length": "8", "dimensions": {"i": {"stop": 4}}}]}`))
	s := startVolfs(t, "mount", filepath.Join(dir, "refs.json"))
	for i := range 4 {
		key := fmt.Sprintf("a/%d", i)
		// fsspec resolves a relative target against its working directory.
		want, err := runErr(python, "-c", `import os, sys, fsspec; os.chdir(sys.argv[2]); sys.stdout.buffer.write(fsspec.filesystem("reference", fo="refs.json").cat(sys.argv[1]))`, key, dir)
		if err != nil {
			t.Fatalf("fsspec: %v\n%s", err, want)
		}
		if got := run(t, "cat", filepath.Join(s.mnt, key)); got != want {
			t.Errorf("%s reads %v, fsspec %v", key, []byte(got), []byte(want))
		}
	}
}

// TestReferenceSetGenListNames mounts a set that Python's json.dump wrote
// (non-ASCII as \u escapes) whose gen runs over a list of file names,
// "données_0.bin" and "données_1.bin", and reads each chunk with cat: it
// equals what fsspec's ReferenceFileSystem reads. The names were kept
// escaped ("donn\u00e9es_0.bin", no such file): every chunk read as EIO.
func TestReferenceSetGenListNames(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	if out, err := runErr(python, "-c", "import fsspec, jinja2"); err != nil {
		testenv.Unavailable(t, "python3-fsspec and python3-jinja2 unavailable: %v\n%s", err, out)
	}
	dir := t.TempDir()
	run(t, python, "-c", `import json, os, sys
os.chdir(sys.argv[1])
for k in range(2):
    open("données_%d.bin" % k, "wb").write(bytes(range(16 * k, 16 * k + 16)))
za = {"zarr_format": 2, "shape": [16], "chunks": [8], "dtype": "|u1", "compressor": None, "filters": None, "fill_value": 0, "order": "C"}
json.dump({"version": 1, "refs": {".zgroup": json.dumps({"zarr_format": 2}), "a/.zarray": json.dumps(za)},
           "gen": [{"key": "a/{{i}}", "url": "{{f}}", "offset": "{{i * 8}}", "length": "8",
                    "dimensions": {"f": ["données_0.bin", "données_1.bin"], "i": [0, 1]}}]}, open("refs.json", "w"))`, dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "refs.json")); !strings.Contains(string(b), `donn\u00e9es`) {
		t.Fatalf("json.dump did not escape the names: %s", b)
	}
	s := startVolfs(t, "mount", filepath.Join(dir, "refs.json"))
	for i := range 2 {
		key := fmt.Sprintf("a/%d", i)
		want, err := runErr(python, "-c", `import os, sys, fsspec; os.chdir(sys.argv[2]); sys.stdout.buffer.write(fsspec.filesystem("reference", fo="refs.json").cat(sys.argv[1]))`, key, dir)
		if err != nil {
			t.Fatalf("fsspec: %v\n%s", err, want)
		}
		got, err := runErr("cat", filepath.Join(s.mnt, key))
		if err != nil || got != want {
			t.Errorf("%s reads %q, %v; fsspec %v", key, got, err, []byte(want))
		}
	}
}

// TestReferenceSetTIFF mounts the version 0 references tifffile itself
// writes (aszarr().write_fsspec) for tiled TIFFs, zlib-compressed and
// not: zarr-python reading the mount equals tifffile reading the file,
// and each chunk file equals tifffile's decode of its tile.
func TestReferenceSetTIFF(t *testing.T) {
	requireH5py(t)
	if out, err := runErr(python, "-c", "import tifffile"); err != nil {
		testenv.Unavailable(t, "python3-tifffile unavailable: %v\n%s", err, out)
	}
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write-tiff", dir)
	for _, name := range []string{"z", "u"} {
		s := startVolfs(t, "mount", filepath.Join(dir, name+".json"))
		t.Log(run(t, python, "testdata/refscheck.py", "verify-tiff", dir, name, s.mnt))
	}
}

// TestReferenceSetTIFFCodecs mounts one reference set that tifffile
// wrote over TIFFs libtiff's tiffcp compressed (LZW, PackBits, JPEG;
// tiled and in strips; uint8 and uint16): zarr-python reading each LZW
// and PackBits array of the mount, and numpy reading its chunk files,
// equal tifffile reading the uncompressed original; a chunk whose
// stored bytes are cut short is EIO. The JPEG array
// passes through undecoded with one log line naming it and its codec.
func TestReferenceSetTIFFCodecs(t *testing.T) {
	requireH5py(t)
	if out, err := runErr(python, "-c", "import tifffile"); err != nil {
		testenv.Unavailable(t, "python3-tifffile unavailable: %v\n%s", err, out)
	}
	if _, err := exec.LookPath("tiffcp"); err != nil {
		testenv.Unavailable(t, "libtiff-tools (tiffcp) unavailable: %v", err)
	}
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write-tiffc", dir)
	s := startVolfs(t, "mount", filepath.Join(dir, "tiffc.json"))
	t.Log(run(t, python, "testdata/refscheck.py", "verify-tiffc", dir, s.mnt))
	// A chunk whose stored stream is cut short reads as EIO, with a log
	// line naming it.
	for _, key := range []string{"cut_lzw_u1_tiled/1.1", "cut_packbits_u1_tiled/1.1"} {
		out, err := runErr("cat", filepath.Join(s.mnt, key))
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("%s: cat gave %d bytes, %v; want EIO", key, len(out), err)
		}
		for i := 0; !strings.Contains(s.stderr.String(), key); i++ {
			if i == 100 {
				t.Fatalf("no log line names %s:\n%s", key, s.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var refused []string
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "pass through undecoded") {
			refused = append(refused, line)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "/jpeg_u1_tiled") || !strings.Contains(refused[0], `codec \"imagecodecs_jpeg\"`) {
		t.Errorf("want one log line refusing /jpeg_u1_tiled's imagecodecs_jpeg, got %q", refused)
	}
}

// TestReferenceSetNetCDF4 mounts references built from h5py's chunk
// table over a NetCDF4 file that netCDF4 wrote (zlib, shuffle, a partly
// written variable): zarr-python reading the mount equals netCDF4.
func TestReferenceSetNetCDF4(t *testing.T) {
	requireH5py(t)
	if out, err := runErr(python, "-c", "import netCDF4"); err != nil {
		testenv.Unavailable(t, "python3-netcdf4 unavailable: %v\n%s", err, out)
	}
	dir := t.TempDir()
	run(t, python, "testdata/refscheck.py", "write-nc", dir)
	s := startVolfs(t, "mount", filepath.Join(dir, "nc.json"))
	t.Log(run(t, python, "testdata/refscheck.py", "verify-nc", dir, s.mnt))
}
