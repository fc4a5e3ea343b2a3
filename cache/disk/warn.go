package disk

import (
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"
)

// What a Cache logs
//
// A file refused as corrupt (damaged, cut short, forged, moved from
// another key's name, of the wrong type) and a write that failed (a full
// disk, a directory made unwritable) each cost a read from the source,
// never a wrong byte, and are counted (Stats.Corrupt, Stats.Errors); each
// kind is also logged as a warning naming the file and the cause, the
// first at once and then at most once a minute (warnEvery) with the count
// since Open, so that a cache that keeps nothing, or whose directory is
// tampered with, says so without flooding the log.

// warnEvery bounds the warnings of one kind to one a minute.
const warnEvery = time.Minute

// warnings are the times of the last warning of each kind.
type warnings struct {
	corrupt, write atomic.Int64 // UnixNano; 0: none yet
}

// due reports whether a warning whose last one was at *last may be
// logged now, and notes it as logged.
func due(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	prev := last.Load()
	return (prev == 0 || now-prev >= int64(warnEvery)) && last.CompareAndSwap(prev, now)
}

// refused logs that the file name was refused as corrupt for err.
func (c *Cache) refused(name string, err error) {
	if !due(&c.warned.corrupt) {
		return
	}
	c.log.Warn("disk cache: a file refused as damaged or not written by this cache, and deleted; the chunk is read from the source",
		"file", filepath.Join(c.dir, name), "refused", c.Stats().Corrupt, "err", err)
}

// writeFailed logs that an entry could not be written for err.
func (c *Cache) writeFailed(err error) {
	if !due(&c.warned.write) {
		return
	}
	c.log.Warn("disk cache: an entry could not be written (the chunk is served, not kept); more such failures are logged at most once a minute",
		"dir", c.dir, "failed", c.Stats().Errors, "err", err)
}

// logger returns log, or slog.Default() when it is nil.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}
