package keep

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
)

// Entry kinds, the first field of a kept entry's record.
const (
	keptObject      = "object"      // an object's bytes
	keptAbsent      = "absent"      // no such object (or directory)
	keptListing     = "listing"     // a directory's entries
	keptUnsupported = "unsupported" // the source cannot list
)

// storeKey names a kept entry in the Store: the source
// (fetcher.CacheName), two NULs (no
// chunk's key in a tier has them: keys are clean), what it is, and the
// object or directory key.
func (s *Source) storeKey(what, key string) string {
	return fetcher.CacheName(s.src) + "\x00\x00" + what + "\x00" + key
}

// Get is the origin's Get of a metadata object, kept in the Store and
// served from there while the origin is offline (see "Kept answers"), and
// shared with the fleet (see "Answers shared by the fleet").
func (s *Source) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	skey := s.storeKey("get", key)
	if s.opts.Store != nil && s.off.active() {
		if obj, err, ok := s.keptObject(skey, key, limit); ok {
			return obj, err
		}
	}
	obj, lease, err, ok := s.fleetObject(ctx, skey, key, limit)
	if ok {
		return obj, err
	}
	start := time.Now()
	obj, err = s.get(ctx, key, limit)
	s.shareObject(skey, lease, start, obj, err)
	if s.opts.Store == nil {
		return obj, err
	}
	switch {
	case err == nil && obj.ID.Known():
		s.keep(skey, EncodeFields([]Field{{keptObject, obj.ID}, {"encoding", fetcher.Identity(obj.ContentEncoding)}}), obj.Data)
	case errors.Is(err, fetcher.ErrNotExist):
		s.keep(skey, EncodeFields([]Field{{keptAbsent, ""}}), nil)
	case err != nil && s.isOffline(ctx, key, err):
		if kept, kerr, ok := s.keptObject(skey, key, limit); ok {
			return kept, kerr
		}
	}
	return obj, err
}

// get is the origin's Get, learning the identity it read.
func (s *Source) get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	s.stats.Requests.Add(1)
	obj, err := s.src.Get(ctx, key, limit)
	s.answered(ctx, key, err)
	switch {
	case err == nil:
		s.Learn(key, obj.ID)
	case errors.Is(err, fetcher.ErrNotExist):
		s.Learn(key, Absent)
	}
	return obj, err
}

// GetChunk is the origin's Get of a chunk object (or shard). Chunks are
// kept decoded by the chunk store's tiers, not here; but with keepAbsent
// (a warm) the answer that one does not exist is kept, so that while the
// origin is offline a chunk that warm found missing reads as missing, as
// it did, instead of failing. A kept absence answers only while the origin
// is offline (its error wraps ErrKept), and the first Get that finds the
// object deletes it; see "Kept answers".
func (s *Source) GetChunk(ctx context.Context, key string, limit int64, keepAbsent bool) (fetcher.Object, error) {
	if s.opts.Store == nil {
		return s.get(ctx, key, limit)
	}
	skey := s.storeKey("get", key)
	keptAbsence := func() (error, bool) {
		_, err, ok := s.keptObject(skey, key, limit)
		return err, ok && errors.Is(err, fetcher.ErrNotExist)
	}
	if s.off.active() {
		if err, ok := keptAbsence(); ok {
			return fetcher.Object{}, err
		}
	}
	obj, err := s.get(ctx, key, limit)
	switch {
	case err == nil:
		// The object is there: an absence kept of it is not the
		// origin's answer any more.
		s.forget(skey)
	case errors.Is(err, fetcher.ErrNotExist) && keepAbsent:
		s.keep(skey, EncodeFields([]Field{{keptAbsent, ""}}), nil)
	case err != nil && s.isOffline(ctx, key, err):
		if kerr, ok := keptAbsence(); ok {
			return fetcher.Object{}, kerr
		}
	}
	return obj, err
}

// forget deletes the kept entry skey, if any.
func (s *Source) forget(skey string) {
	s.opts.Store.GetUpTo(skey, s.opts.MaxKept, func([]byte) error { return errForgotten })
	s.kept.Delete(skey)
}

// errForgotten deletes a kept entry that the origin no longer confirms.
var errForgotten = fmt.Errorf("keep: kept answer no longer the origin's: %w", cache.ErrStale)

