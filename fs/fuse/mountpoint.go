package fuse

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// CheckMountpoint refuses a mountpoint that is missing, not a directory, or
// already mounted (including a stale FUSE mount whose server died), with a
// message that says which and what to do. It touches no network.
func CheckMountpoint(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		// What stat says when the FUSE server of a mount was killed: the
		// kernel keeps the mount until someone detaches it.
		return fmt.Errorf("mountpoint %s is a stale FUSE mount whose server is gone (transport endpoint is not connected); clear it with: fusermount3 -uz %s (or, as root: umount -l %s)", dir, dir, dir)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("mountpoint %s does not exist; create it with: mkdir -p %s", dir, dir)
	case err != nil:
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	mounted, err := isMountpoint(abs)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	if mounted {
		return fmt.Errorf("mountpoint %s is already mounted; unmount it first (umount %s)", dir, abs)
	}
	return nil
}

// isMountpoint reports whether abs, a clean absolute path with no symlinks,
// is the mount point of a mount in /proc/self/mountinfo.
func isMountpoint(abs string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == abs {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) that the
// kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CheckEmpty refuses a directory that holds anything: mounting over it
// would hide its files. It does not check that dir is a mountpoint; call
// CheckMountpoint first.
func CheckEmpty(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("mountpoint %s is not empty (it holds %s)", dir, names[0])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	return nil
}

// fuseConf is where fusermount3 reads user_allow_other.
const fuseConf = "/etc/fuse.conf"

// CheckAllowOther refuses an allow_other mount that fusermount3 would
// refuse: by a user other than root, when /etc/fuse.conf lacks the line
// user_allow_other. The error says how to add it; go-fuse would only say
// that fusermount3 failed.
func CheckAllowOther() error {
	if os.Geteuid() == 0 {
		return nil // root mounts directly, without fusermount3
	}
	data, err := os.ReadFile(fuseConf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", fuseConf, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) == "user_allow_other" {
			return nil
		}
	}
	return fmt.Errorf("a user other than root may allow other users only when %s has the line user_allow_other; ask root to add it (echo user_allow_other >> %s), or mount without allowing others", fuseConf, fuseConf)
}
