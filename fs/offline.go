package fs

import (
	"errors"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// An origin that cannot be reached
//
// A disk-cache entry is served once its objects' identities check out
// (identities.check). When the origin cannot answer that check at all (a
// transient failure once the fetcher's retries ran out: refused or reset
// connections, 5xx, timeouts), the entry is served unchecked instead of
// the read failing: the bytes were right when they were cached, which is
// what `volfs warm` stages them for (a job that runs while the origin is
// away). The tree then takes the origin as unreachable for
// offlineFor, serving every entry unchecked without asking again (each
// check would cost the fetcher's retries and back-off), and logs that
// once per spell. An entry the origin says has changed is never served.
// The metadata and listings the tree keeps on disk follow the same rule
// (see "Metadata on disk").
const offlineFor = 30 * time.Second

// offline is when the origin last failed an identity check. Safe for
// concurrent use.
type offline struct {
	mu    sync.Mutex
	until time.Time // GUARDED_BY(mu); unchecked entries are served before it
}

// active reports whether the origin is taken as unreachable now.
func (o *offline) active() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return time.Now().Before(o.until)
}

// failed reports whether err, the failure of an identity check, means the
// origin is unreachable; if so it starts (or extends) the spell, logging
// its start.
func (ids *identities) failed(err error) bool {
	if !errors.Is(err, fetcher.ErrTransient) {
		return false
	}
	o := &ids.offline
	o.mu.Lock()
	starting := !time.Now().Before(o.until)
	o.until = time.Now().Add(offlineFor)
	o.mu.Unlock()
	if starting {
		ids.t.log.Warn("the origin cannot be reached: serving what the disk cache holds of it (chunks, metadata, listings) unchecked", "source", ids.t.src.String(), "for", offlineFor, "err", err)
	}
	return true
}
