package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A stop signal (SIGINT, SIGTERM) first unmounts as umount(8) does. The
// kernel refuses that while a program has a file open in the mount, its
// working directory there, or a read in flight (EBUSY): volfs then keeps
// serving and says in one line which programs hold the mount and what to
// do. A second stop signal detaches the mount lazily (as `umount -l` or
// `fusermount3 -uz`) and volfs exits without waiting for them: the
// mountpoint is free at once, and the programs still inside get errors
// (ENOTCONN) instead of data, the way a killed volfs would leave them, but
// with nothing stale left behind.

// holder is a process that uses a mount: a file open there, or its
// working or root directory inside.
type holder struct {
	pid  int
	comm string
}

func (h holder) String() string { return fmt.Sprintf("%d (%s)", h.pid, h.comm) }

// holders returns the processes under proc (normally "/proc") other than
// this one that hold a file or directory at or below mountpoint, an
// absolute path, by pid. It reads only the kernel's names of their links
// (which never call into the mount), so it cannot block on the mount it
// inspects; processes this user may not inspect are left out.
func holders(proc, mountpoint string) []holder {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	inside := func(p string) bool {
		return p == mountpoint || strings.HasPrefix(p, mountpoint+"/")
	}
	self := os.Getpid()
	var out []holder
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join(proc, e.Name())
		held := false
		for _, l := range []string{"cwd", "root"} {
			if p, err := os.Readlink(filepath.Join(dir, l)); err == nil && inside(p) {
				held = true
			}
		}
		if !held {
			fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
			for _, fd := range fds {
				if p, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && inside(p) {
					held = true
					break
				}
			}
		}
		if !held {
			held = waitsInside(dir, inside)
		}
		if !held {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		out = append(out, holder{pid: pid, comm: strings.TrimSpace(string(comm))})
	}
	slices.SortFunc(out, func(a, b holder) int { return a.pid - b.pid })
	return out
}

// pathSyscalls are the system calls that name a file by a path (and, for
// the *at calls, a directory descriptor before it) that a program may be
// blocked in while the mount looks the path up; the value is the index of
// the path argument. Calls on an open descriptor (read, getdents64) are
// found by the descriptor instead.
var pathSyscalls = map[int]int{
	unix.SYS_OPENAT:     1,
	unix.SYS_OPENAT2:    1,
	unix.SYS_STATX:      1,
	unix.SYS_FACCESSAT:  1,
	unix.SYS_FACCESSAT2: 1,
	unix.SYS_READLINKAT: 1,
	unix.SYS_EXECVE:     0,
}

// waitsInside reports whether the process at dir (/proc/PID) is blocked
// in a FUSE request (the kernel's wchan) made by a system call on a path
// that inside accepts, such as an open of a chunk whose lookup waits for
// a slow origin: such a program has no descriptor in the mount yet, but
// keeps it busy.
func waitsInside(dir string, inside func(string) bool) bool {
	wchan, err := os.ReadFile(filepath.Join(dir, "wchan"))
	if err != nil || !strings.Contains(string(wchan), "request_wait_answer") && !strings.HasPrefix(string(wchan), "fuse_") {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "syscall"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return false // "running", or "-1 SP PC" outside a system call
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return false
	}
	argi, ok := pathSyscalls[nr]
	if !ok {
		nr = fstatatSyscall(nr)
		if argi, ok = pathSyscalls[nr]; !ok {
			return false
		}
	}
	if len(f) < 2+argi {
		return false
	}
	args := make([]uint64, 0, 2)
	for _, a := range f[1 : 2+argi] {
		v, err := strconv.ParseUint(strings.TrimPrefix(a, "0x"), 16, 64)
		if err != nil {
			return false
		}
		args = append(args, v)
	}
	p, err := readCString(filepath.Join(dir, "mem"), int64(args[argi]))
	if err != nil || p == "" {
		return false
	}
	if !filepath.IsAbs(p) {
		base := "cwd"
		if argi == 1 {
			if fd := int32(uint32(args[0])); fd != unix.AT_FDCWD {
				base = filepath.Join("fd", strconv.Itoa(int(fd)))
			}
		}
		at, err := os.Readlink(filepath.Join(dir, base))
		if err != nil {
			return false
		}
		p = filepath.Join(at, p)
	}
	return inside(filepath.Clean(p))
}

// readCString reads the NUL-terminated string of at most PATH_MAX bytes
// at addr in the memory file mem (/proc/PID/mem).
func readCString(mem string, addr int64) (string, error) {
	f, err := os.Open(mem)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, unix.PathMax)
	n, err := f.ReadAt(buf, addr)
	if n == 0 {
		return "", err
	}
	s, _, found := strings.Cut(string(buf[:n]), "\x00")
	if !found {
		return "", errors.New("no NUL within PATH_MAX")
	}
	return s, nil
}

// busyMessage is the one line logged when a stop signal could not unmount
// mountpoint because hs (possibly none found) hold it.
func busyMessage(mountpoint string, hs []holder) string {
	who := "a program"
	if len(hs) > 0 {
		names := make([]string, 0, len(hs))
		for _, h := range hs {
			names = append(names, h.String())
		}
		who = "process " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s is busy: %s uses it (a file or directory open there, or a read waiting for the source); still serving. Stop that program, "+
		"or press Ctrl-C again (SIGINT or SIGTERM) to detach the mount as `%s` does and exit", mountpoint, who, lazyCommand(mountpoint))
}

// lazyCommand is the command a user of this process's rights would give
// to detach mountpoint lazily.
func lazyCommand(mountpoint string) string {
	if os.Geteuid() == 0 {
		return "umount -l " + mountpoint
	}
	return "fusermount3 -uz " + mountpoint
}

// detach detaches mountpoint lazily: it leaves the namespace at once and
// the kernel drops the FUSE connection once this process exits.
func detach(mountpoint string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(mountpoint, syscall.MNT_DETACH); err == nil || errors.Is(err, syscall.EINVAL) {
			// EINVAL: not a mount any more (unmounted meanwhile).
			return nil
		} else if !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("umount -l %s: %w", mountpoint, err)
		}
	}
	out, err := exec.Command("fusermount3", "-u", "-z", mountpoint).CombinedOutput()
	if err != nil {
		return fmt.Errorf("fusermount3 -uz %s: %v: %s", mountpoint, err, oneLine(string(out)))
	}
	return nil
}

// oneLine folds s, a program's output, into one line for a log field.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
