package integration

// Tests of volfs run the way people run gcsfuse and rclone: as a user other
// than root, in the background, from mount(8) and systemd, configured from
// the environment. Each runs the volfs binary as a subprocess and reads the
// mount through other subprocesses.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/volfs/volfs/internal/testenv"
)

// corruptChunk is an s0 chunk that mkprecomputed.py stores as .gz, so that
// --corrupt can spoil it.
const corruptChunk = "-13-19_21-37_-3-1"

// missingChunk is an s0 chunk that mkprecomputed.py leaves out.
const missingChunk = "19-51_5-21_-3-1"

// sharedDir returns a new directory that every user may read and traverse
// (t.TempDir's are root's alone), removed at the end of the test after the
// mounts in it.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "volfs-ops-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedVolume writes the numpy test layer into a sharedDir, readable by
// all, and returns the layer and truth directories.
func sharedVolume(t *testing.T, args ...string) (vol, truth string) {
	t.Helper()
	requirePython(t)
	dir := sharedDir(t)
	vol, truth = filepath.Join(dir, "vol"), filepath.Join(dir, "truth")
	run(t, python, append([]string{"testdata/mkprecomputed.py", vol}, args...)...)
	run(t, "chmod", "-R", "a+rX", dir)
	return vol, truth
}

// newMountpoint makes an empty directory to mount at, owned by uid:gid, and
// makes sure nothing stays mounted there after the test.
func newMountpoint(t *testing.T, parent string, uid, gid int) string {
	t.Helper()
	mnt, err := os.MkdirTemp(parent, "mnt-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mnt, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forceUnmount(t, mnt) })
	return mnt
}

// forceUnmount detaches whatever is mounted at mnt, live or stale.
func forceUnmount(t *testing.T, mnt string) {
	t.Helper()
	for isMounted(t, mnt) {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount -l %s: %v\n%s", mnt, err, out)
			return
		}
	}
}

// startCmd starts cmd, a volfs serving in the foreground, and returns once
// its log on stderr says the mount is up (in text or JSON), with the log
// collected so far and to come (s.stderr). The process is killed, and its
// mount removed, at the end of the test.
func startCmd(t *testing.T, cmd *exec.Cmd, mnt string) (*serving, *logBuffer) {
	t.Helper()
	requireFUSE(t)
	s := &serving{cmd: cmd, mnt: mnt, stdout: new(bytes.Buffer), done: make(chan error, 1)}
	cmd.Stdout = s.stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := &s.stderr
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		up := false
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if l := sc.Text(); !up && (strings.Contains(l, "msg=mounted") || strings.Contains(l, `"msg":"mounted"`)) {
				up = true
				ready <- true
			}
		}
		if !up {
			ready <- false
		}
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		forceUnmount(t, mnt)
	})
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s exited before mounting", strings.Join(cmd.Args, " "))
		}
	case <-time.After(time.Minute):
		t.Fatal("volfs did not mount within a minute")
	}
	return s, log
}

// testUser is an unprivileged account made for a test.
type testUser struct {
	name     string
	uid, gid int
	dir      string // where the user's copies are, readable by all; its commands run there
	bin      string // a copy of volfs that the user may run
	check    string // a copy of testdata/checkprecomputed.py that the user may read
}

// newTestUser creates an unprivileged user (removed at the end of the test),
// makes /dev/fuse usable by every user as a normal system does (mode 0666,
// restored at the end), and copies into dir what it runs: the volfs binary
// and the check script. A clone may lie in a directory the user cannot
// enter (root's home, mode 0700), so the user never reads from the clone.
func newTestUser(t *testing.T, dir string) *testUser {
	t.Helper()
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to create a user")
	}
	for _, tool := range []string{"useradd", "userdel", "setpriv", "fusermount3"} {
		testenv.LookPath(t, tool, "bash .ci/run installs it")
	}
	const name = "volfs-test"
	if _, err := runErr("id", "-u", name); err != nil {
		run(t, "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name)
	}
	t.Cleanup(func() {
		if out, err := runErr("userdel", name); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
	})
	u := &testUser{name: name, dir: dir}
	var err error
	if u.uid, err = strconv.Atoi(strings.TrimSpace(run(t, "id", "-u", name))); err != nil {
		t.Fatal(err)
	}
	if u.gid, err = strconv.Atoi(strings.TrimSpace(run(t, "id", "-g", name))); err != nil {
		t.Fatal(err)
	}

	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("/dev/fuse", 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod("/dev/fuse", fi.Mode().Perm()) })

	u.bin = filepath.Join(dir, "volfs")
	run(t, "cp", volfsBin, u.bin)
	run(t, "chmod", "0755", u.bin)
	u.check = filepath.Join(dir, "checkprecomputed.py")
	run(t, "cp", "testdata/checkprecomputed.py", u.check)
	run(t, "chmod", "0644", u.check)
	return u
}

// command runs name as the user, with only its own uid, gid and groups,
// in u.dir.
func (u *testUser) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(u.uid), "--regid=" + strconv.Itoa(u.gid), "--init-groups", "--", name}, args...)...)
	cmd.Dir = u.dir
	return cmd
}

// run runs name as the user and returns its combined output and error.
func (u *testUser) run(name string, args ...string) (string, error) {
	out, err := u.command(name, args...).CombinedOutput()
	return string(out), err
}

