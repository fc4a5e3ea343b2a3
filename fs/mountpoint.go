package fs

import (
	"bufio"
	"errors"
	"fmt"
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
		return fmt.Errorf("mountpoint %s is a stale FUSE mount (its server is gone); run: fusermount3 -u %s", dir, dir)
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
