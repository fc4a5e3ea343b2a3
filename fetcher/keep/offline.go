package keep

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// The evidence that takes an origin offline; see "Offline".
const (
	// offlineKeys distinct keys failing transiently, with no answer of
	// the origin between them, within offlineWindow take it offline.
	offlineKeys   = 3
	offlineWindow = 30 * time.Second
	// offlineFor is how long, once offline, checks are served unchecked
	// without asking the origin (each check would cost the fetcher's
	// retries and back-off); after it, the next request asks again.
	offlineFor = 30 * time.Second
	// probeFresh is how long a probe of a directory that the origin
	// answered stands: the transient failures of its keys meanwhile are
	// theirs, not the origin's.
	probeFresh = 2 * time.Second
)

// offline is the state of the origin: up, or offline since a failure.
// Safe for concurrent use.
type offline struct {
	mu      sync.Mutex
	on      bool                 // GUARDED_BY(mu); the origin is taken as offline
	until   time.Time            // GUARDED_BY(mu); while on, checks are not asked before it
	failing map[string]time.Time // GUARDED_BY(mu); keys failed since the last answer, and when
	probed  map[string]time.Time // GUARDED_BY(mu); directories a probe found answering, and when
	probe   sync.Mutex           // one probe of the root at a time
}

// active reports whether the origin is offline and not yet due to be
// asked again.
func (o *offline) active() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.on && time.Now().Before(o.until)
}

// answers reports whether err is an answer of the origin: no error, or
// one that the origin decided (a 404, a 403, a listing it cannot give).
func answers(err error) bool {
	return err == nil || errors.Is(err, fetcher.ErrNotExist) || errors.Is(err, fetcher.ErrPermission) ||
		errors.Is(err, fetcher.ErrNotSupported) || errors.Is(err, fetcher.ErrTooLarge)
}

// answered takes the outcome err of a request for key to the origin as
// evidence of its state: an answer ends an offline spell; a transient
// failure adds key to the failing keys, and enough of them start one.
func (s *Source) answered(ctx context.Context, key string, err error) {
	o := &s.off
	switch {
	case answers(err):
		o.mu.Lock()
		clear(o.failing)
		was := o.on
		o.on = false
		o.mu.Unlock()
		if was {
			s.log.Info("the origin answers again: kept answers are checked again", "source", s.src.String())
		}
	case ctx.Err() == nil && errors.Is(err, fetcher.ErrTransient):
		now := time.Now()
		o.mu.Lock()
		if o.on {
			o.until = now.Add(offlineFor)
			o.mu.Unlock()
			return
		}
		if o.failing == nil {
			o.failing = make(map[string]time.Time)
		}
		o.failing[key] = now
		for k, at := range o.failing {
			if now.Sub(at) > offlineWindow {
				delete(o.failing, k)
			}
		}
		enough := len(o.failing) >= offlineKeys
		o.mu.Unlock()
		if enough {
			s.goOffline(err)
		}
	}
}

// goOffline starts a spell (or extends it), logging its start.
func (s *Source) goOffline(err error) {
	o := &s.off
	o.mu.Lock()
	starting := !o.on
	o.on = true
	o.until = time.Now().Add(offlineFor)
	clear(o.failing)
	o.mu.Unlock()
	if starting {
		s.stats.OfflineSpells.Add(1)
		s.log.Warn("the origin cannot be reached: serving what the disk cache holds of it (chunks, metadata, listings) unchecked", "source", s.src.String(), "for", offlineFor, "err", err)
	}
}

// isOffline reports whether err, the transient failure of a request for
// key whose kept answer could stand in, finds the origin offline: it is
// offline already, or a probe fails transiently too. The probe lists the
// directory that holds key (the root for a key at the top; a failed List
// of the root is its own probe), so that the failure of one key, or of one
// key's requests, tells apart from the origin's: a burst of 503s for an
// object is that object's, while a part of the origin gone away (its
// chunks' prefix) takes the listing of it with it. A probe that the origin
// answered stands for probeFresh for its directory.
func (s *Source) isOffline(ctx context.Context, key string, err error) bool {
	if ctx.Err() != nil || !errors.Is(err, fetcher.ErrTransient) {
		return false
	}
	o := &s.off
	o.probe.Lock()
	defer o.probe.Unlock()
	dir := path.Dir(key)
	if dir == "." {
		dir = ""
	}
	o.mu.Lock()
	on := o.on
	fresh := time.Since(o.probed[dir]) < probeFresh
	o.mu.Unlock()
	switch {
	case on:
		return true
	case fresh:
		return false
	case key == "":
		s.goOffline(err)
		return true
	}
	s.stats.Requests.Add(1)
	// Not taken as an answer that clears the failing keys: they are
	// evidence across keys whatever their directory says.
	_, perr := s.src.List(context.WithoutCancel(ctx), dir)
	if !errors.Is(perr, fetcher.ErrTransient) {
		o.mu.Lock()
		if o.probed == nil {
			o.probed = make(map[string]time.Time)
		}
		if len(o.probed) > 1024 {
			clear(o.probed)
		}
		o.probed[dir] = time.Now()
		o.mu.Unlock()
		return false
	}
	s.goOffline(err)
	return true
}
