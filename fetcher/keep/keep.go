// Package keep is the keeping source: a decorator of a fetcher.Fetcher
// that owns everything volfs keeps of its origin between one request and
// the next, and decides when a kept answer may stand in for the origin's.
//
// What it keeps:
//
//   - Identities: the version (fetcher.Identity) of each object a request
//     saw, with when it was learnt, so that a copy made from an object (a
//     decoded chunk in a tier) can be checked against the object as the
//     origin holds it (Check) without asking the origin more than once per
//     metadata TTL.
//   - Metadata on disk (Options.Store): each metadata object fetched by Get,
//     with its identity and transport encoding, the answer that one does
//     not exist, and each listing (or the answer that the source cannot
//     list). See "Kept answers".
//   - Absences: the answer that a chunk object does not exist, kept on disk
//     by a warm (GetChunk with keepAbsent), for reads while the origin is
//     away.
//   - The offline state of the origin (see "Offline").
//
// The package knows no FUSE, no tree and no tier: it reads and writes its
// disk entries through Store, which the disk cache satisfies.
//
// # Kept answers
//
// While the origin answers, kept answers are never read: metadata and
// listings come from the origin (or, with Options.Fleet, from a node of
// the fleet that read them from the origin within the TTL: see "Answers
// shared by the fleet" in fleet.go), and what it says is written over the
// copy, so a metadata object that changed is served as it is now. A kept
// answer stands in for the origin's only while the origin is offline.
// Nothing that has no copy is made up: a request with no kept answer fails
// as the origin made it fail.
//
// A kept absence is an answer like the others: it never answers for a
// single request's transient failure of an origin that is otherwise up,
// and the first request that finds the object deletes it. An error that a
// kept answer produced wraps ErrKept, so that a caller does not keep it as
// a stable answer of the origin.
//
// # Offline
//
// Offline is a state of the origin, not of one request. A request whose
// failure is transient (fetcher.ErrTransient, once the fetcher's retries
// ran out) is evidence: the origin is taken as offline when offlineKeys
// distinct keys failed so within offlineWindow with no answer between
// them, or when a probe fails too: where a kept answer could stand in, the
// failure of key is followed by a List of the directory that holds it (a
// failed List of the root is its own probe). A probe the origin answers
// means the failure is the key's alone: the request fails as the origin
// made it fail, and no kept answer stands in. The origin leaves the state
// at the first request it answers (any answer but a transient failure: a
// 404 is an answer). While offline, Check accepts every identity unchecked
// (the copies were right when made) that someone vouches for (CheckCopy: a
// copy of this machine's own, or signed by the fleet) and kept answers are
// served; the origin is asked again after offlineFor. Each spell is logged
// once.
//
// # Verified by the fleet
//
// A copy written by a node that holds the fleet's secret carries when its
// identities were verified at the origin (Copy.Verified). CheckCopy takes
// that verification as its own when it is fresh by this Source's rule: less
// than the TTL ago, or with a TTL of 0 (the origin read as unchanging for
// the Source's life) made since the Source started; a time more than
// maxSkew ahead of this node's clock is not taken. An identity this Source
// learnt later than the verification wins over it. The verification is
// learnt as of its time, so that the next check of the object within the
// TTL asks nobody either.
package keep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/volfs/volfs/fetcher"
)

// Store keeps byte values under keys on disk, each with an identity record.
// The disk cache (cache/disk.Cache) satisfies it.
type Store interface {
	// GetUpTo returns the value kept under key if it has at most limit
	// bytes and check accepts its record (nil); an entry for which check
	// returns an error wrapping cache.ErrStale is deleted.
	GetUpTo(key string, limit int64, check func(ident []byte) error) ([]byte, bool)
	// Put keeps data under key with the record ident.
	Put(key string, ident, data []byte) error
}

// Options configures a Source.
type Options struct {
	// Store, when not nil, keeps metadata, listings and absences across
	// mounts; see "Kept answers".
	Store Store
	// TTL, when positive, is how long an identity learnt is trusted
	// before Check asks the origin again; zero trusts it for the life of
	// the Source.
	TTL time.Duration
	// MaxKept bounds a kept metadata object or listing, in bytes.
	MaxKept int64
	// Fleet, when not nil, shares the origin's answers to metadata Gets
	// and Lists with a fleet; see "Answers shared by the fleet". Only a
	// tier whose values are signed with the fleet's secret may be given.
	Fleet Fleet
	Log   *slog.Logger // nil means slog.Default()
}

// ErrKept marks an error that a kept answer produced, while the origin is
// offline, instead of the origin: a caller must not keep it as the
// origin's stable answer.
var ErrKept = errors.New("keep: as kept on disk; the origin cannot be reached")

