package fuse

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestCheckOutsideSource: a mountpoint inside a local source and a source
// inside the mountpoint are refused, with symbolic links resolved either
// way; siblings and HTTP sources are not.
func TestCheckOutsideSource(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/src", "a/mnt", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// b/link -> a: a path to the source's parent that names no part of it.
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "b", "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source, mountpoint, want string
	}{
		{"a/src", "a/mnt", ""},
		{"a/src", "a/src", "inside the source"},
		{"a", "a/mnt", "inside the source"},
		{"b/link", "a/mnt", "inside the source"},
		{"a/src", "a", "inside the mountpoint"},
		{"a/src", "b/link", "inside the mountpoint"},
		{"b/link/src", "a", "inside the mountpoint"},
	} {
		src, err := fetcher.NewFile(filepath.Join(dir, tc.source))
		if err != nil {
			t.Fatal(err)
		}
		err = checkOutsideSource(filepath.Join(dir, tc.mountpoint), src)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("source %s, mountpoint %s: got %v, want %q", tc.source, tc.mountpoint, err, tc.want)
		}
	}
	h, err := fetcher.NewHTTP("http://127.0.0.1:1/", fetcher.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkOutsideSource(dir, h); err != nil {
		t.Errorf("HTTP source: got %v, want nil", err)
	}
}

// TestPermissions: with the source's modes shown, a node takes the read
// and execute bits of its own file or directory in the source, or of the
// object it stands for, or of its nearest directory.
func TestPermissions(t *testing.T) {
	dir := t.TempDir()
	files := map[string]os.FileMode{
		"open":            0o644,
		"script":          0o755,
		"private":         0o600,
		"vol/info":        0o640,
		"vol/s0/chunk.gz": 0o600,
		"closed/x":        0o644,
	}
	for p, mode := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "closed"), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "vol", "s0"), 0o750); err != nil {
		t.Fatal(err)
	}
	src, err := fetcher.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &inodes{modes: src}
	ctx := context.Background()
	for _, tc := range []struct {
		path  string
		isDir bool
		want  uint32
	}{
		{"open", false, 0o444},
		{"script", false, 0o555},
		{"private", false, 0o400},
		{"closed", true, 0o511},
		{"closed/x", false, 0o444},
		{"vol/info", false, 0o440},
		{"vol/info.orig", false, 0o440},      // the original info
		{"vol/s0", true, 0o550},              // a scale directory
		{"vol/s0/chunk", false, 0o400},       // stored as chunk.gz
		{"vol/s0/missing", false, 0o440},     // read as zeros: its directory's read bits
		{"vol/s0/sections", true, 0o550},     // a view: its directory's bits
		{"vol/s0/sections/z0", false, 0o440}, // inside a view
	} {
		got, err := m.permissions(ctx, tc.path, tc.isDir)
		if err != nil || got != tc.want {
			t.Errorf("permissions(%q): got %#o, %v, want %#o", tc.path, got, err, tc.want)
		}
	}

	plain := &inodes{}
	if got, _ := plain.permissions(ctx, "private", false); got != 0o444 {
		t.Errorf("without the source's modes: got %#o, want %#o", got, 0o444)
	}
	if got, _ := plain.permissions(ctx, "closed", true); got != 0o555 {
		t.Errorf("without the source's modes: got %#o, want %#o", got, 0o555)
	}
}