// setFuseConf replaces /etc/fuse.conf with content for the rest of the test
// and restores it, or its absence, at the end.
func setFuseConf(t *testing.T, content string) {
	t.Helper()
	const path = "/etc/fuse.conf"
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if existed {
			os.WriteFile(path, old, 0o644)
		} else {
			os.Remove(path)
		}
	})
}

// TestNonRootMount mounts as an unprivileged user through fusermount3,
// reads every chunk as that user, and unmounts with fusermount3 -u. Then
// --allow-other: refused with a clear message while /etc/fuse.conf lacks
// user_allow_other, and readable by root once it has it.
func TestNonRootMount(t *testing.T) {
	vol, truth := sharedVolume(t)
	dir := sharedDir(t)
	u := newTestUser(t, dir)
	checkAs := func(as *testUser, mnt string) {
		t.Helper()
		args := []string{u.check, truth, mnt, "--orig", vol}
		var out string
		var err error
		if as == nil {
			out, err = runErr(python, args...)
		} else {
			out, err = as.run(python, args...)
		}
		if err != nil {
			t.Fatalf("check as %v: %v\n%s", as, err, out)
		}
		t.Log(strings.TrimSpace(out))
	}

	mnt := newMountpoint(t, dir, u.uid, u.gid)
	s, _ := startCmd(t, u.command(u.bin, "mount", vol, mnt), mnt)
	checkAs(u, mnt)
	// The files belong to the user who mounted, by default.
	if out, err := u.run("stat", "-c", "%u:%g", filepath.Join(mnt, "info")); err != nil || strings.TrimSpace(out) != fmt.Sprintf("%d:%d", u.uid, u.gid) {
		t.Errorf("owner of info: got %v %s, want %d:%d", err, out, u.uid, u.gid)
	}
	// Without allow_other, FUSE keeps out every other user, root too.
	if _, err := os.Stat(filepath.Join(mnt, "info")); !errors.Is(err, os.ErrPermission) {
		t.Errorf("stat by root of a user's mount without --allow-other: got %v, want EACCES", err)
	}
	if out, err := u.run("fusermount3", "-u", mnt); err != nil {
		t.Fatalf("fusermount3 -u as %s: %v\n%s", u.name, err, out)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("volfs exited with %v after fusermount3 -u, want 0", err)
	}

	t.Run("daemon", func(t *testing.T) {
		mnt := newMountpoint(t, dir, u.uid, u.gid)
		logFile := mnt + ".log"
		if err := os.WriteFile(logFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(logFile, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
		if out, err := u.run(u.bin, "mount", "--daemon", "--log-file", logFile, vol, mnt); err != nil {
			t.Fatalf("mount --daemon as %s: %v\n%s", u.name, err, out)
		}
		exited := watchPID(t, daemonPID(t, logFile))
		checkAs(u, mnt)
		if out, err := u.run("fusermount3", "-u", mnt); err != nil {
			t.Fatalf("fusermount3 -u: %v\n%s", err, out)
		}
		waitExited(t, exited, "the background volfs")
	})

	t.Run("allow-other refused without user_allow_other", func(t *testing.T) {
		setFuseConf(t, "# mount_max = 1000\n#user_allow_other\n")
		mnt := newMountpoint(t, dir, u.uid, u.gid)
		out, err := u.run(u.bin, "mount", "--allow-other", vol, mnt)
		if err == nil {
			t.Fatalf("mount --allow-other succeeded without user_allow_other:\n%s", out)
		}
		for _, want := range []string{"--allow-other", "user_allow_other", "/etc/fuse.conf"} {
			if !strings.Contains(out, want) {
				t.Errorf("refusal does not say %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "fusermount") {
			t.Errorf("refusal passes on fusermount3's message instead of explaining:\n%s", out)
		}
		if isMounted(t, mnt) {
			t.Errorf("%s mounted after a refusal", mnt)
		}
	})

	t.Run("allow-other with user_allow_other", func(t *testing.T) {
		setFuseConf(t, "user_allow_other\n")
		mnt := newMountpoint(t, dir, u.uid, u.gid)
		s, _ := startCmd(t, u.command(u.bin, "mount", "--allow-other", vol, mnt), mnt)
		// Root is another user: without allow_other FUSE refuses it.
		checkAs(nil, mnt)
		if out, err := u.run("fusermount3", "-u", mnt); err != nil {
			t.Fatalf("fusermount3 -u: %v\n%s", err, out)
		}
		if err := s.wait(t); err != nil {
			t.Errorf("volfs exited with %v, want 0", err)
		}
	})
}

// daemonPID returns the pid of the background volfs whose mount logFile
// logged last.
func daemonPID(t *testing.T, logFile string) int {
	t.Helper()
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	all := regexp.MustCompile(`msg=mounted .*pid=(\d+)`).FindAllSubmatch(data, -1)
	if all == nil {
		t.Fatalf("no pid in the log:\n%s", data)
	}
	pid, _ := strconv.Atoi(string(all[len(all)-1][1]))
	return pid
}

// watchPID returns a channel closed when process pid exits. It need not be
// a child: the watch is a pidfd. The process is killed at the end of the
// test if it is still running.
func watchPID(t *testing.T, pid int) <-chan struct{} {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		select {
		case <-exited:
			unix.Close(fd)
		case <-time.After(time.Minute):
			t.Errorf("process %d survived SIGKILL for a minute", pid)
		}
	})
	go func() {
		defer close(exited)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return exited
}

// waitExited fails the test if exited is not closed within a minute.
func waitExited(t *testing.T, exited <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit within a minute", what)
	}
}

// TestDaemon runs mount --daemon: it returns 0 only once the mount is
// live, the background process logs to --log-file and exits on umount;
// failures come back as a non-zero status with the reason.
func TestDaemon(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "volfs.log")
	mnt := newMountpoint(t, dir, 0, 0)

	out := run(t, volfsBin, "mount", "--daemon", "--log-file", logFile, vol, mnt)
	if out != "" {
		t.Errorf("mount --daemon printed %q, want nothing", out)
	}
	// No waiting: the exit status promised a live mount.
	if !isMounted(t, mnt) {
		t.Fatalf("%s is not mounted when mount --daemon returns", mnt)
	}
	pid := daemonPID(t, logFile)
	exited := watchPID(t, pid)
	check(t, truth, mnt, vol)
	run(t, "umount", mnt)
	waitExited(t, exited, "the background volfs")
	if log, _ := os.ReadFile(logFile); !strings.Contains(string(log), "msg=unmounted") {
		t.Errorf("the log does not record the unmount:\n%s", log)
	}

	// VOLFS_DAEMON=true in the environment: the background process
	// inherits it and must serve, not start another.
	mnt = newMountpoint(t, dir, 0, 0)
	cmd := exec.Command(volfsBin, "mount", vol, mnt)
	cmd.Env = append(os.Environ(), "VOLFS_DAEMON=true", "VOLFS_LOG_FILE="+logFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("VOLFS_DAEMON=true volfs mount: %v\n%s", err, out)
	}
	if !isMounted(t, mnt) {
		t.Fatalf("%s is not mounted when VOLFS_DAEMON=true volfs mount returns", mnt)
	}
	exited = watchPID(t, daemonPID(t, logFile))
	run(t, "umount", mnt)
	waitExited(t, exited, "the background volfs")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"source missing", []string{filepath.Join(dir, "no-such-source")}, "no-such-source"},
		{"bad flag value", []string{"--missing=sometimes", vol}, "--missing"},
		{"bad log format", []string{"--log-format=xml", vol}, "--log-format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := newMountpoint(t, dir, 0, 0)
			args := append([]string{"mount", "--daemon", "--log-file", logFile}, tc.args...)
			out, err := runErr(volfsBin, append(args, mnt)...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("mount --daemon %s: got %v, want a non-zero exit\n%s", strings.Join(tc.args, " "), err, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the reason does not name %q:\n%s", tc.want, out)
			}
			if isMounted(t, mnt) {
				t.Errorf("%s mounted after a failure", mnt)
			}
		})
	}
}

