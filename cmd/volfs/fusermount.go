package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fuseDevice is the kernel's FUSE device.
const fuseDevice = "/dev/fuse"

// withFusermountOutput runs mount, which may run fusermount3, with the
// process's os.Stderr pointing at a pipe, and returns what was written
// there. go-fuse runs fusermount3 with os.Stderr as its stderr and keeps
// only its wait status: its message would land in the terminal without
// context, or in a --daemon child's /dev/null. Nothing else writes to
// os.Stderr while mount runs: the logger holds the stderr it was made with.
func withFusermountOutput(mount func() error) (said string, err error) {
	r, w, perr := os.Pipe()
	if perr != nil {
		return "", mount()
	}
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
		io.Copy(io.Discard, r)
		r.Close()
		out <- strings.TrimSpace(string(b))
	}()
	saved := os.Stderr
	os.Stderr = w
	err = mount()
	os.Stderr = saved
	w.Close()
	return <-out, err
}

// mountError rewrites go-fuse's "fusermount exited with code N" into
// fusermount3's own message and exit status, and adds the fix when the
// FUSE device is what failed.
func mountError(err error, said string) error {
	said = strings.Join(strings.Fields(said), " ")
	var code uint32
	if _, serr := fmt.Sscanf(strings.TrimSpace(err.Error()), "fusermount exited with code %d", &code); serr == nil {
		msg := fmt.Sprintf("fusermount3 failed (exit status %d)", syscall.WaitStatus(code).ExitStatus())
		if said != "" {
			msg += ": " + said
		}
		err = errors.New(msg)
	} else if said != "" {
		err = fmt.Errorf("%w (fusermount3: %s)", err, said)
	}
	if hint := fuseDeviceHint(fuseDevice); hint != "" {
		err = fmt.Errorf("%w; %s", err, hint)
	}
	return err
}

// fuseDeviceHint says how to fix the FUSE device dev (fuseDevice but in
// tests) when this user cannot use it, or "" when it looks usable.
func fuseDeviceHint(dev string) string {
	if _, err := os.Stat(dev); errors.Is(err, os.ErrNotExist) {
		return dev + " does not exist: load the module (modprobe fuse), or in a container pass the device (docker run --device /dev/fuse --cap-add SYS_ADMIN)"
	}
	if err := unix.Access(dev, unix.R_OK|unix.W_OK); err != nil {
		return fmt.Sprintf("%s is not readable and writable by you (%v): as root, chmod 0666 %s (Debian's default), or add yourself to the group that owns it", dev, err, dev)
	}
	return ""
}

// logFusermountOutput logs what fusermount3 said on a mount that worked.
func logFusermountOutput(said string) {
	if said != "" {
		slog.Warn("fusermount3: " + strings.Join(strings.Fields(said), " "))
	}
}