// ErrChanged is what Check returns (wrapped) for an identity that is no
// longer the object's.
var ErrChanged = errors.New("keep: object changed at the origin")

// Absent is the identity of a key with no object.
const Absent fetcher.Identity = "absent"

// identityEntries bounds the identities a Source remembers. Forgetting
// one costs a Stat at the next check of its object, never a wrong answer.
// About 150 bytes each: 2.4 MiB.
const identityEntries = 1 << 14

// Source is the keeping source of one origin. It satisfies fetcher.Fetcher
// (Get is the Get of a metadata object: kept whole) and is safe for
// concurrent use.
type Source struct {
	src  fetcher.Fetcher
	opts Options
	log  *slog.Logger

	start time.Time                  // when the Source was made
	known *lru.Cache[string, learnt] // object key -> its identity, and when learnt
	// changes counts the identities learnt that replaced another one
	// of their key (Changes).
	changes atomic.Uint64
	flight  singleflight.Group // Stats in flight, by key
	off     offline

	// kept holds the Store keys of the entries written or read by this
	// Source (string to struct{}), for Touch.
	kept sync.Map
	// stats counts requests to the origin.
	stats Stats
}

var _ fetcher.Fetcher = (*Source)(nil)

type learnt struct {
	id fetcher.Identity
	at time.Time
}

// Stats counts what a Source asked the origin and what it answered itself.
type Stats struct {
	// Requests counts requests sent to the origin, of every kind.
	Requests atomic.Int64
	// Checks counts the identity checks (Check) of kept copies;
	// CheckRequests those of them that asked the origin (a Stat).
	Checks, CheckRequests atomic.Int64
	// Vouched counts the checks that a fleet's verification answered
	// (CheckCopy with a fresh Copy.Verified), without the origin.
	Vouched atomic.Int64
	// FleetAnswers counts metadata Gets and Lists that a fleet's answer
	// (Options.Fleet) answered, without the origin.
	FleetAnswers atomic.Int64
	// KeptServed counts answers served from disk while offline.
	KeptServed atomic.Int64
	// OfflineSpells counts the times the origin was taken as offline.
	OfflineSpells atomic.Int64
}

// New returns the keeping source of src.
func New(src fetcher.Fetcher, opts Options) *Source {
	s := &Source{src: src, opts: opts, log: opts.Log, start: time.Now()}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.opts.MaxKept <= 0 {
		s.opts.MaxKept = 64 << 20
	}
	s.known, _ = lru.New[string, learnt](identityEntries)
	return s
}

// Stats returns the Source's counters.
func (s *Source) Stats() *Stats { return &s.stats }

// String names the origin.
func (s *Source) String() string { return s.src.String() }

// CacheName returns the origin's (fetcher.CacheName).
func (s *Source) CacheName() string { return fetcher.CacheName(s.src) }

// Origin returns the fetcher the Source wraps.
func (s *Source) Origin() fetcher.Fetcher { return s.src }

// Offline reports whether the origin is taken as offline now.
func (s *Source) Offline() bool { return s.off.active() }

// Learn records that the object at key is, as of now, the version id.
func (s *Source) Learn(key string, id fetcher.Identity) {
	if id.Known() {
		s.note(key, learnt{id, time.Now()})
	}
}

// learnAt records that the object at key was the version id at time at,
// unless an identity learnt later is known.
func (s *Source) learnAt(key string, id fetcher.Identity, at time.Time) {
	if l, ok := s.known.Peek(key); ok && !l.at.Before(at) {
		return
	}
	if id.Known() {
		s.note(key, learnt{id, at})
	}
}

// note keeps l as what is known of key, counting a change when it
// replaces another identity.
func (s *Source) note(key string, l learnt) {
	if old, ok := s.known.Peek(key); ok && old.id != l.id {
		s.changes.Add(1)
	}
	s.known.Add(key, l)
}

// Changes returns how many times this Source learnt an identity of an
// object other than the one it knew (a rewrite, a deletion, an object
// where there was none): a front end whose answers stand for versions it
// cannot name (a stitched view's ETag) changes them when it moves. A
// change is missed only when the identity known before was forgotten (the
// 16 Ki kept are the most recently used).
func (s *Source) Changes() uint64 { return s.changes.Load() }

// GetRange is the origin's GetRange; it learns the identity it read.
func (s *Source) GetRange(ctx context.Context, key string, off, n int64) ([]byte, fetcher.Identity, error) {
	s.stats.Requests.Add(1)
	b, id, err := s.src.GetRange(ctx, key, off, n)
	s.answered(ctx, key, err)
	if err == nil {
		s.Learn(key, id)
	}
	return b, id, err
}