// TestDaemonSyslog runs mount --daemon without --log-file: the background
// process logs to syslog, here a datagram socket at /dev/log made by the
// test.
func TestDaemonSyslog(t *testing.T) {
	requireFUSE(t)
	const devLog = "/dev/log"
	if _, err := os.Lstat(devLog); err == nil {
		t.Skip("a syslog daemon owns /dev/log; this test makes its own")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to create /dev/log")
	}
	syslog, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: devLog, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syslog.Close(); os.Remove(devLog) })
	vol, _ := writeVolume(t)
	mnt := newMountpoint(t, t.TempDir(), 0, 0)
	run(t, volfsBin, "mount", "--daemon", vol, mnt)
	if !isMounted(t, mnt) {
		t.Fatalf("%s is not mounted when mount --daemon returns", mnt)
	}
	// The log line was sent before the child reported readiness.
	syslog.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 64<<10)
	var msg string
	for !strings.Contains(msg, "msg=mounted") {
		n, err := syslog.Read(buf)
		if err != nil {
			t.Fatalf("no 'mounted' message on syslog: %v", err)
		}
		msg = string(buf[:n])
	}
	// <30> is facility daemon (3), severity info (6).
	if !strings.HasPrefix(msg, "<30>") || !strings.Contains(msg, "volfs") {
		t.Errorf("syslog message %q: want priority <30> and tag volfs", msg)
	}
	m := regexp.MustCompile(`pid=(\d+)`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no pid in %q", msg)
	}
	pid, _ := strconv.Atoi(m[1])
	exited := watchPID(t, pid)
	run(t, "umount", mnt)
	waitExited(t, exited, "the background volfs")
}

// notifySocket makes a datagram socket to pass as NOTIFY_SOCKET, as
// systemd does for a Type=notify unit.
func notifySocket(t *testing.T) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, path
}

