// Package integration mounts volfs for real and reads the mount through
// subprocesses (cat, dd, python3), never from the serving process itself.
package integration

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
	"time"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/fs/fuse"
	"github.com/volfs/volfs/internal/testenv"
)

// python is Debian's interpreter, which has numpy; a pyenv shim on PATH may
// not.
const python = "/usr/bin/python3"

// requireFUSE skips the test where FUSE is unavailable, unless
// VOLFS_REQUIRE_FUSE is set, in which case it fails.
func requireFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			why = "not root and no fusermount3"
		}
	}
	if why != "" {
		testenv.Unavailable(t, "FUSE unavailable: %s", why)
	}
}

// requirePython skips (or, with VOLFS_REQUIRE_FUSE, fails) without numpy.
func requirePython(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		testenv.Unavailable(t, "python3 with numpy unavailable: %v", err)
	}
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	os.Stderr.Write(p)
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mountSource mounts source in this process at a new directory and returns
// it; the mount is removed when the test ends.
func mountSource(t *testing.T, source string, opts fs.Options) string {
	t.Helper()
	return mountTree(t, source, opts).mnt
}

type mounted struct {
	mnt     string
	tree    *fs.Tree
	unmount func() // idempotent; also run when the test ends
}

// mountTree mounts source in this process at a new directory and returns
// the mount and its tree (for its counters); the mount is removed and the
// tree closed when the test ends, or earlier by unmount.
func mountTree(t *testing.T, source string, opts fs.Options) *mounted {
	t.Helper()
	return mountTreeWith(t, source, opts, fuse.MountOptions{})
}

// mountTreeWith is mountTree with the FUSE adapter's options mopts.
func mountTreeWith(t *testing.T, source string, opts fs.Options, mopts fuse.MountOptions) *mounted {
	t.Helper()
	requireFUSE(t)
	src, err := fetcher.Open(source, fetcher.Options{HTTP: fetcher.HTTPOptions{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := fs.New(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := fuse.Mount(mnt, tree, mopts)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	var once sync.Once
	m := &mounted{mnt: mnt, tree: tree}
	m.unmount = func() {
		once.Do(func() {
			if err := srv.Unmount(); err != nil {
				t.Errorf("unmount %s: %v", mnt, err)
			}
			tree.Close()
		})
	}
	t.Cleanup(m.unmount)
	return m
}

// run runs a command and returns its stdout; it fails the test on a non-zero
// exit, showing stderr.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// isMounted reports whether dir is in this process's mount table.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

func newLogger(buf *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}
