package fs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// How the disk cache stays consistent with the source
//
// A chunk kept on disk records the identity (fetcher.Identity) of every
// source object its load read: the chunk object, or the shard whose index
// and bytes it came from, and the plain key that was absent when the chunk
// was read from its ".gz" sibling. Before a disk entry is served, each of
// those identities is compared with the object's current identity, as the
// keeping source knows it (keep.Source.Current): what a fetch or a Stat of
// this mount learnt less than Options.MetadataTTL ago (at any time with a
// TTL of 0: once per object per mount), else from one Stat of the object
// (a HEAD, a GCS metadata request, a stat). An entry that differs is
// deleted and the chunk fetched again. A load that read an object of
// unknown identity (an HTTP server without ETag or Last-Modified) is not
// kept on disk. A load never completes with two identities of one object:
// treeSource pins each object to the first version it saw and Tree.load
// loads again, or fails with ESTALE, when it meets another
// (docs/CONSISTENCY.md); record still refuses such a load, as a second
// line of defence.
//
// The record names the objects, not the metadata that decoded them: that
// is the recipe fingerprint in the entry's key (Tree.tierKey).
//
// Verified at
//
// A load that asked the origin about every object it read (no memoised
// index stood in for one) also records when it began: the time its
// identities were verified at the origin (a pair of key verifiedKey and
// the time in Unix nanoseconds, decimal). The check of an entry from a
// tier whose values are signed with the fleet's secret (cache.TrustSigned)
// passes that time on (keep.Copy.Verified), so that a fleet's node reading
// a value another node just loaded asks the origin nothing within its
// metadata TTL. From any other tier the time is ignored; an entry from a
// tier without a signature (cache.TrustRecord) is checked at the origin,
// and never served while the origin is offline (keep.ErrUnvouched).

// verifiedKey is the key of the record's verification time: no object's
// key begins with a NUL.
const verifiedKey = "\x00verified"

// absent is the identity recorded for a key with no object.
const absent = keep.Absent

// seen is one object a load read (Key), with the identity of the version
// read (ID); a list of them is written as an identity record by
// keep.EncodeFields.
type seen = keep.Field

// identities checks and makes the identity records of the tiers' entries;
// what the tree knows of its objects' identities, and whether the origin
// can be asked, is the keeping source's (Tree.origin). It is safe for
// concurrent use.
type identities struct {
	t      *Tree
	warned atomic.Bool // the unknown identity has been logged
}

func (ids *identities) init(t *Tree) { ids.t = t }

// learn records that the object at key is, as of now, the version id.
func (ids *identities) learn(key string, id fetcher.Identity) { ids.t.origin.Learn(key, id) }

// check is the tiers' check of an entry whose identity record is rec
// (keep.EncodeFields): nil when every object it was made from is still the
// version it read (keep.Source.Check: while the origin is offline, every
// entry), an error wrapping cache.ErrStale when one is not, and another
// error when the origin could not tell (the entry is then kept).
//
// trust is that of the tier holding the entry: see "Verified at".
func (ids *identities) check(ctx context.Context, rec []byte, trust cache.Trust) error {
	objs, ok := keep.DecodeFields(rec)
	var c keep.Copy
	if n := len(objs); ok && n > 0 && objs[n-1].Key == verifiedKey {
		ns, err := strconv.ParseInt(string(objs[n-1].ID), 10, 64)
		if err != nil {
			ok = false
		}
		if trust == cache.TrustSigned {
			c.Verified = time.Unix(0, ns)
		}
		objs = objs[:n-1]
	}
	if !ok || len(objs) == 0 {
		return fmt.Errorf("fs: unreadable identity record: %w", cache.ErrStale)
	}
	c.Unvouched = trust == cache.TrustRecord
	for _, o := range objs {
		err := ids.t.origin.CheckCopy(ctx, o.Key, o.ID, c)
		if errors.Is(err, keep.ErrChanged) {
			return fmt.Errorf("fs: tier entry: %w: %w", err, cache.ErrStale)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// record returns the identity record of the objects a load read, sorted
// and each once, with the time they were verified at the origin unless it
// is zero (see "Verified at"), and whether it can be kept: every object
// read with one known identity.
func (ids *identities) record(objs []seen, verified time.Time) ([]byte, bool) {
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b seen) int { return strings.Compare(a.Key, b.Key) })
	for i, o := range objs {
		if !o.ID.Known() {
			if !ids.warned.Swap(true) {
				ids.t.log.Warn("the source does not identify versions of its objects (an HTTP server without ETag or Last-Modified): chunks read from them are not kept in the disk cache",
					"source", ids.t.src.String(), "object", o.Key)
			}
			return nil, false
		}
		if i > 0 && objs[i-1].Key == o.Key && objs[i-1].ID != o.ID {
			return nil, false // changed while the load read it
		}
	}
	objs = slices.CompactFunc(objs, func(a, b seen) bool { return a.Key == b.Key })
	if !verified.IsZero() {
		objs = append(objs, seen{Key: verifiedKey, ID: fetcher.Identity(strconv.FormatInt(verified.UnixNano(), 10))})
	}
	return keep.EncodeFields(objs), true
}
