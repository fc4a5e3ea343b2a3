package fuse

import (
	"bytes"
	"compress/gzip"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
)

// panicky is a directory whose children panic when looked up or read.
type panicky struct{}

func (panicky) IsDir() bool { return true }
func (panicky) Lookup(_ context.Context, name string) (fs.Node, error) {
	if name == "lookup" {
		panic("lookup bug")
	}
	return panickyFile{}, nil
}
func (panicky) List(context.Context) (fs.Listing, error) { return emptyListing{}, nil }

type emptyListing struct{}

func (emptyListing) Len() int64                 { return 0 }
func (emptyListing) Entry(int64) (string, bool) { return "", false }

type panickyFile struct{}

func (panickyFile) IsDir() bool { return false }
func (panickyFile) Size() int64 { return 10 }
func (panickyFile) ReadAt(context.Context, []byte, int64) (int, error) {
	panic("read bug")
}

// panickyTree is a tree whose root is panicky: a real tree (its handles,
// its errors, its log) with another root.
type panickyTree struct{ *fs.Tree }

func (panickyTree) Root() fs.Dir { return panicky{} }

// TestPanicDoesNotKillMount mounts a tree whose nodes panic and reads it
// with cat: each panic is an EIO with a log line, and the mount stays up.
func TestPanicDoesNotKillMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		testenv.Unavailable(t, "needs /dev/fuse and root (/dev/fuse: %v, euid %d)", err, os.Geteuid())
	}
	var logs syncBuffer
	src, err := fetcher.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real, err := fs.New(context.Background(), src, fs.Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	mnt := t.TempDir()
	srv, err := mount(mnt, panickyTree{real}, MountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Unmount()
	for _, name := range []string{"lookup", "read"} {
		out, err := exec.Command("cat", filepath.Join(mnt, name)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Input/output error") {
			t.Errorf("cat %s: got %v %q, want EIO", name, err, out)
		}
	}
	if out, err := exec.Command("ls", mnt).CombinedOutput(); err != nil {
		t.Errorf("ls after the panics: %v %s", err, out)
	}
	for _, want := range []string{"panic in a FUSE handler: lookup bug", "panic in a FUSE handler: read bug"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line %q:\n%s", want, logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer that the serving goroutines and the test can
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNodes calls the go-fuse node methods directly, on a bridge that is not
// mounted.
func TestNodes(t *testing.T) {
	tree := newTree(t, layerFiles(t))
	m := &inodes{tree: tree, opts: MountOptions{UID: 7, GID: 8}, inos: newInoTable()}
	root := m.newDir(tree.Root(), "")
	gofs.NewNodeFS(root, &gofs.Options{})
	ctx := context.Background()

	var out fuse.EntryOut
	layer, errno := root.Lookup(ctx, "layer", &out)
	if errno != 0 || out.Mode&fuse.S_IFDIR == 0 {
		t.Fatalf("lookup layer: %v, mode %o", errno, out.Mode)
	}
	s0, errno := layer.Operations().(*dirInode).Lookup(ctx, "s0", &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := s0.Operations().(*dirInode).Lookup(ctx, "9-10_0-4_0-2", &out); errno != syscall.ENOENT {
		t.Errorf("lookup of a name outside the grid: got %v, want ENOENT", errno)
	}
	c, errno := s0.Operations().(*dirInode).Lookup(ctx, "0-4_0-4_0-2", &out)
	if errno != 0 {
		t.Fatal(errno)
	}
	if out.Size != 32 || out.Mode != fuse.S_IFREG|0o444 || out.Uid != 7 || out.Gid != 8 {
		t.Errorf("chunk attr: size %d mode %o uid %d gid %d", out.Size, out.Mode, out.Uid, out.Gid)
	}
	f := c.Operations().(*fileInode)
	_, flags, errno := f.Open(ctx, syscall.O_RDONLY)
	if errno != 0 || flags&fuse.FOPEN_KEEP_CACHE == 0 {
		t.Errorf("open: errno %v flags %x, want FOPEN_KEEP_CACHE", errno, flags)
	}
	if _, _, errno := f.Open(ctx, syscall.O_RDWR); errno != syscall.EROFS {
		t.Errorf("open for writing: got %v, want EROFS", errno)
	}
	res, errno := f.Read(ctx, nil, make([]byte, 10), 30)
	if errno != 0 {
		t.Fatal(errno)
	}
	got, _ := res.Bytes(nil)
	if want := chunk0()[30:]; !bytes.Equal(got, want) {
		t.Errorf("read at 30: got %v, want %v", got, want)
	}

	ds, errno := s0.Operations().(*dirInode).Readdir(ctx)
	if errno != 0 {
		t.Fatal(errno)
	}
	var listed []string
	for ds.HasNext() {
		e, _ := ds.Next()
		listed = append(listed, e.Name)
	}
	if got, want := strings.Join(listed, " "), ". .. volume.tif volume.raw volume.nhdr volume.mhd sections slabs 0-4_0-4_0-2 4-5_0-4_0-2"; got != want {
		t.Errorf("readdir: got %q, want %q", got, want)
	}
}

// A 5x4x2 uint8 layer in chunks of 4x4x2: chunk 0-4 is stored gzipped,
// chunk 4-5 is missing.
const testInfo = `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1,
 "type": "image", "scales": [{"key": "s0", "size": [5, 4, 2], "voxel_offset": [0, 0, 0],
 "resolution": [1, 1, 1], "chunk_sizes": [[4, 4, 2]], "encoding": "raw"}]}`

func chunk0() []byte {
	b := make([]byte, 4*4*2)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

func layerFiles(t *testing.T) map[string][]byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(chunk0())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"layer/info":              []byte(testInfo),
		"layer/s0/0-4_0-4_0-2.gz": buf.Bytes(),
		"notes.txt":               []byte("hello"),
	}
}

// newTree returns the tree of files (key -> bytes) written under a new
// directory.
func newTree(t *testing.T, files map[string][]byte) *fs.Tree {
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
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := fs.New(context.Background(), src, fs.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	return tree
}
