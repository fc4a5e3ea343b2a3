package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
)

// encodingsManifest is what testdata/mkencodings.py writes.
type encodingsManifest struct {
	Layers []encodedLayer
}

type encodedLayer struct {
	Name, Scale, Encoding string
	Sharding              map[string]any
	Chunks                []struct {
		Name, State string
		Object      string // for a corrupt chunk: the object a log line must name
		Size        int64  // decoded
		ID          uint64
		Shard       string
	}
	Shards map[string]struct {
		Size       int64
		Minishards map[string]struct {
			Index  [2]int64
			Chunks map[string][2]int64 // by chunk id
		}
	}
}

func (m *encodingsManifest) layer(t *testing.T, name string) *encodedLayer {
	t.Helper()
	for i := range m.Layers {
		if m.Layers[i].Name == name {
			return &m.Layers[i]
		}
	}
	t.Fatalf("manifest has no layer %s", name)
	return nil
}

// writeEncodings writes the layers of testdata/mkencodings.py (PIL and the
// encoders of decode/testdata/precomputed_writer.py, not volfs) and returns
// the output directory, whose src/ is the source to mount, and the manifest.
func writeEncodings(t *testing.T) (string, *encodingsManifest) {
	t.Helper()
	requirePython(t)
	if out, err := runErr(python, "-c", "import PIL"); err != nil {
		testenv.Unavailable(t, "python3 with PIL unavailable: %v\n%s", err, out)
	}
	dir := t.TempDir()
	run(t, python, "testdata/mkencodings.py", dir)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m encodingsManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, &m
}

// TestPrecomputedEncodings mounts jpeg, png and compressed_segmentation
// layers, unsharded and sharded (both hashes, gzip on and off, several bit
// widths, preshift, missing chunks and a missing shard), from disk and over
// HTTP (and with --missing=error, where missing chunks are ENOENT), and has python compare every chunk file with numpy's bytes (jpeg:
// with PIL's decode of the same bytes, within ±2 gray and ±3 colour). The
// corrupt chunks, and the chunks that damaged shard entries lead to, are
// EIO, each with one log line naming the object; nothing else logs an error.
func TestPrecomputedEncodings(t *testing.T) {
	dir, m := writeEncodings(t)
	src := filepath.Join(dir, "src")
	for _, tc := range []struct {
		name    string
		source  func(t *testing.T) string
		missing fs.Missing
	}{
		{"disk", func(*testing.T) string { return src }, fs.MissingFill},
		{"HTTP", func(t *testing.T) string {
			srv := httptest.NewServer(http.FileServer(http.Dir(src)))
			t.Cleanup(srv.Close)
			return srv.URL + "/"
		}, fs.MissingFill},
		{"disk, missing=error", func(*testing.T) string { return src }, fs.MissingError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			mnt := mountSource(t, tc.source(t), fs.Options{Log: newLogger(&logs), Missing: tc.missing})
			args := []string{"testdata/checkencodings.py", dir, mnt}
			if tc.missing == fs.MissingError {
				args = append(args, "--missing-error")
			}
			out := run(t, python, args...)
			t.Log(strings.TrimSpace(out))
			checkErrorLines(t, m, logs.String())
		})
	}
}

// checkErrorLines checks that each corrupt chunk of m has exactly one
// error line, naming the chunk's path and the object at fault, and that no
// other error was logged.
func checkErrorLines(t *testing.T, m *encodingsManifest, log string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	matched := make([]bool, len(lines))
	corrupt := 0
	for _, l := range m.Layers {
		for _, c := range l.Chunks {
			if c.State != "corrupt" {
				continue
			}
			corrupt++
			p := l.Name + "/" + l.Scale + "/" + c.Name + ":"
			object := l.Name + "/" + l.Scale + "/" + c.Object + ":"
			n := 0
			for i, line := range lines {
				if strings.Contains(line, p) {
					n++
					matched[i] = true
					if !strings.Contains(line, object) {
						t.Errorf("the error line of %s does not name the object %s: %s", p, object, line)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d error lines for the corrupt chunk %s, want 1", n, p)
			}
		}
	}
	for i, line := range lines {
		if !matched[i] {
			t.Errorf("error line about no corrupt chunk: %s", line)
		}
	}
	if corrupt == 0 {
		t.Fatal("the manifest lists no corrupt chunks")
	}
}

// originLog is an HTTP origin serving a directory that records, per
// object, the requests, their Range headers and the body bytes served.
type originLog struct {
	mu     sync.Mutex
	bytes  map[string]int64
	ranges map[string][]string // "" for a GET without Range, "HEAD" for a HEAD
}

func serveCounted(t *testing.T, dir string) (*httptest.Server, *originLog) {
	o := &originLog{bytes: map[string]int64{}, ranges: map[string][]string{}}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rng := r.Header.Get("Range")
		if r.Method == http.MethodHead {
			rng = "HEAD"
		}
		o.mu.Lock()
		o.ranges[r.URL.Path] = append(o.ranges[r.URL.Path], rng)
		o.mu.Unlock()
		files.ServeHTTP(&countingWriter{ResponseWriter: w, o: o, key: r.URL.Path}, r)
	}))
	t.Cleanup(srv.Close)
	return srv, o
}