// keptObject returns the kept answer of a Get of key, whose entry is
// skey: the object, or an error wrapping ErrNotExist and ErrKept; ok is
// false when none is kept.
func (s *Source) keptObject(skey, key string, limit int64) (obj fetcher.Object, err error, ok bool) {
	var rec []Field
	data, ok := s.opts.Store.GetUpTo(skey, limit, func(ident []byte) error {
		var good bool
		if rec, good = DecodeFields(ident); !good || len(rec) == 0 {
			return fmt.Errorf("keep: unreadable kept entry: %w", errUnreadable)
		}
		return nil
	})
	if !ok {
		return fetcher.Object{}, nil, false
	}
	switch {
	case rec[0].Key == keptAbsent:
		s.stats.KeptServed.Add(1)
		return fetcher.Object{}, fmt.Errorf("keep: %s/%s: %w (%w)", s.src, key, fetcher.ErrNotExist, ErrKept), true
	case rec[0].Key == keptObject && len(rec) == 2:
		s.stats.KeptServed.Add(1)
		return fetcher.Object{Data: data, ContentEncoding: string(rec[1].ID), ID: rec[0].ID}, nil, true
	}
	return fetcher.Object{}, nil, false
}

// List is the origin's List, kept in the Store and served from there
// while the origin is offline (see "Kept answers"), and shared with the
// fleet (see "Answers shared by the fleet").
func (s *Source) List(ctx context.Context, key string) ([]fetcher.Entry, error) {
	entries, _, err := s.ListAt(ctx, key)
	return entries, err
}

// ListAt is List that also says when its answer was read from the origin:
// now, or when the node of the fleet whose answer it takes asked (or, for
// a kept answer while offline, now). A caller that keeps the listing for
// the TTL counts from then.
func (s *Source) ListAt(ctx context.Context, key string) ([]fetcher.Entry, time.Time, error) {
	skey := s.storeKey("list", key)
	if s.opts.Store != nil && s.off.active() {
		if entries, err, ok := s.keptListing(skey, key); ok {
			return entries, time.Now(), err
		}
	}
	entries, at, lease, err, ok := s.fleetListing(ctx, skey, key)
	if ok {
		return entries, at, err
	}
	start := time.Now()
	entries, err = s.list(ctx, key)
	s.shareListing(skey, lease, start, entries, err)
	if s.opts.Store == nil {
		return entries, start, err
	}
	switch {
	case err == nil:
		if b, ok := encodeEntries(entries, s.opts.MaxKept); ok {
			s.keep(skey, EncodeFields([]Field{{keptListing, ""}}), b)
		}
	case errors.Is(err, fetcher.ErrNotExist):
		s.keep(skey, EncodeFields([]Field{{keptAbsent, ""}}), nil)
	case errors.Is(err, fetcher.ErrNotSupported):
		s.keep(skey, EncodeFields([]Field{{keptUnsupported, ""}}), nil)
	case s.isOffline(ctx, key, err):
		if kept, kerr, ok := s.keptListing(skey, key); ok {
			return kept, time.Now(), kerr
		}
	}
	return entries, start, err
}

// list is the origin's List. It learns the identity of every object the
// listing names with one (fetcher.Entry.ID: S3 ETags, gs:// generations),
// so that the checks of those objects' copies within the TTL ask nothing
// more: one request stands for a directory's worth of Stats.
func (s *Source) list(ctx context.Context, key string) ([]fetcher.Entry, error) {
	s.stats.Requests.Add(1)
	entries, err := s.src.List(ctx, key)
	s.answered(ctx, key, err)
	s.learnListing(key, entries, time.Now())
	return entries, err
}

// learnListing learns, as of at, the identity of every object of the
// directory key that entries name with one.
func (s *Source) learnListing(key string, entries []fetcher.Entry, at time.Time) {
	for _, e := range entries {
		if !e.IsDir && e.ID.Known() {
			name := e.Name
			if key != "" {
				name = key + "/" + e.Name
			}
			s.learnAt(name, e.ID, at)
		}
	}
}

