package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Background mode. Go cannot fork, so `volfs mount --daemon` re-executes
// its own binary with the same arguments, readyFDEnv set and the write end
// of a pipe as descriptor 3. The child, in a new session with its standard
// streams on /dev/null (or stderr on --log-file, so that a panic lands
// there), serves in the foreground and reports on the pipe once: readyMsg
// when the mount is live, or the text of the error that stopped it. The
// parent waits for that report and exits 0, or prints the error and exits
// non-zero; a child that dies without reporting is reported by its exit
// status.

// readyFDEnv names the descriptor a --daemon child reports on. Its presence
// is what makes a process the child, whatever --daemon says.
const readyFDEnv = "_VOLFS_READY_FD"

// readyMsg is what the child writes when the mount is live.
const readyMsg = "ready\n"

// reporter tells whoever waits for the mount that it is live, or why it
// failed: the --daemon parent through its pipe, and a systemd Type=notify
// unit through NOTIFY_SOCKET.
//
// A child also watches its parent until it reports: a parent that is gone
// (killed by `timeout`, a closed terminal, SIGKILL) has told its caller
// that the mount failed, so the child must not mount behind its back. The
// parent holds the only read end of the pipe; when it exits the write end
// polls POLLERR. Before mounting, the watcher exits the child; once the
// mount has started, ready fails and serve unmounts.
type reporter struct {
	child bool // this process is a --daemon child

	mu       sync.Mutex
	pipe     *os.File      // GUARDED_BY(mu); the parent's pipe in a child, nil once reported
	mounting bool          // GUARDED_BY(mu); serve has started to mount
	orphaned bool          // GUARDED_BY(mu); the parent went before a report
	stop     chan struct{} // closed once reported, to end watchParent
}

// errOrphaned is the error of a child whose parent is gone.
var errOrphaned = errors.New("the volfs that started this background one is gone (killed, or timed out) before the mount was reported live, so it does not mount")

// newReporter takes the descriptor named by readyFDEnv, if any, hides both
// from the programs volfs runs (fusermount3), and watches the parent.
func newReporter() *reporter {
	v, ok := os.LookupEnv(readyFDEnv)
	if !ok {
		return &reporter{}
	}
	os.Unsetenv(readyFDEnv)
	r := &reporter{child: true}
	if fd, err := strconv.Atoi(v); err == nil {
		syscall.CloseOnExec(fd)
		r.pipe = os.NewFile(uintptr(fd), "volfs-ready")
		r.stop = make(chan struct{})
		go r.watchParent(fd)
	}
	return r
}

// watchParent waits until the read end of the pipe on fd is closed (the
// parent is gone) or the child has reported. An orphan that has not
// started to mount exits at once, with status 1.
func (r *reporter) watchParent(fd int) {
	stopR, stopW, err := os.Pipe()
	if err != nil {
		return
	}
	defer stopR.Close()
	go func() { <-r.stop; stopW.Close() }()
	fds := []unix.PollFd{{Fd: int32(fd)}, {Fd: int32(stopR.Fd()), Events: unix.POLLIN}}
	for {
		// POLLERR and POLLHUP are reported whatever the events asked.
		if _, err := unix.Poll(fds, -1); errors.Is(err, unix.EINTR) {
			continue
		}
		r.mu.Lock()
		if r.pipe == nil || fds[1].Revents != 0 {
			r.mu.Unlock()
			return
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) == 0 {
			r.mu.Unlock()
			continue
		}
		r.orphaned = true
		if !r.mounting {
			slog.Error("stopped", "err", errOrphaned)
			os.Exit(1)
		}
		r.mu.Unlock()
		return
	}
}

// startMount reports whether serve may mount: false in an orphaned child.
func (r *reporter) startMount() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mounting = true
	return !r.orphaned
}

// ready reports that the mount at mountpoint is live. An error means that
// nobody waits for the mount any more: the caller unmounts and exits.
func (r *reporter) ready(mountpoint string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.orphaned {
		return errOrphaned
	}
	if r.pipe == nil {
		if !r.child {
			sdNotify("READY=1\nSTATUS=serving " + mountpoint)
		}
		return nil
	}
	_, err := r.pipe.WriteString(readyMsg)
	r.close()
	if err != nil {
		// EPIPE: the parent went between the watcher's last look and now.
		return fmt.Errorf("%w (%v)", errOrphaned, err)
	}
	return nil
}

// failed reports err, if nothing was reported yet.
func (r *reporter) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pipe != nil {
		r.pipe.WriteString(err.Error())
		r.close()
	}
}

// close ends the report. Call with mu held.
func (r *reporter) close() {
	r.pipe.Close()
	r.pipe = nil
	close(r.stop)
}

// sdNotify sends state to the service manager on the datagram socket named
// by NOTIFY_SOCKET (sd_notify(3)); without one it does nothing. Failures
// are ignored as sd_notify's callers do: systemd is not the only way to
// run volfs, and a mount that works must not fail for its sake.
func sdNotify(state string) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return
	}
	// Go maps a leading '@' to Linux's abstract namespace, as systemd
	// means it.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	conn.Write([]byte(state))
}

// daemonize runs this command again in the background and returns once the
// child reports: nil when the mount is live, otherwise the child's error.
// logFile is the --log-file value ("" for syslog).
func daemonize(logFile string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--daemon: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("--daemon: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        os.Args, // argv[0] too: mount.volfs stays mount.volfs
		ExtraFiles:  []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// The parent, not the child, is the unit's main process: it tells
	// systemd (see below), so the child must not.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, readyFDEnv+"=3")
	if logFile != "" {
		f, err := openLogFile(logFile)
		if err != nil {
			w.Close()
			return err
		}
		defer f.Close()
		cmd.Stderr = f
	} else if s, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_INFO, "volfs"); err != nil {
		fmt.Fprintf(os.Stderr, "volfs: warning: no syslog (%v): the background process's logs are lost; pass --log-file to keep them\n", err)
	} else {
		s.Close()
	}
	err = cmd.Start()
	w.Close() // the child holds the only write end: EOF means it is gone
	if err != nil {
		return fmt.Errorf("--daemon: %w", err)
	}
	msg, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("--daemon: reading the background process's report: %w", err)
	}
	switch {
	case string(msg) == readyMsg:
		sdNotify(fmt.Sprintf("MAINPID=%d\nREADY=1", cmd.Process.Pid))
		return cmd.Process.Release()
	case len(msg) > 0:
		cmd.Wait()
		return errors.New(string(msg))
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("the background volfs stopped before mounting (%w); its log (--log-file, or syslog) may say why", err)
	}
	return errors.New("the background volfs exited before mounting; its log (--log-file, or syslog) may say why")
}
