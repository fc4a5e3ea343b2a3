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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
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