// Stat is the origin's Stat; it learns the identity it read.
func (s *Source) Stat(ctx context.Context, key string) (int64, fetcher.Identity, error) {
	s.stats.Requests.Add(1)
	n, id, err := s.src.Stat(ctx, key)
	s.answered(ctx, key, err)
	switch {
	case err == nil:
		s.Learn(key, id)
	case errors.Is(err, fetcher.ErrNotExist):
		s.Learn(key, Absent)
	}
	return n, id, err
}

// Known returns the identity of the object at key that Current would
// return without asking the origin: one learnt within the TTL (or ever,
// with 0); false when Current would ask.
func (s *Source) Known(key string) (fetcher.Identity, bool) {
	l, ok := s.known.Get(key)
	if !ok || s.opts.TTL > 0 && time.Since(l.at) >= s.opts.TTL {
		return "", false
	}
	return l.id, true
}

// Current returns the identity of the object at key as the origin holds
// it: learnt within the TTL (or ever, with 0), or else from a Stat shared
// by every caller that asks meanwhile. A key with no object is Absent.
func (s *Source) Current(ctx context.Context, key string) (fetcher.Identity, error) {
	if id, ok := s.Known(key); ok {
		return id, nil
	}
	ch := s.flight.DoChan(key, func() (any, error) {
		s.stats.CheckRequests.Add(1)
		// Not cancelled with the caller that started it: others may wait,
		// and the fetcher's deadlines bound it.
		_, id, err := s.Stat(context.WithoutCancel(ctx), key)
		if errors.Is(err, fetcher.ErrNotExist) {
			id, err = Absent, nil
		}
		return id, err
	})
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case r := <-ch:
		return r.Val.(fetcher.Identity), r.Err
	}
}

// maxSkew is how far ahead of this node's clock a fleet's verification
// time may be (the clocks of two nodes differ) and still be taken.
const maxSkew = 5 * time.Second

// Copy says who vouches for a kept copy of an object, for CheckCopy.
type Copy struct {
	// Verified, when not zero, is when a keeper this Source trusts (a
	// node holding the fleet's secret) read the copy's identity from the
	// origin.
	Verified time.Time
	// Unvouched says nobody vouches for the copy (a shared value without
	// a signature, which any client of the engine could have written): it
	// is checked at the origin, and never accepted while the origin is
	// offline.
	Unvouched bool
}

// ErrUnvouched is what CheckCopy returns (wrapped) for a copy nobody
// vouches for while the origin cannot be asked: not served, not deleted.
var ErrUnvouched = errors.New("keep: a copy nobody vouches for is not served while the origin cannot be reached")

// Check is CheckCopy of a copy of this machine's own.
func (s *Source) Check(ctx context.Context, key string, id fetcher.Identity) error {
	return s.CheckCopy(ctx, key, id, Copy{})
}

// fresh reports whether a verification at time at may stand in for a
// check now; see "Verified by the fleet".
func (s *Source) fresh(at time.Time) bool {
	now := time.Now()
	switch {
	case at.IsZero() || at.After(now.Add(maxSkew)):
		return false
	case s.opts.TTL <= 0:
		return !at.Before(s.start)
	}
	return now.Sub(at) < s.opts.TTL
}

// CheckCopy reports whether a copy made from the version id of the object
// at key may be served: nil when id is the object's current identity
// (Current), or was verified at the origin recently enough by a keeper
// this Source trusts (c.Verified; see "Verified by the fleet"), or when the
// origin is offline and someone vouches for the copy (the copy is served
// unchecked, and a failure of the check that takes the origin offline
// accepts it too); an error wrapping ErrChanged when the object is now
// another version (or unidentified); an error wrapping ErrUnvouched for a
// copy nobody vouches for while the origin is offline; another error when
// the origin could not tell.
func (s *Source) CheckCopy(ctx context.Context, key string, id fetcher.Identity, c Copy) error {
	s.stats.Checks.Add(1)
	if s.off.active() {
		if c.Unvouched {
			return fmt.Errorf("keep: %s: %w", key, ErrUnvouched)
		}
		return nil
	}
	if !c.Unvouched && s.fresh(c.Verified) {
		if l, ok := s.known.Peek(key); !ok || l.at.Before(c.Verified) {
			s.stats.Vouched.Add(1)
			s.learnAt(key, id, c.Verified)
			return nil
		}
	}
	cur, err := s.Current(ctx, key)
	if err != nil {
		if ctx.Err() == nil && s.isOffline(ctx, key, err) {
			if c.Unvouched {
				return fmt.Errorf("keep: %s: %w (%w)", key, ErrUnvouched, err)
			}
			return nil
		}
		return err
	}
	if cur != id || !cur.Known() {
		s.log.Debug("kept copy made from another version of its object", "object", key, "now", cur, "copy", id)
		return fmt.Errorf("keep: %s is now %q, the copy was made from %q: %w", key, cur, id, ErrChanged)
	}
	return nil
}