// snapshot returns the bytes served and the Range headers of one object.
func (o *originLog) snapshot(key string) (int64, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bytes[key], slices.Clone(o.ranges[key])
}

type countingWriter struct {
	http.ResponseWriter
	o   *originLog
	key string
}

// Write counts p before writing it: once written, the client may have it
// all, and the test read its count, before this goroutine runs again.
func (w *countingWriter) Write(p []byte) (int, error) {
	w.o.mu.Lock()
	w.o.bytes[w.key] += int64(len(p))
	w.o.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

var rangeHeader = regexp.MustCompile(`^bytes=(\d+)-(\d+)$`)

// rangeStarts returns the first byte of each ranged request; a request
// without a Range header (the whole object) fails the test.
func rangeStarts(t *testing.T, key string, ranges []string) []int64 {
	t.Helper()
	var starts []int64
	for _, r := range ranges {
		m := rangeHeader.FindStringSubmatch(r)
		if m == nil {
			t.Errorf("%s: request with Range %q, want one closed byte range", key, r)
			continue
		}
		s, _ := strconv.ParseInt(m[1], 10, 64)
		starts = append(starts, s)
	}
	return starts
}

// TestShardedReadsAreRanged reads chunks of a sharded scale (one 2 MiB
// shard of 64 chunks of 32 KiB in 8 minishards) over a loopback HTTP
// origin: one chunk moves a small fraction of the shard (its index, its
// minishard index, its bytes), and reading every chunk of one minishard
// fetches the shard index and that minishard's index once.
func TestShardedReadsAreRanged(t *testing.T) {
	dir, m := writeEncodings(t)
	l := m.layer(t, "sh_big")
	srv, origin := serveCounted(t, filepath.Join(dir, "src"))
	mnt := mountSource(t, srv.URL+"/", fs.Options{})
	const shard = "0.shard"
	key := "/sh_big/s0/" + shard
	info := l.Shards[shard]
	if info.Size < 2<<20 {
		t.Fatalf("shard of %d bytes, want at least 2 MiB", info.Size)
	}
	byID := map[uint64]string{}
	for _, c := range l.Chunks {
		byID[c.ID] = c.Name
	}
	readChunk := func(name string) {
		t.Helper()
		got := []byte(run(t, "cat", filepath.Join(mnt, "sh_big", "s0", name)))
		want, err := os.ReadFile(filepath.Join(dir, "truth", "sh_big", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("chunk %s: %d bytes differ from numpy's %d", name, len(got), len(want))
		}
	}

	// One chunk: the shard index (16 << 3 bytes), the minishard index
	// (8 chunks of 24 bytes), the chunk (32 KiB).
	ms := info.Minishards["0"]
	var first string
	for id := range ms.Chunks {
		first = byID[mustUint(t, id)]
		break
	}
	readChunk(first)
	moved, ranges := origin.snapshot(key)
	const chunkBytes = 32 << 10
	if moved < chunkBytes || moved > chunkBytes+16<<3+8*24 {
		t.Errorf("reading one %d-byte chunk moved %d bytes of its %d-byte shard (%.1f%%) in %d requests %q, want the chunk and two indexes",
			chunkBytes, moved, info.Size, 100*float64(moved)/float64(info.Size), len(ranges), ranges)
	}
	t.Logf("one chunk: %d of %d shard bytes (%.2f%%) in %d ranged requests", moved, info.Size, 100*float64(moved)/float64(info.Size), len(ranges))

	// Every chunk of minishard 5, in id order: one fetch of its index, and
	// no further fetch of the shard index.
	ms = info.Minishards["5"]
	var ids []uint64
	for id := range ms.Chunks {
		ids = append(ids, mustUint(t, id))
	}
	slices.Sort(ids)
	for _, id := range ids {
		readChunk(byID[id])
	}
	moved, ranges = origin.snapshot(key)
	indexFetches, shardIndexFetches := 0, 0
	for _, s := range rangeStarts(t, key, ranges) {
		switch s {
		case ms.Index[0]:
			indexFetches++
		case 0:
			shardIndexFetches++
		}
	}
	if len(ids) < 2 {
		t.Fatalf("minishard 5 holds %d chunks, want several", len(ids))
	}
	if indexFetches != 1 || shardIndexFetches != 1 {
		t.Errorf("reading the %d chunks of minishard 5 fetched its index %d times and the shard index %d times, want once each; ranges %q",
			len(ids), indexFetches, shardIndexFetches, ranges)
	}
	if want := 3 + 1 + len(ids); len(ranges) != want {
		t.Errorf("%d requests for the shard, want %d (3 for the first chunk, one minishard index, %d chunks): %q", len(ranges), want, len(ids), ranges)
	}
	t.Logf("%d chunks of one minishard: %d requests, %d bytes", len(ids), len(ranges), moved)

	// The chunks of minishard 6 read at once by as many processes: the
	// loads of its index are shared, so it is still fetched once.
	ms = info.Minishards["6"]
	var names []string
	for id := range ms.Chunks {
		names = append(names, filepath.Join(mnt, "sh_big", "s0", byID[mustUint(t, id)]))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := runErr("cat", name); err != nil {
				errs <- fmt.Errorf("cat %s: %v\n%.200s", name, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, ranges = origin.snapshot(key)
	indexFetches = 0
	for _, s := range rangeStarts(t, key, ranges) {
		if s == ms.Index[0] {
			indexFetches++
		}
	}
	if indexFetches != 1 {
		t.Errorf("%d concurrent reads of the chunks of minishard 6 fetched its index %d times, want once", len(names), indexFetches)
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInfoShowsSharding: `volfs info` names every encoding and shows each
// sharded scale's parameters; `volfs cat` of a chunk in a shard is numpy's
// bytes.
func TestInfoShowsSharding(t *testing.T) {
	dir, m := writeEncodings(t)
	out := run(t, volfsBin, "info", filepath.Join(dir, "src"))
	lines := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			lines[f[0]] = line
		}
	}
	for _, l := range m.Layers {
		line, ok := lines[l.Name]
		if !ok {
			t.Errorf("info does not list %s:\n%s", l.Name, out)
			continue
		}
		if !strings.Contains(line, " "+l.Encoding+" ") {
			t.Errorf("info line of %s does not say %s: %s", l.Name, l.Encoding, line)
		}
		if l.Sharding == nil {
			if strings.Contains(line, "sharding") {
				t.Errorf("info line of unsharded %s mentions sharding: %s", l.Name, line)
			}
			continue
		}
		s := l.Sharding
		want := fmt.Sprintf("sharding=preshift=%v,hash=%v,minishard_bits=%v,shard_bits=%v,index=%v,data=%v",
			s["preshift_bits"], s["hash"], s["minishard_bits"], s["shard_bits"], s["minishard_index_encoding"], s["data_encoding"])
		if !strings.Contains(line, want) {
			t.Errorf("info line of %s lacks %q: %s", l.Name, want, line)
		}
	}
	l := m.layer(t, "sh_murmur_cseg")
	for _, c := range l.Chunks[:4] {
		got := run(t, volfsBin, "cat", filepath.Join(dir, "src"), "sh_murmur_cseg/s0/"+c.Name)
		want, err := os.ReadFile(filepath.Join(dir, "truth", "sh_murmur_cseg", c.Name))
		if c.State == "missing" {
			want, err = make([]byte, c.Size), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) || len(want) == 0 {
			t.Errorf("volfs cat of %s (%s): %d bytes, not numpy's %d", c.Name, c.State, len(got), len(want))
		}
	}
}
