package keep

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// Answers shared by the fleet
//
// With Options.Fleet (a shared tier signed with the fleet's secret), the
// origin's answers to a Get of a metadata object and to a List (the
// object, its absence; the listing, the directory's absence, "cannot
// list") are kept in the tier, each with the time its request to the
// origin began, and a node of the fleet takes one as the origin's answer
// when that verification is fresh by this Source's rule (see "Verified by
// the fleet": less than the TTL ago, or with a TTL of 0 made since the
// Source started), as it takes a chunk's value. A fleet's mounts so ask the
// origin for their metadata and listings about once in all, not once each.
// An identity learnt later by this Source than the answer's verification
// wins over it: the origin is asked. A miss takes the answer's lease (the
// tier's single flight), so that mounts starting together wait for the one
// that asks. Answers are shared only while the origin answers; while it is
// offline the disk's kept answers stand in, as without a fleet.

// Fleet keeps answers of the origin for a fleet: a shared tier with a
// secret (cache/shared.Tier).
type Fleet interface {
	// Answer returns the answer kept under key, at most limit bytes, and
	// its record; on a miss the caller may hold key's lease, under the
	// token lease ("" when it holds none), which PutAnswer or
	// ReleaseAnswer lets go.
	Answer(ctx context.Context, key string, limit int64) (val, rec []byte, lease string, ok bool)
	// PutAnswer keeps val under key with its record, and lets key's lease
	// go if lease is its holder's token.
	PutAnswer(key, lease string, rec, val []byte)
	// ReleaseAnswer lets key's lease go, if lease is its holder's token,
	// when no PutAnswer follows.
	ReleaseAnswer(key, lease string)
}

// verifiedField is the record field of an answer's verification time, in
// Unix nanoseconds, decimal.
const verifiedField = "verified"

// fleetAnswer returns the fleet's answer kept under skey when its
// verification is fresh: the record's fields without the time, the bytes,
// and the time. When not ok, lease is the token of the lease this caller
// took ("" when none), for shareObject or shareListing to let go.
func (s *Source) fleetAnswer(ctx context.Context, skey string) (rec []Field, data []byte, at time.Time, lease string, ok bool) {
	if s.opts.Fleet == nil || s.off.active() {
		return nil, nil, time.Time{}, "", false
	}
	data, raw, lease, ok := s.opts.Fleet.Answer(ctx, skey, s.opts.MaxKept)
	if !ok {
		return nil, nil, time.Time{}, lease, false
	}
	rec, good := DecodeFields(raw)
	if n := len(rec); !good || n < 2 || rec[n-1].Key != verifiedField {
		return nil, nil, time.Time{}, "", false
	}
	ns, err := strconv.ParseInt(string(rec[len(rec)-1].ID), 10, 64)
	at = time.Unix(0, ns)
	if err != nil || !s.fresh(at) {
		return nil, nil, time.Time{}, "", false
	}
	return rec[:len(rec)-1], data, at, "", true
}

// learntSince reports whether this Source learnt the identity of key
// after at: its own answer then wins over the fleet's.
func (s *Source) learntSince(key string, at time.Time) bool {
	l, ok := s.known.Peek(key)
	return ok && l.at.After(at)
}

// fleetObject returns the fleet's answer to a Get of key (entry skey):
// the object, or an error wrapping ErrNotExist; ok is false when the
// origin is to be asked, and lease the token of the lease taken for it.
func (s *Source) fleetObject(ctx context.Context, skey, key string, limit int64) (obj fetcher.Object, lease string, err error, ok bool) {
	rec, data, at, lease, ok := s.fleetAnswer(ctx, skey)
	if !ok || s.learntSince(key, at) {
		return fetcher.Object{}, lease, nil, false
	}
	switch {
	case rec[0].Key == keptAbsent:
		s.learnAt(key, Absent, at)
		s.stats.FleetAnswers.Add(1)
		return fetcher.Object{}, "", fmt.Errorf("keep: %s/%s: %w (as the fleet read it)", s.src, key, fetcher.ErrNotExist), true
	case rec[0].Key == keptObject && len(rec) == 2 && rec[0].ID.Known() && int64(len(data)) <= limit:
		s.learnAt(key, rec[0].ID, at)
		s.stats.FleetAnswers.Add(1)
		return fetcher.Object{Data: slices.Clone(data), ContentEncoding: string(rec[1].ID), ID: rec[0].ID}, "", nil, true
	}
	return fetcher.Object{}, "", nil, false
}