// keptListing returns the kept answer of a List of key, whose entry is
// skey; ok is false when none is kept.
func (s *Source) keptListing(skey, key string) (entries []fetcher.Entry, err error, ok bool) {
	var kind string
	data, ok := s.opts.Store.GetUpTo(skey, s.opts.MaxKept, func(ident []byte) error {
		rec, good := DecodeFields(ident)
		if !good || len(rec) == 0 {
			return fmt.Errorf("keep: unreadable listing entry: %w", errUnreadable)
		}
		kind = rec[0].Key
		return nil
	})
	if !ok {
		return nil, nil, false
	}
	switch kind {
	case keptAbsent:
		s.stats.KeptServed.Add(1)
		return nil, fmt.Errorf("keep: list %s/%s: %w (%w)", s.src, key, fetcher.ErrNotExist, ErrKept), true
	case keptUnsupported:
		s.stats.KeptServed.Add(1)
		return nil, fmt.Errorf("keep: list %s/%s: %w (%w)", s.src, key, fetcher.ErrNotSupported, ErrKept), true
	case keptListing:
		if entries, good := decodeEntries(data, false); good {
			s.stats.KeptServed.Add(1)
			return entries, nil, true
		}
	}
	return nil, nil, false
}

// errUnreadable marks a kept entry that cannot be read: the Store deletes
// it.
var errUnreadable = fmt.Errorf("keep: kept entry: %w", cache.ErrStale)

// keep writes the entry skey, unless the Store holds it already with the
// same record and bytes (a mount that reads unchanged metadata rewrites
// nothing). A failed write is counted by the Store.
func (s *Source) keep(skey string, ident, data []byte) {
	if int64(len(data)) > s.opts.MaxKept {
		return
	}
	s.kept.Store(skey, struct{}{})
	same := false
	old, ok := s.opts.Store.GetUpTo(skey, s.opts.MaxKept, func(id []byte) error {
		same = bytes.Equal(id, ident)
		return nil
	})
	if ok && same && bytes.Equal(old, data) {
		return
	}
	_ = s.opts.Store.Put(skey, ident, data)
}

// Touch marks every entry the Source has kept as just used, so that the
// chunks a warm wrote after them do not push them out of the Store first
// (the disk cache evicts the least recently used).
func (s *Source) Touch() {
	if s.opts.Store == nil {
		return
	}
	s.kept.Range(func(k, _ any) bool {
		s.opts.Store.GetUpTo(k.(string), s.opts.MaxKept, func([]byte) error { return nil })
		return true
	})
}

// Field is one key and value of an identity record: the records of the
// kept entries here, and those of the tiers' chunk entries (fs).
type Field struct {
	Key string
	ID  fetcher.Identity
}

// EncodeFields writes fields as a sequence of length-prefixed key and
// value pairs (uvarint lengths), the layout of every identity record.
func EncodeFields(fields []Field) []byte {
	var b []byte
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f.Key)))
		b = append(b, f.Key...)
		b = binary.AppendUvarint(b, uint64(len(f.ID)))
		b = append(b, f.ID...)
	}
	return b
}

// DecodeFields reads what EncodeFields wrote; false if b is not such a
// sequence (truncated, or a length past its end).
func DecodeFields(b []byte) ([]Field, bool) {
	var fields []Field
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	for len(b) > 0 {
		key, ok1 := next()
		id, ok2 := next()
		if !ok1 || !ok2 {
			return nil, false
		}
		fields = append(fields, Field{key, fetcher.Identity(id)})
	}
	return fields, true
}

// encodeEntries writes a listing as, per entry, the name's length
// (uvarint), the name, 1 for a directory or 0, and the size plus one
// (uvarint: 0 for unknown). It reports false past max bytes.
func encodeEntries(entries []fetcher.Entry, max int64) ([]byte, bool) {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.Name)))
		b = append(b, e.Name...)
		dir := byte(0)
		if e.IsDir {
			dir = 1
		}
		b = append(b, dir)
		b = binary.AppendUvarint(b, uint64(e.Size+1))
		if int64(len(b)) > max {
			return nil, false
		}
	}
	return b, true
}

// decodeEntries reads what encodeEntries wrote or, with ids, what
// encodeEntriesIDs wrote.
func decodeEntries(b []byte, ids bool) ([]fetcher.Entry, bool) {
	var entries []fetcher.Entry
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n >= uint64(len(b)-k) {
			return nil, false
		}
		name := string(b[k : k+int(n)])
		b = b[k+int(n):]
		dir := b[0] == 1
		size, k := binary.Uvarint(b[1:])
		if k <= 0 || size > 1<<62 {
			return nil, false
		}
		b = b[1+k:]
		var id fetcher.Identity
		if ids {
			n, k = binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return nil, false
			}
			id = fetcher.Identity(b[k : k+int(n)])
			b = b[k+int(n):]
		}
		entries = append(entries, fetcher.Entry{Name: name, IsDir: dir, Size: int64(size) - 1, ID: id})
	}
	return entries, true
}
