package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/volfs/volfs/fetcher"
)

// errorReport is the one mapping from errors to what the kernel is told
// (Tree.Errno), with the log line that every EIO and EACCES gets, at most
// one per path per errorRepeatWindow. Safe for concurrent use.
type errorReport struct {
	log    *slog.Logger
	repeat errorLog
}

// errno maps err; op and path name the request for the log line.
func (r *errorReport) errno(ctx context.Context, err error, op, path string) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, fetcher.ErrNotExist), errors.Is(err, fetcher.ErrInvalidKey):
		return syscall.ENOENT
	case errors.Is(err, fetcher.ErrOutsideSource):
		// A symbolic link the source does not follow: the fetcher has
		// said so once, with how to allow it; a scan of a linked scale
		// must not log a line per chunk.
		return syscall.EACCES
	case errors.Is(err, fetcher.ErrPermission):
		// The source refused: say so once, as for EIO, with the fetcher's
		// advice (which credentials were used and how to change that).
		r.repeat.log(r.logger(), fmt.Sprintf("%s %s: %v", op, path, err), path)
		return syscall.EACCES
	case errors.Is(err, errMetadataChanged):
		// Its line was logged once for the array (metaWatch), not
		// once per chunk.
		return syscall.ESTALE
	case errors.Is(err, fetcher.ErrChanged):
		// An object changed under a load twice in a row: the reader gets
		// neither version, and is told that what it reads is going
		// stale, as an NFS client is.
		r.repeat.log(r.logger(), fmt.Sprintf("%s %s: %v", op, path, err), path)
		return syscall.ESTALE
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return syscall.EINTR
	}
	r.repeat.log(r.logger(), fmt.Sprintf("%s %s: %v", op, path, err), path)
	return syscall.EIO
}

// logger is r's log, or slog.Default for a report made without one.
func (r *errorReport) logger() *slog.Logger {
	if r.log == nil {
		return slog.Default()
	}
	return r.log
}

// errorRepeatWindow is how long the failures of one path share one log
// line: the kernel retries a failed read-ahead as a plain read, and a
// program may retry at once, but one broken chunk is one line.
const errorRepeatWindow = 5 * time.Second

// errorLog writes error lines, at most one per path per errorRepeatWindow,
// counting the ones it holds back.
type errorLog struct {
	mu     sync.Mutex
	recent *simplelru.LRU[string, *logged] // GUARDED_BY(mu); bounded, so a storm of paths cannot grow it
}

type logged struct {
	at         time.Time
	suppressed int
}

func (l *errorLog) log(log *slog.Logger, msg, path string) {
	now := time.Now()
	l.mu.Lock()
	if l.recent == nil {
		l.recent, _ = simplelru.NewLRU[string, *logged](4096, nil)
	}
	prev, ok := l.recent.Get(path)
	if ok && now.Sub(prev.at) < errorRepeatWindow {
		prev.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if ok {
		suppressed = prev.suppressed
	}
	l.recent.Add(path, &logged{at: now})
	l.mu.Unlock()
	if suppressed > 0 {
		msg += fmt.Sprintf(" (failed %d more times since the last report)", suppressed)
	}
	log.Error(msg)
}