// shareObject keeps the origin's answer to a Get in the fleet (entry
// skey), verified at start, or lets its lease go if this caller holds it
// under lease.
func (s *Source) shareObject(skey, lease string, start time.Time, obj fetcher.Object, err error) {
	switch {
	case s.opts.Fleet == nil:
	case err == nil && obj.ID.Known() && int64(len(obj.Data)) <= s.opts.MaxKept:
		s.opts.Fleet.PutAnswer(skey, lease, verifiedRecord(start, Field{keptObject, obj.ID}, Field{"encoding", fetcher.Identity(obj.ContentEncoding)}), obj.Data)
	case errors.Is(err, fetcher.ErrNotExist) && !errors.Is(err, ErrKept):
		s.opts.Fleet.PutAnswer(skey, lease, verifiedRecord(start, Field{keptAbsent, ""}), nil)
	default:
		s.opts.Fleet.ReleaseAnswer(skey, lease)
	}
}

// fleetListing returns the fleet's answer to a List of key (entry skey)
// and when it was read from the origin; ok is false when the origin is
// to be asked, and lease the token of the lease taken for it.
func (s *Source) fleetListing(ctx context.Context, skey, key string) (entries []fetcher.Entry, at time.Time, lease string, err error, ok bool) {
	rec, data, at, lease, ok := s.fleetAnswer(ctx, skey)
	if !ok {
		return nil, time.Time{}, lease, nil, false
	}
	switch rec[0].Key {
	case keptAbsent:
		s.stats.FleetAnswers.Add(1)
		return nil, at, "", fmt.Errorf("keep: list %s/%s: %w (as the fleet read it)", s.src, key, fetcher.ErrNotExist), true
	case keptUnsupported:
		s.stats.FleetAnswers.Add(1)
		return nil, at, "", fmt.Errorf("keep: list %s/%s: %w (as the fleet read it)", s.src, key, fetcher.ErrNotSupported), true
	case keptListing:
		entries, good := decodeEntries(data, true)
		if !good || s.listingOutdated(key, entries, at) {
			return nil, time.Time{}, "", nil, false
		}
		s.stats.FleetAnswers.Add(1)
		s.learnListing(key, entries, at)
		return entries, at, "", nil, true
	}
	return nil, time.Time{}, "", nil, false
}

// listingOutdated reports whether entries, the listing of key read from
// the origin at at, names a file by another identity than the one this
// Source learnt of it after at: the listing is older than what this
// Source knows, and files built from it would fail their reads, so the
// origin is asked instead (as fleetObject's learntSince check does for
// one object).
func (s *Source) listingOutdated(key string, entries []fetcher.Entry, at time.Time) bool {
	for _, e := range entries {
		if e.IsDir || !e.ID.Known() {
			continue
		}
		name := e.Name
		if key != "" {
			name = key + "/" + e.Name
		}
		if l, ok := s.known.Peek(name); ok && l.at.After(at) && l.id != e.ID {
			return true
		}
	}
	return false
}

// shareListing keeps the origin's answer to a List in the fleet (entry
// skey), verified at start, or lets its lease go if this caller holds it
// under lease.
func (s *Source) shareListing(skey, lease string, start time.Time, entries []fetcher.Entry, err error) {
	if s.opts.Fleet == nil {
		return
	}
	switch {
	case err == nil:
		if b, ok := encodeEntriesIDs(entries, s.opts.MaxKept); ok {
			s.opts.Fleet.PutAnswer(skey, lease, verifiedRecord(start, Field{keptListing, ""}), b)
			return
		}
	case errors.Is(err, fetcher.ErrNotExist):
		s.opts.Fleet.PutAnswer(skey, lease, verifiedRecord(start, Field{keptAbsent, ""}), nil)
		return
	case errors.Is(err, fetcher.ErrNotSupported):
		s.opts.Fleet.PutAnswer(skey, lease, verifiedRecord(start, Field{keptUnsupported, ""}), nil)
		return
	}
	s.opts.Fleet.ReleaseAnswer(skey, lease)
}

// verifiedRecord is the record of an answer of fields read from the
// origin at at.
func verifiedRecord(at time.Time, fields ...Field) []byte {
	return EncodeFields(append(fields, Field{verifiedField, fetcher.Identity(strconv.FormatInt(at.UnixNano(), 10))}))
}

// encodeEntriesIDs is encodeEntries with each object's identity after
// its size (uvarint length, bytes), so that a node taking the fleet's
// listing learns what the listing named.
func encodeEntriesIDs(entries []fetcher.Entry, max int64) ([]byte, bool) {
	var b []byte
	for _, e := range entries {
		one, ok := encodeEntries([]fetcher.Entry{e}, max)
		if !ok {
			return nil, false
		}
		b = append(b, one...)
		b = binary.AppendUvarint(b, uint64(len(e.ID)))
		b = append(b, e.ID...)
		if int64(len(b)) > max {
			return nil, false
		}
	}
	return b, true
}