// readNotify returns the next datagram on conn, failing after a minute.
func readNotify(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

// TestSystemdNotify checks sd_notify: READY=1 arrives only once the mount
// is live; STOPPING=1 when asked to stop. Under --daemon the parent sends
// READY=1 with MAINPID naming the background process.
func TestSystemdNotify(t *testing.T) {
	requireFUSE(t)
	vol, _ := writeVolume(t)
	dir := t.TempDir()

	conn, sock := notifySocket(t)
	mnt := newMountpoint(t, dir, 0, 0)
	cmd := exec.Command(volfsBin, "mount", vol, mnt)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	msg := readNotify(t, conn)
	if !strings.Contains(msg, "READY=1") {
		t.Fatalf("first notification %q, want READY=1", msg)
	}
	// Read at once: READY=1 promised a live mount.
	if out, err := runErr("ls", filepath.Join(mnt, "s0")); err != nil || !strings.Contains(out, missingChunk) {
		t.Errorf("ls right after READY=1: %v\n%s", err, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if msg := readNotify(t, conn); !strings.Contains(msg, "STOPPING=1") {
		t.Errorf("notification after SIGTERM %q, want STOPPING=1", msg)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("volfs exited with %v after SIGTERM, want 0\n%s", err, stderr.String())
	}

	t.Run("daemon", func(t *testing.T) {
		conn, sock := notifySocket(t)
		mnt := newMountpoint(t, dir, 0, 0)
		logFile := filepath.Join(t.TempDir(), "log")
		cmd := exec.Command(volfsBin, "mount", "--daemon", "--log-file", logFile, vol, mnt)
		cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mount --daemon: %v\n%s", err, out)
		}
		pid := daemonPID(t, logFile)
		exited := watchPID(t, pid)
		msg := readNotify(t, conn)
		if want := fmt.Sprintf("MAINPID=%d\nREADY=1", pid); msg != want {
			t.Errorf("notification %q, want %q", msg, want)
		}
		run(t, "umount", mnt)
		waitExited(t, exited, "the background volfs")
	})
}

// TestMountHelper mounts through mount.volfs called as mount(8) calls an
// external helper, and, where the test may install /sbin/mount.volfs,
// through mount(8) itself.
func TestMountHelper(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	dir := t.TempDir()
	helper := filepath.Join(dir, "mount.volfs")
	if err := os.Symlink(volfsBin, helper); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "volfs.log")

	// What mount(8) runs for the fstab line
	//   SOURCE MNT volfs noauto,_netdev,x-systemd.automount,cache_size=64MiB,missing=error,uid=4321,log_file=... 0 0
	mnt := newMountpoint(t, dir, 0, 0)
	opts := "rw,noauto,_netdev,nofail,x-systemd.automount,x-systemd.idle-timeout=60,nosuid,nodev," +
		"cache_size=64MiB,missing=error,uid=4321,gid=4322,log_file=" + logFile
	out := run(t, helper, vol, mnt, "-o", opts)
	if !isMounted(t, mnt) {
		t.Fatalf("%s is not mounted when mount.volfs returns:\n%s", mnt, out)
	}
	exited := watchPID(t, daemonPID(t, logFile))
	check(t, truth, mnt, vol, "--missing-error")
	if got := strings.TrimSpace(run(t, "stat", "-c", "%u:%g", filepath.Join(mnt, "info"))); got != "4321:4322" {
		t.Errorf("owner with uid=4321,gid=4322: got %s", got)
	}
	run(t, "umount", mnt)
	waitExited(t, exited, "the background volfs")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown option", []string{"-o", "ro,cache_size=64MiB,colour=blue"}, "unknown option colour"},
		{"value missing", []string{"-o", "cache_size"}, "cache_size needs a value"},
		{"unknown argument", []string{"-q"}, "unknown argument -q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := newMountpoint(t, dir, 0, 0)
			out, err := runErr(helper, append([]string{vol, mnt}, tc.args...)...)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("got %v, want exit status 1 (incorrect invocation)\n%s", err, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the refusal does not say %q:\n%s", tc.want, out)
			}
			if isMounted(t, mnt) {
				t.Errorf("%s mounted after a refusal", mnt)
			}
		})
	}

	t.Run("sloppy and fake", func(t *testing.T) {
		mnt := newMountpoint(t, dir, 0, 0)
		// -s: an unknown option is ignored; -f: nothing is mounted.
		out := run(t, helper, "-sfv", vol, mnt, "-o", "colour=blue,cache_size=64MiB")
		if !strings.Contains(out, "colour") || !strings.Contains(out, "--cache-size=64MiB") {
			t.Errorf("-sv output does not show the ignored option and the command:\n%s", out)
		}
		if isMounted(t, mnt) {
			t.Errorf("-f mounted %s", mnt)
		}
	})

	t.Run("mount failure", func(t *testing.T) {
		mnt := newMountpoint(t, dir, 0, 0)
		out, err := runErr(helper, filepath.Join(dir, "no-such-source"), mnt, "-o", "log_file="+logFile)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 32 {
			t.Errorf("got %v, want exit status 32 (mount failure)\n%s", err, out)
		}
		if !strings.Contains(out, "no-such-source") {
			t.Errorf("the failure does not name the source:\n%s", out)
		}
	})

	// mount(8) waits for its helper: daemon=false, as an option or in
	// the environment, must not keep it in the foreground.
	t.Run("daemon=false", func(t *testing.T) {
		mnt := newMountpoint(t, dir, 0, 0)
		logFile := filepath.Join(t.TempDir(), "log")
		cmd := exec.Command(helper, vol, mnt, "-o", "daemon=false,log_file="+logFile)
		cmd.Env = append(os.Environ(), "VOLFS_DAEMON=false")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("mount.volfs -o daemon=false: %v\n%s", err, out.String())
			}
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("mount.volfs -o daemon=false did not return within a minute:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "ignoring daemon=false") {
			t.Errorf("no warning that daemon=false is ignored:\n%s", out.String())
		}
		if !isMounted(t, mnt) {
			t.Fatalf("%s is not mounted when mount.volfs returns", mnt)
		}
		exited := watchPID(t, daemonPID(t, logFile))
		check(t, truth, mnt, vol)
		run(t, "umount", mnt)
		waitExited(t, exited, "the background volfs")
	})

	t.Run("mount(8)", func(t *testing.T) {
		const sbin = "/sbin/mount.volfs"
		if _, err := os.Lstat(sbin); err == nil {
			t.Skipf("%s exists; not replacing it", sbin)
		}
		if os.Geteuid() != 0 {
			t.Skip("needs root, to install " + sbin)
		}
		if err := os.Symlink(volfsBin, sbin); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(sbin) })
		mnt := newMountpoint(t, dir, 0, 0)
		logFile := filepath.Join(t.TempDir(), "log")
		run(t, "mount", "-t", "volfs", "-o", "ro,noatime,missing=error,log_file="+logFile, vol, mnt)
		exited := watchPID(t, daemonPID(t, logFile))
		check(t, truth, mnt, vol, "--missing-error")
		run(t, "umount", mnt)
		waitExited(t, exited, "the background volfs")
	})
}

