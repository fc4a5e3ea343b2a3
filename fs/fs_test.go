package fs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs/view"
)

// A 5x4x2 uint8 layer in chunks of 4x4x2: chunk 0-4 is stored gzipped,
// chunk 4-5 is missing.
const testInfo = `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1,
 "type": "image", "scales": [{"key": "s0", "size": [5, 4, 2], "voxel_offset": [0, 0, 0],
 "resolution": [1, 1, 1], "chunk_sizes": [[4, 4, 2]], "encoding": "raw"}]}`

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeFiles writes files (key -> bytes) under a new directory.
func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range files {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// diskSource writes files under a new directory and opens it as a local
// source, with a disk cache of 1 MiB in another (closed at the test's end).
func diskSource(t *testing.T, files map[string][]byte) (dir string, d *disk.Cache, src fetcher.Fetcher) {
	t.Helper()
	dir = writeFiles(t, files)
	d, err := disk.Open(disk.Options{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	src, err = fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, d, src
}

func chunk0() []byte {
	b := make([]byte, 4*4*2)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

func newTree(t *testing.T, files map[string][]byte, opts Options) (*Tree, *bytes.Buffer) {
	t.Helper()
	src, err := fetcher.Open(writeFiles(t, files), fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	opts.Log = slog.New(slog.NewTextHandler(&logs, nil))
	tree, err := New(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tree, &logs
}

func layerFiles(t *testing.T) map[string][]byte {
	return map[string][]byte{
		"layer/info":               []byte(testInfo),
		"layer/s0/0-4_0-4_0-2.gz":  gz(t, chunk0()),
		"layer/mesh/1:0":           []byte("mesh bytes"),
		"notes.txt":                []byte("hello"),
		"broken/info":              []byte(`{"scales": [], "data_type": "uint8", "num_channels": 1}`),
		"broken/s0/0-4_0-4_0-2.gz": []byte("kept"),
	}
}

func names(t *testing.T, d Dir) []string {
	t.Helper()
	l, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range l.Len() {
		n, _ := l.Entry(i)
		out = append(out, n)
	}
	return out
}

func readAll(t *testing.T, tree *Tree, p string) ([]byte, error) {
	t.Helper()
	n, err := tree.Resolve(context.Background(), p)
	if err != nil {
		return nil, err
	}
	f := n.(File)
	buf := make([]byte, f.Size()+10)
	k, err := f.ReadAt(context.Background(), buf, 0)
	return buf[:k], err
}

func TestTree(t *testing.T) {
	tree, logs := newTree(t, layerFiles(t), Options{})
	ctx := context.Background()

	layer, err := tree.Resolve(ctx, "layer")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names(t, layer.(Dir)), " "), "info info.orig s0 mesh"; got != want {
		t.Errorf("layer lists %q, want %q", got, want)
	}
	s0, err := tree.Resolve(ctx, "layer/s0")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(names(t, s0.(Dir)), " "), "volume.tif volume.raw volume.nhdr volume.mhd sections slabs 0-4_0-4_0-2 4-5_0-4_0-2"; got != want {
		t.Errorf("s0 lists %q, want %q", got, want)
	}

	for _, tc := range []struct {
		path string
		want []byte
	}{
		{"layer/s0/0-4_0-4_0-2", chunk0()},
		{"layer/s0/4-5_0-4_0-2", make([]byte, 1*4*2)}, // missing: zeros at the clipped size
		{"layer/info.orig", []byte(testInfo)},
		{"layer/mesh/1:0", []byte("mesh bytes")},
		{"notes.txt", []byte("hello")},
		{"broken/info", []byte(`{"scales": [], "data_type": "uint8", "num_channels": 1}`)},
		{"broken/s0/0-4_0-4_0-2.gz", []byte("kept")}, // bad metadata: shown as it is
	} {
		got, err := readAll(t, tree, tc.path)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %q %v, want %q", tc.path, got, err, tc.want)
		}
	}
	if !strings.Contains(logs.String(), "broken/info") {
		t.Errorf("no log line names broken/info; log:\n%s", logs)
	}
	info, err := readAll(t, tree, "layer/info")
	if err != nil || !bytes.Contains(info, []byte(`"encoding": "raw"`)) {
		t.Errorf("layer/info: got %s %v", info, err)
	}

	for _, p := range []string{"layer/s0/0-4_0-4_0-1", "layer/s0/0-4_0-4_0-2.gz", "nothere", "layer/s0/../../etc"} {
		if _, err := tree.Resolve(ctx, p); !errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s: got %v, want ErrNotExist", p, err)
		}
	}
}

func TestNewRefusesBadRoot(t *testing.T) {
	src, err := fetcher.Open(writeFiles(t, map[string][]byte{
		"info": []byte(strings.Replace(testInfo, `"data_type": "uint8"`, `"data_type": "bool"`, 1)),
	}), fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A data type volfs does not decode: the root passes through, with a
	// log line naming the field; with the format pinned, it is refused.
	var logs bytes.Buffer
	tree, err := New(context.Background(), src, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Errorf("unsupported data type at the root: got %v, want it to pass through", err)
	} else {
		tree.Close()
		if !strings.Contains(logs.String(), "data_type") || !strings.Contains(logs.String(), "pass through undecoded") {
			t.Errorf("no log line names data_type; log:\n%s", logs.String())
		}
	}
	if _, err := New(context.Background(), src, Options{Formats: []string{"precomputed"}}); err == nil || !strings.Contains(err.Error(), "data_type") {
		t.Errorf("pinned format: got %v, want a refusal naming data_type", err)
	}
	bad, _ := fetcher.Open(writeFiles(t, map[string][]byte{
		"info": []byte(strings.Replace(testInfo, `"data_type": "uint8"`, `"data_type": 7`, 1)),
	}), fetcher.Options{})
	if _, err := New(context.Background(), bad, Options{}); err == nil || !strings.Contains(err.Error(), "data_type") {
		t.Errorf("invalid data type at the root: got %v, want a refusal naming data_type", err)
	}
	empty, _ := fetcher.Open(t.TempDir(), fetcher.Options{})
	if _, err := New(context.Background(), empty, Options{Formats: []string{"precomputed"}}); err == nil || !strings.Contains(err.Error(), "no precomputed metadata") {
		t.Errorf("pinned format without info: got %v", err)
	}
}

func TestCorruptAndMissing(t *testing.T) {
	files := layerFiles(t)
	files["layer/s0/0-4_0-4_0-2.gz"] = gz(t, chunk0()[:5]) // decodes short
	tree, _ := newTree(t, files, Options{Missing: MissingError})
	ctx := context.Background()
	_, err := readAll(t, tree, "layer/s0/0-4_0-4_0-2")
	if !errors.Is(err, decode.ErrCorrupt) || !strings.Contains(err.Error(), "layer/s0/0-4_0-4_0-2.gz") {
		t.Errorf("corrupt chunk: got %v, want ErrCorrupt naming the object", err)
	}
	n, err := tree.Resolve(ctx, "layer/s0/4-5_0-4_0-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.(opener).open(ctx); !errors.Is(err, fetcher.ErrNotExist) {
		t.Errorf("open of a missing chunk with MissingError: got %v, want ErrNotExist", err)
	}
}

func TestErrno(t *testing.T) {
	var logs bytes.Buffer
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want syscall.Errno
	}{
		{"nil", context.Background(), nil, 0},
		{"not found", context.Background(), wrap(fetcher.ErrNotExist), syscall.ENOENT},
		{"invalid key", context.Background(), wrap(fetcher.ErrInvalidKey), syscall.ENOENT},
		{"cancelled", cancelled, wrap(context.Canceled), syscall.EINTR},
		{"cancel of another context", context.Background(), wrap(context.Canceled), syscall.EIO},
		{"transient", context.Background(), wrap(fetcher.ErrTransient), syscall.EIO},
		{"permission", context.Background(), wrap(fetcher.ErrPermission), syscall.EACCES},
		{"anything", context.Background(), errors.New("boom"), syscall.EIO},
		{"corrupt chunk under a view", context.Background(), fmt.Errorf("view: %w", wrap(view.ErrCorrupt)), syscall.EIO},
	} {
		tree := &Tree{errs: errorReport{log: slog.New(slog.NewTextHandler(&logs, nil))}}
		logs.Reset()
		path := fmt.Sprintf("a/%d", i)
		if got := tree.Errno(tc.ctx, tc.err, "read", path); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		lines := strings.Count(logs.String(), "\n")
		if wantLines := map[bool]int{true: 1, false: 0}[tc.want == syscall.EIO || tc.want == syscall.EACCES]; lines != wantLines {
			t.Errorf("%s: %d log lines, want %d: %s", tc.name, lines, wantLines, logs.String())
		}
		if lines > 0 && !strings.Contains(logs.String(), "read "+path+": ") {
			t.Errorf("%s: log line does not name the request: %s", tc.name, logs.String())
		}
	}
}

// TestErrnoRepeats: failures of one path in quick succession (the kernel
// retrying a read-ahead) share one log line; another path gets its own.
func TestErrnoRepeats(t *testing.T) {
	var logs bytes.Buffer
	tree := &Tree{errs: errorReport{log: slog.New(slog.NewTextHandler(&logs, nil))}}
	ctx := context.Background()
	for range 3 {
		if got := tree.Errno(ctx, errors.New("corrupt"), "read", "s0/a"); got != syscall.EIO {
			t.Fatalf("got %v, want EIO", got)
		}
	}
	tree.Errno(ctx, errors.New("corrupt"), "read", "s0/b")
	if got := strings.Count(logs.String(), "\n"); got != 2 {
		t.Errorf("got %d log lines, want 2 (one per path):\n%s", got, logs.String())
	}
	// Once the window has passed, the next failure is logged with the
	// count of those held back.
	prev, _ := tree.errs.repeat.recent.Get("s0/a")
	prev.at = prev.at.Add(-errorRepeatWindow)
	tree.Errno(ctx, errors.New("corrupt"), "read", "s0/a")
	if !strings.Contains(logs.String(), "read s0/a: corrupt (failed 2 more times since the last report)") {
		t.Errorf("no line counting the held-back failures:\n%s", logs.String())
	}
}

func wrap(err error) error { return errors.Join(errors.New("context"), err) }

// TestMetadataTTL: a listing is kept for the mount's life by default, and
// listed again once older than MetadataTTL, so an object added to the
// source shows.
func TestMetadataTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl       time.Duration
		wantAdded bool
	}{{0, false}, {time.Hour, false}, {time.Nanosecond, true}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := fetcher.Open(dir, fetcher.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tree, err := New(context.Background(), src, Options{MetadataTTL: tc.ttl})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tree.Resolve(context.Background(), "a"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = tree.Resolve(context.Background(), "b")
		if added := err == nil; added != tc.wantAdded {
			t.Errorf("ttl %v: object added after the first listing shows: %v, want %v (%v)", tc.ttl, added, tc.wantAdded, err)
		}
	}
}

// TestMixedMetadataDir: of two formats' metadata in one directory, the one
// that does not describe the chunks served is hidden behind its .orig
// name, with a log line; the one volfs cannot decode gives way to the
// other.
func TestMixedMetadataDir(t *testing.T) {
	zarray := func(dtype string) []byte {
		return []byte(`{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "` + dtype + `", "compressor": null, "filters": null, "fill_value": 0}`)
	}
	zarrJSON := func(keys string) []byte {
		return []byte(`{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}}, "chunk_key_encoding": ` + keys + `, "fill_value": 0, "codecs": [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}]}`)
	}
	v2keys := `{"name": "v2", "configuration": {"separator": "."}}`
	tree, logs := newTree(t, map[string][]byte{
		"keys/.zarray": zarray("<u2"), "keys/zarr.json": zarrJSON(`{"name": "default"}`), "keys/0": []byte{1, 0, 2, 0},
		"undecodable/.zarray": zarray("|S2"), "undecodable/zarr.json": zarrJSON(v2keys), "undecodable/0": gz(t, []byte{1, 0, 2, 0}),
	}, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		dir, list, hidden, served string
	}{
		{"keys", ".zarray .zarray.orig zarr.json.orig 0 1", "zarr.json", ".zarray"},
		{"undecodable", ".zarray.orig zarr.json zarr.json.orig 0 1", ".zarray", "zarr.json"},
	} {
		d, err := tree.Resolve(ctx, tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(names(t, d.(Dir)), " "); got != tc.list {
			t.Errorf("%s lists %q, want %q", tc.dir, got, tc.list)
		}
		if _, err := tree.Resolve(ctx, tc.dir+"/"+tc.hidden); !errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s/%s: %v, want not found", tc.dir, tc.hidden, err)
		}
		if got, err := readAll(t, tree, tc.dir+"/"+tc.hidden+".orig"); err != nil || len(got) == 0 {
			t.Errorf("%s/%s.orig: %v, %q; want the stored file", tc.dir, tc.hidden, err, got)
		}
		if !strings.Contains(logs.String(), "file=/"+tc.dir+"/"+tc.hidden) {
			t.Errorf("no log line names /%s/%s:\n%s", tc.dir, tc.hidden, logs)
		}
		if got, err := readAll(t, tree, tc.dir+"/0"); err != nil || !bytes.Equal(got, []byte{1, 0, 2, 0}) {
			t.Errorf("%s/0 (served by %s): %v, %v", tc.dir, tc.served, got, err)
		}
	}
}
