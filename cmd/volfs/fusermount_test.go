package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountError: go-fuse's "fusermount exited with code N" (a wait
// status) becomes fusermount3's exit status and its own message, on one
// line; any other error keeps its text and gains the message.
func TestMountError(t *testing.T) {
	for _, tc := range []struct {
		err, said, want string
	}{
		{"fusermount exited with code 256", "fusermount3: failed to open /dev/fuse: Permission denied\n",
			"fusermount3 failed (exit status 1): fusermount3: failed to open /dev/fuse: Permission denied"},
		{"fusermount exited with code 256", "", "fusermount3 failed (exit status 1)"},
		{"fusermount exited with code 256", "fusermount3: mountpoint\n  is not empty",
			"fusermount3 failed (exit status 1): fusermount3: mountpoint is not empty"},
		{"no FUSE mount option", "fusermount3: bad option", "no FUSE mount option (fusermount3: fusermount3: bad option)"},
		{"no FUSE mount option", "", "no FUSE mount option"},
	} {
		got := mountError(errors.New(tc.err), tc.said).Error()
		// The hint on the device depends on this machine's /dev/fuse.
		if hint := fuseDeviceHint(fuseDevice); hint != "" {
			tc.want += "; " + hint
		}
		if got != tc.want {
			t.Errorf("mountError(%q, %q): got %q, want %q", tc.err, tc.said, got, tc.want)
		}
	}
}

// TestFuseDeviceHint: a missing device names the module to load, one the
// user cannot open says how to open it up, a usable one gets no hint.
func TestFuseDeviceHint(t *testing.T) {
	dir := t.TempDir()
	if got := fuseDeviceHint(filepath.Join(dir, "fuse")); !strings.Contains(got, "modprobe fuse") || !strings.Contains(got, "--device /dev/fuse") {
		t.Errorf("missing device: got %q, want the module and the container's device named", got)
	}
	usable := filepath.Join(dir, "usable")
	if err := os.WriteFile(usable, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := fuseDeviceHint(usable); got != "" {
		t.Errorf("usable device: got %q, want no hint", got)
	}
	if os.Geteuid() == 0 {
		return // root opens a file of mode 0 too
	}
	closed := filepath.Join(dir, "closed")
	if err := os.WriteFile(closed, nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := fuseDeviceHint(closed); !strings.Contains(got, "chmod 0666 "+closed) {
		t.Errorf("closed device: got %q, want chmod 0666 named", got)
	}
}