// TestEnvironment sets flags through VOLFS_* variables, over their
// defaults, and checks their effect through a mount: missing chunks are
// ENOENT, files show the uid, logs are JSON and name the corrupt chunk.
func TestEnvironment(t *testing.T) {
	vol, truth := writeVolume(t, "--corrupt="+corruptChunk)
	mnt := newMountpoint(t, t.TempDir(), 0, 0)
	cmd := exec.Command(volfsBin, "mount", vol, mnt)
	cmd.Env = append(os.Environ(), "VOLFS_MISSING=error", "VOLFS_UID=4321", "VOLFS_LOG_FORMAT=json")
	// startCmd waits for the JSON "mounted" record: a text one would not do.
	s, _ := startCmd(t, cmd, mnt)
	check(t, truth, mnt, vol, "--missing-error")
	if got := strings.TrimSpace(run(t, "stat", "-c", "%u", filepath.Join(mnt, "s0", corruptChunk))); got != "4321" {
		t.Errorf("owner with VOLFS_UID=4321: got %s", got)
	}
	run(t, "umount", mnt)
	if err := s.wait(t); err != nil {
		t.Fatalf("volfs exited with %v", err)
	}
}

// TestLogFormatJSON checks that --log-format json writes one JSON object
// per line and that the line of a failed read names the chunk and the
// cause.
func TestLogFormatJSON(t *testing.T) {
	vol, _ := writeVolume(t, "--corrupt="+corruptChunk)
	mnt := newMountpoint(t, t.TempDir(), 0, 0)
	s, log := startCmd(t, exec.Command(volfsBin, "mount", "--log-format", "json", vol, mnt), mnt)
	if out, err := runErr("cat", filepath.Join(mnt, "s0", corruptChunk)); err == nil {
		t.Fatalf("cat of a corrupt chunk succeeded:\n%s", out)
	}
	run(t, "umount", mnt)
	if err := s.wait(t); err != nil {
		t.Fatalf("volfs exited with %v", err)
	}
	data := log.String()
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %v\n%s", err, line)
			continue
		}
		if rec["level"] == "ERROR" && strings.Contains(line, corruptChunk) {
			found = true
		}
	}
	if !found {
		t.Errorf("no ERROR record names %s:\n%s", corruptChunk, data)
	}
}

// TestStaleMountpoint kills a volfs with SIGKILL, leaving its mountpoint
// stale ("transport endpoint is not connected"): a second mount says so
// and how to clear it, and does what it says work.
func TestStaleMountpoint(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	mnt := newMountpoint(t, t.TempDir(), 0, 0)
	s, _ := startCmd(t, exec.Command(volfsBin, "mount", vol, mnt), mnt)
	s.cmd.Process.Kill()
	s.wait(t)
	if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of a killed volfs's mountpoint: got %v, want ENOTCONN", err)
	}
	out, err := runErr(volfsBin, "mount", vol, mnt)
	if err == nil {
		t.Fatalf("mount over a stale mountpoint succeeded:\n%s", out)
	}
	for _, want := range []string{"stale", "fusermount3 -uz " + mnt, "umount -l " + mnt} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	// Follow the advice.
	run(t, "fusermount3", "-uz", mnt)
	startCmd(t, exec.Command(volfsBin, "mount", vol, mnt), mnt)
	check(t, truth, mnt, vol)
}

