// Package testenv tells tests what the machine they run on provides: the
// programs and fixtures they compare with, and an unprivileged user. It is
// imported by tests only.
//
// A test that needs something the machine lacks calls Unavailable, which
// skips it, unless VOLFS_REQUIRE_FUSE is set (as .ci/run sets it, having
// installed everything), where it fails: in CI a missing tool is a broken
// environment, never a silent skip.
package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Required reports whether VOLFS_REQUIRE_FUSE is set: everything a test
// needs must then be present.
func Required() bool { return os.Getenv("VOLFS_REQUIRE_FUSE") != "" }

// Unavailable ends the test for want of what the message names: it skips,
// or fails when Required.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (required: VOLFS_REQUIRE_FUSE is set)", msg)
	}
	t.Skip(msg)
}

// LookPath returns the path of program name, or ends the test with
// Unavailable; hint says how to install it.
func LookPath(t testing.TB, name, hint string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s unavailable (%s): %v", name, hint, err)
	}
	return p
}

// Root is the directory of the repository, found from this file's place in
// it, so that tests of any package find the same files.
func Root() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testenv: runtime.Caller failed")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Fixtures returns the directory of data written by other implementations
// (see testdata/fixtures/README.md): ../shared/fixtures beside the
// repository when it is there, which holds the complete sets, and otherwise
// the repository's own testdata/fixtures, which holds a subset of each
// set. Tests must pass with either; a case that only the complete sets hold
// is checked where they are present and skipped where not.
func Fixtures(t testing.TB) string {
	t.Helper()
	if dir := SharedFixtures(); dir != "" {
		return dir
	}
	dir := filepath.Join(Root(), "testdata", "fixtures")
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Fatalf("testenv: fixtures: %v", err)
	}
	return dir
}

// SharedFixtures returns ../shared/fixtures beside the repository, or ""
// when there is none (as in a fresh clone). VOLFS_NO_SHARED_FIXTURES=1
// ignores it, to run the tests as a fresh clone would.
func SharedFixtures() string {
	if os.Getenv("VOLFS_NO_SHARED_FIXTURES") != "" {
		return ""
	}
	dir, err := filepath.Abs(filepath.Join(Root(), "..", "shared", "fixtures"))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		return ""
	}
	return dir
}

// nobody is the uid and gid of the unprivileged user a test reruns as:
// Debian's nobody and nogroup, which need no entry to be used by number.
const nobody = 65534

// RerunAsNobody runs the calling top-level test again as an unprivileged
// user, when the tests run as root (as CI does), for a test of what root is
// allowed and others are not. It reports whether it did: the caller then
// returns, the rerun's result being reported as its own. Where the tests do
// not run as root it returns false and the caller goes on as it is.
//
// The rerun is a copy of the test binary in a new directory that the user
// can read, run with setpriv(1) and -test.run matching the test's name
// alone; it must pass, not skip.
func RerunAsNobody(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return false
	}
	setpriv := LookPath(t, "setpriv", "util-linux")
	dir, err := os.MkdirTemp("", "volfs-nobody-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tmp := filepath.Join(dir, "tmp")
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := copyFile(bin, os.Args[0]); err != nil {
		t.Fatalf("testenv: copying the test binary: %v", err)
	}
	if err := errors.Join(os.Chmod(dir, 0o755), os.Mkdir(tmp, 0o700), os.Chown(tmp, nobody, nobody)); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cmd := exec.Command(setpriv, fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody), "--clear-groups", "--",
		bin, "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as uid %d: %v\n%s", t.Name(), nobody, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("%s as uid %d did not pass:\n%s", t.Name(), nobody, out)
	}
	t.Logf("ran as uid %d: %s", nobody, lastLine(out))
	return true
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lastLine returns the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// WaitBlocked waits until at least n goroutines are blocked — in a select,
// a channel operation or on a lock — with function fn on their stack, fn
// being its name as a stack trace prints it (for example
// "github.com/volfs/volfs/cache.(*Load).CPU"). It is how a test waits
// for a goroutine to reach a wait it cannot otherwise observe, instead of
// sleeping. It fails the test after a minute.
func WaitBlocked(t testing.TB, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		for {
			if m := runtime.Stack(buf, true); m < len(buf) {
				buf = buf[:m]
				break
			}
			buf = make([]byte, 2*cap(buf))
		}
		got := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			_, state, _ := strings.Cut(g, " [")
			blocked := strings.HasPrefix(state, "select") || strings.HasPrefix(state, "chan ") ||
				strings.HasPrefix(state, "sync.") || strings.HasPrefix(state, "semacquire")
			if blocked && strings.Contains(g, "\n"+fn+"(") {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %d goroutines blocked in %s after a minute, want %d", got, fn, n)
		}
		buf = buf[:cap(buf)]
		time.Sleep(time.Millisecond)
	}
}
