package fs

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/internal/testenv"
)

// panicky is a directory whose children panic when looked up or read.
type panicky struct{}

func (panicky) IsDir() bool { return true }
func (panicky) Lookup(_ context.Context, name string) (Node, error) {
	if name == "lookup" {
		panic("lookup bug")
	}
	return panickyFile{}, nil
}
func (panicky) List(context.Context) (Listing, error) { return emptyListing{}, nil }

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
type panickyTree struct{ *Tree }

func (panickyTree) Root() Dir { return panicky{} }

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
	real, err := New(context.Background(), src, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
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