// TestNonEmptyMountpoint refuses a mountpoint that holds a file, unless
// --allow-non-empty.
func TestNonEmptyMountpoint(t *testing.T) {
	requireFUSE(t)
	vol, truth := writeVolume(t)
	mnt := newMountpoint(t, t.TempDir(), 0, 0)
	if err := os.WriteFile(filepath.Join(mnt, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runErr(volfsBin, "mount", vol, mnt)
	if err == nil || !strings.Contains(out, "not empty") || !strings.Contains(out, "notes.txt") || !strings.Contains(out, "--allow-non-empty") {
		t.Fatalf("mount over a non-empty directory: got %v, want a refusal naming notes.txt and --allow-non-empty\n%s", err, out)
	}
	if isMounted(t, mnt) {
		t.Fatalf("%s mounted after a refusal", mnt)
	}
	startCmd(t, exec.Command(volfsBin, "mount", "--allow-non-empty", vol, mnt), mnt)
	check(t, truth, mnt, vol)
}

// TestVersion builds volfs in a clone of this repository's HEAD, where the
// toolchain stamps the VCS revision (it does not in a git worktree, nor
// with GOFLAGS=-buildvcs=false), and checks that --version shows it.
func TestVersion(t *testing.T) {
	head, err := runErr("git", "rev-parse", "HEAD")
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	head = strings.TrimSpace(head)
	clone := filepath.Join(t.TempDir(), "volfs")
	top := strings.TrimSpace(run(t, "git", "rev-parse", "--show-toplevel"))
	run(t, "git", "clone", "--quiet", "--no-hardlinks", top, clone)
	bin := filepath.Join(t.TempDir(), "volfs")
	cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/volfs")
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := run(t, bin, "--version")
	if !strings.Contains(out, "revision "+head) {
		t.Errorf("volfs --version = %q, want the revision %s", out, head)
	}
	// The module version Go derives from the commit: a pseudo-version
	// naming it, or a tag.
	if !strings.Contains(out, head[:12]) && !regexp.MustCompile(`version v\d+\.\d+\.\d+ `).MatchString(out) {
		t.Errorf("volfs --version = %q, want a module version", out)
	}
}

// flagNames returns the flags that `volfs CMD --help` lists.
func flagNames(t *testing.T, cmd string) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(--[a-z-]+)`).FindAllStringSubmatch(run(t, volfsBin, cmd, "--help"), -1) {
		if m[1] != "--help" {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		t.Fatalf("volfs %s --help lists no flags", cmd)
	}
	return names
}

// requireTool returns the path of a program that .ci/run installs, or ends
// the test with testenv.Unavailable.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	return testenv.LookPath(t, name, "bash .ci/run installs it")
}

// TestManPage renders `volfs man` with man(1) and checks that it documents
// every command and flag that --help shows, and the environment variables.
func TestManPage(t *testing.T) {
	requireTool(t, "man")
	page := filepath.Join(t.TempDir(), "volfs.1")
	if err := os.WriteFile(page, []byte(run(t, volfsBin, "man")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("man", "--warnings", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=200", "MANPAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, stderr.String())
	}
	text := string(out)
	for _, want := range []string{"volfs(1)", "VOLFS_CACHE_SIZE", "mount.volfs", "gs://BUCKET[/PREFIX]", "s3://BUCKET[/PREFIX]"} {
		if !strings.Contains(text, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
	// The synopsis shows the commands, and examples close the page.
	synopsis := regexp.MustCompile(`(?ms)^SYNOPSIS\n(.*?)^\S`).FindStringSubmatch(text)
	if synopsis == nil {
		t.Fatalf("the man page has no SYNOPSIS:\n%s", text)
	}
	for _, want := range []string{"volfs mount [OPTIONS] SOURCE MOUNTPOINT", "volfs info [OPTIONS] SOURCE", "volfs serve [OPTIONS] SOURCE", "volfs warm [OPTIONS] SOURCE [PATH...]"} {
		if !strings.Contains(synopsis[1], want) {
			t.Errorf("the man page's SYNOPSIS lacks %q:\n%s", want, synopsis[1])
		}
	}
	if ex := regexp.MustCompile(`(?ms)^EXAMPLES\n(.*)`).FindStringSubmatch(text); ex == nil || !strings.Contains(ex[1], "volfs mount ") {
		t.Errorf("the man page has no EXAMPLES section with a volfs mount:\n%s", text)
	}
	// go-md2man would render "[/PREFIX] (...)" as a link to "...".
	if strings.Contains(text, "gs://BUCKET/PREFIX") {
		t.Errorf("the man page lost the brackets of gs://BUCKET[/PREFIX]")
	}
	for _, c := range []string{"mount", "demo", "info", "cat"} {
		sect := regexp.MustCompile(`(?ms)^` + c + `\n(.*?)(?:^\S|\z)`).FindStringSubmatch(text)
		if sect == nil {
			t.Errorf("the man page has no section for %s:\n%s", c, text)
			continue
		}
		for _, f := range flagNames(t, c) {
			if !strings.Contains(sect[1], f+":") && !strings.Contains(sect[1], f+"=") {
				t.Errorf("the man page's %s section lacks %s", c, f)
			}
		}
	}
}

// TestCompletion loads each shell's completion script into that shell and
// completes command and flag names with it.
func TestCompletion(t *testing.T) {
	t.Run("bash", func(t *testing.T) {
		bash := requireTool(t, "bash")
		script := filepath.Join(t.TempDir(), "volfs.bash")
		os.WriteFile(script, []byte(run(t, volfsBin, "completion", "bash")), 0o644)
		for _, tc := range []struct {
			words []string // the last one is being completed
			want  string
		}{
			{[]string{"mo"}, "mount"},
			{[]string{"c"}, "cat completion"},
			{[]string{"mount", "--allow-"}, "--allow-other --allow-non-empty --allow-empty-source"},
			{[]string{"mount", "--cache-size", "1G", "--dae"}, "--daemon"},
			{[]string{"info", "--log-f"}, "--log-format --log-file"},
			{[]string{"mount", "--missing", ""}, "fill error"},
			{[]string{"info", "--log-level", "w"}, "warn"},
			{[]string{"serve", "--log-format", ""}, "text json"},
		} {
			words := append([]string{volfsBin}, tc.words...)
			prog := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _volfs_complete; echo "${COMPREPLY[*]}"`,
				script, strings.Join(words, " "), len(words)-1)
			if got := strings.TrimSpace(run(t, bash, "-c", prog)); got != tc.want {
				t.Errorf("completing %q: got %q, want %q", strings.Join(tc.words, " "), got, tc.want)
			}
		}
	})
	t.Run("fish", func(t *testing.T) {
		fish := requireTool(t, "fish")
		script := filepath.Join(t.TempDir(), "volfs.fish")
		os.WriteFile(script, []byte(run(t, volfsBin, "completion", "fish")), 0o644)
		for _, tc := range []struct{ line, want string }{
			{"volfs mo", "mount"},
			{"volfs mount --allow-n", "--allow-non-empty"},
			{"volfs cat --log-fo", "--log-format"},
			{"volfs mount --missing ", "error fill"},
			{"volfs info --log-format j", "json"},
		} {
			// In an empty directory: fish offers file names too.
			out := run(t, fish, "--no-config", "-c", fmt.Sprintf("cd %q; source %q; complete -C %q", t.TempDir(), script, tc.line))
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("completing %q: got %q, want %q", tc.line, got, tc.want)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		zsh := requireTool(t, "zsh")
		script := filepath.Join(t.TempDir(), "_volfs")
		os.WriteFile(script, []byte(run(t, volfsBin, "completion", "zsh")), 0o644)
		run(t, zsh, "-n", script)
		// Run the completion function with compadd and _files standing in
		// for zsh's completion system (which needs a terminal), recording
		// what it offers.
		for _, tc := range []struct {
			words []string
			want  string
		}{
			{[]string{"mo"}, "mount"},
			{[]string{"mount", "--allow-"}, "--allow-other --allow-non-empty --allow-empty-source"},
			{[]string{"mount", "src", ""}, "_files"},
			{[]string{"mount", "--log-level", "d"}, "debug"},
		} {
			words := append([]string{volfsBin}, tc.words...)
			q := make([]string, len(words))
			for i, w := range words {
				q[i] = fmt.Sprintf("%q", w)
			}
			// compadd keeps the candidates that match the word, as zsh's does.
			prog := fmt.Sprintf(`compdef() { :; }; _files() { print _files; }
compadd() { [[ $1 == -a ]] && for c in ${(P)2}; do [[ $c == ${words[CURRENT]}* ]] && print -r -- $c; done; return 0; }
source %q; words=(%s); CURRENT=%d; _volfs`, script, strings.Join(q, " "), len(words))
			if got := strings.Join(strings.Fields(run(t, zsh, "-f", "-c", prog)), " "); got != tc.want {
				t.Errorf("completing %q: got %q, want %q", strings.Join(tc.words, " "), got, tc.want)
			}
		}
	})
}

