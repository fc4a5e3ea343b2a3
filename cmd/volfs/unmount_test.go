package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestHolders finds the processes of a fake /proc whose descriptors, cwd
// or root lie in the mount, and no other.
func TestHolders(t *testing.T) {
	proc := t.TempDir()
	const mnt = "/mnt/brain"
	for _, p := range []struct {
		pid   string
		links map[string]string
	}{
		{"10", map[string]string{"cwd": "/home/ann", "fd/0": "/dev/null", "fd/3": mnt + "/image/8_8_8/0-64_0-64_0-64"}},
		{"11", map[string]string{"cwd": mnt + "/image"}},
		{"12", map[string]string{"cwd": "/", "root": mnt}},
		{"13", map[string]string{"cwd": "/mnt/brain2", "fd/3": "/mnt/brainstorm/x"}},
		{"self", map[string]string{"cwd": mnt}},
	} {
		for name, target := range p.links {
			path := filepath.Join(proc, p.pid, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(proc, p.pid, "comm"), []byte("prog"+p.pid+"\n"), 0o644)
	}
	var got []int
	for _, h := range holders(proc, mnt) {
		got = append(got, h.pid)
		if want := "prog" + strconv.Itoa(h.pid); h.comm != want {
			t.Errorf("comm of %d: got %q, want %q", h.pid, h.comm, want)
		}
	}
	if want := []int{10, 11, 12}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
