package main

import (
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
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
// unit through NOTIFY_SOCKET. It is used from one goroutine.
type reporter struct {
	child bool     // this process is a --daemon child
	pipe  *os.File // the parent's pipe in a child; nil once reported
}

// newReporter takes the descriptor named by readyFDEnv, if any, and hides
// both from the programs volfs runs (fusermount3).
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
	}
	return r
}

// ready reports that the mount at mountpoint is live.
func (r *reporter) ready(mountpoint string) {
	if r.pipe != nil {
		r.pipe.WriteString(readyMsg)
		r.pipe.Close()
		r.pipe = nil
		return
	}
	sdNotify("READY=1\nSTATUS=serving " + mountpoint)
}

// failed reports err, if nothing was reported yet.
func (r *reporter) failed(err error) {
	if r.pipe != nil {
		r.pipe.WriteString(err.Error())
		r.pipe.Close()
		r.pipe = nil
	}
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