// daemonStart is a `volfs mount --daemon` whose background process has
// asked its source for something and waits for the answer.
type daemonStart struct {
	cmd     *exec.Cmd // the foreground process
	out     *bytes.Buffer
	done    chan error // the foreground process's exit
	mnt     string
	logFile string // the background process's log
}

// startDaemonAsking runs `volfs mount --daemon source MNT` and returns once
// the background process has asked the source (a receive from asked),
// failing the test if the foreground process exits first. The foreground
// process is killed at the end of the test.
func startDaemonAsking(t *testing.T, source string, asked <-chan struct{}) *daemonStart {
	t.Helper()
	d := &daemonStart{
		mnt: newMountpoint(t, t.TempDir(), 0, 0), logFile: filepath.Join(t.TempDir(), "log"),
		out: new(bytes.Buffer), done: make(chan error, 1),
	}
	d.cmd = exec.Command(volfsBin, "mount", "--daemon", "--log-file", d.logFile, source, d.mnt)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() })
	select {
	case <-asked:
	case err := <-d.done:
		t.Fatalf("volfs exited (%v) before the background process asked the server:\n%s", err, d.out.String())
	case <-time.After(time.Minute):
		t.Fatal("the background process did not ask the server within a minute")
	}
	return d
}

// children returns the pids of the foreground process's children.
func (d *daemonStart) children(t *testing.T) []int {
	t.Helper()
	var pids []int
	for _, task := range mustGlob(t, fmt.Sprintf("/proc/%d/task/*/children", d.cmd.Process.Pid)) {
		data, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(data)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	}
	return pids
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDaemonChildKilled kills the background process while it is still
// opening its source (an HTTP server that never answers): the foreground
// one must notice the dead child and say so, not wait forever.
func TestDaemonChildKilled(t *testing.T) {
	requireFUSE(t)
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	d := startDaemonAsking(t, srv.URL+"/vol", asked)
	// The one process the foreground volfs started is the background one.
	pids := d.children(t)
	if len(pids) != 1 {
		t.Fatalf("the foreground volfs has children %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("got %v, want a non-zero exit", err)
		}
		if !strings.Contains(d.out.String(), "stopped before mounting") || !strings.Contains(d.out.String(), "killed") {
			t.Errorf("the report does not say the background process was killed before mounting:\n%s", d.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the foreground volfs did not exit within a minute of its child's death")
	}
	if isMounted(t, d.mnt) {
		t.Errorf("%s is mounted", d.mnt)
	}
}

// TestDaemonOrphan kills the foreground process of mount --daemon, as
// `timeout 3 volfs mount --daemon` does, while the background one is still
// opening a slow source: the caller has been told the mount failed, so the
// background process must exit without mounting, not mount later.
func TestDaemonOrphan(t *testing.T) {
	requireFUSE(t)
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	vol, _ := writeVolume(t)
	files := http.FileServer(http.Dir(vol))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	d := startDaemonAsking(t, srv.URL, asked)
	pids := d.children(t)
	if len(pids) == 0 {
		t.Fatal("the foreground volfs has no child")
	}
	exited := watchPID(t, pids[len(pids)-1])
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-d.done
	// The source still hangs: the child must leave on its own.
	waitExited(t, exited, "the orphaned background volfs")
	t.Logf("the orphan exited %v after its parent was killed", time.Since(start))
	// Now let the source answer: nothing is left to mount it.
	close(release)
	released = true
	if isMounted(t, d.mnt) {
		t.Errorf("%s is mounted by an orphan", d.mnt)
	}
	if log, _ := os.ReadFile(d.logFile); !strings.Contains(string(log), "is gone") || strings.Contains(string(log), "msg=mounted") {
		t.Errorf("the orphan's log does not say it stopped without mounting:\n%s", log)
	}
}

// TestFusermountFailure mounts as an unprivileged user where fusermount3
// fails: the refusal carries fusermount3's own message and exit status, in
// the foreground and under --daemon, and for a FUSE device the user cannot
// open, the fix. The device is made inaccessible in a private mount
// namespace (a root-only file bound over /dev/fuse), so that nothing else
// on the machine sees it.
func TestFusermountFailure(t *testing.T) {
	vol, _ := sharedVolume(t)
	dir := sharedDir(t)
	u := newTestUser(t, dir)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("unshare unavailable: %v", err)
	}
	fakeFuse := filepath.Join(dir, "fuse")
	if err := os.WriteFile(fakeFuse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		owner int  // of the mountpoint
		fake  bool // /dev/fuse is a root-only file
		want  []string
	}{
		{"mountpoint not the user's", 0, false, []string{"fusermount3 failed (exit status 1)", "mountpoint"}},
		{"/dev/fuse not accessible", u.uid, true, []string{"fusermount3 failed (exit status 1)", "Permission denied", "chmod 0666 /dev/fuse"}},
	} {
		for _, daemon := range []bool{false, true} {
			name := tc.name
			if daemon {
				name += " --daemon"
			}
			t.Run(name, func(t *testing.T) {
				mnt := newMountpoint(t, dir, tc.owner, tc.owner)
				if err := os.Chmod(mnt, 0o755); err != nil {
					t.Fatal(err)
				}
				args := []string{u.bin, "mount"}
				if daemon {
					logFile := mnt + ".log"
					if err := os.WriteFile(logFile, nil, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(logFile, u.uid, u.gid); err != nil {
						t.Fatal(err)
					}
					args = append(args, "--daemon", "--log-file", logFile)
				}
				args = append(args, vol, mnt)
				cmd := u.command(args[0], args[1:]...)
				if tc.fake {
					script := `mount --bind "$1" /dev/fuse && shift && exec "$@"`
					cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", fakeFuse}, cmd.Args...)...)
				}
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Errorf("got %v, want exit status 1\n%s", err, out)
				}
				for _, want := range tc.want {
					if !strings.Contains(string(out), want) {
						t.Errorf("the refusal does not say %q:\n%s", want, out)
					}
				}
				if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n > 1 {
					t.Errorf("the refusal takes %d lines, want at most 2:\n%s", n+1, out)
				}
				if isMounted(t, mnt) {
					t.Errorf("%s mounted", mnt)
				}
			})
		}
	}
}

// TestSIGINTDuringReadNonRoot is TestSIGINTDuringRead for a user's mount:
// the busy line gives the user's command (fusermount3 -uz), and the second
// SIGINT detaches the mount through fusermount3.
func TestSIGINTDuringReadNonRoot(t *testing.T) {
	vol, _ := sharedVolume(t)
	dir := sharedDir(t)
	u := newTestUser(t, dir)
	url, held := stallingOrigin(t, vol)
	mnt := newMountpoint(t, dir, u.uid, u.gid)
	s, log := startCmd(t, u.command(u.bin, "mount", "--read-timeout", "0", "--stall-timeout", "5m", url, mnt), mnt)
	out, err := u.run("find", mnt, "-mindepth", "2", "-maxdepth", "2", "-name", "*_*")
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("find the chunks as %s: %v\n%s", u.name, err, out)
	}
	chunk := strings.Fields(out)[0]
	reader := u.command("cat", chunk)
	reader.Stdout = io.Discard
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	// The user is deleted at cleanup, which fails while a process of
	// theirs runs: the cleanup waits for cat to be gone.
	gone := make(chan struct{})
	go func() { reader.Wait(); close(gone) }()
	t.Cleanup(func() {
		reader.Process.Kill()
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Errorf("cat did not exit within 10 s of SIGKILL")
		}
	})
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the origin was not asked for a chunk within a minute")
	}

	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log.String(), "is busy") {
		if time.Now().After(deadline) {
			t.Fatalf("no busy line within a minute of the first SIGINT:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want := "fusermount3 -uz " + mnt; !strings.Contains(log.String(), want) {
		t.Errorf("the busy line does not give %q:\n%s", want, log.String())
	}
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("volfs exited with %v after the second SIGINT, want exit status 0\n%s", err, log.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("volfs did not exit within 15 s of the second SIGINT:\n%s", log.String())
	}
	if isMounted(t, mnt) {
		t.Errorf("%s still mounted after the second SIGINT", mnt)
	}
}
