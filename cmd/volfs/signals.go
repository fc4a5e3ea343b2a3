package main

import (
	"os"
	"os/signal"
	"syscall"
)

// catchSignals is how a front end (mount, serve) goes live, so that the two
// cannot differ in what a signal does to them. From its return on, a
// signal must stop the front end cleanly (unmount, shut down), never kill
// it: SIGINT, SIGTERM and SIGHUP arrive on sig, and one that comes while
// the front end is still being set up waits there for its loop. SIGHUP (a
// closed terminal or ssh session) is for the caller to ignore, as
// rclone's mount does. SIGPIPE is caught so that a write to a log on a
// pipe whose reader is gone fails with EPIPE, which slog drops, instead of
// killing the process with the mount still up.
//
// It then tells r that the front end starts; in a --daemon child whose
// parent is gone it stops catching and returns errOrphaned. Otherwise the
// caller calls stop once its loop is done.
func (r *reporter) catchSignals() (sig <-chan os.Signal, stop func(), err error) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stop = func() { signal.Stop(ch) }
	if !r.startMount() {
		stop()
		return nil, nil, errOrphaned
	}
	return ch, stop, nil
}
