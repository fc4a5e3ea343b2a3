package shared

import (
	"context"
	"errors"
	"fmt"

	"github.com/volfs/volfs/cache/envelope"
)

// Answers of the origin
//
// Besides decoded chunks, a tier with a secret keeps the origin's answers
// that a fleet's mounts all ask for when they start: a metadata object, a
// listing, the answer that an object does not exist (fetcher/keep decides
// which, and when one may stand in for the origin's). An answer is a value
// like a chunk's, under its own key (keep's, which no chunk's key can be),
// with a record that says what it is and when it was read from the origin;
// its size is not known before it is read, only bounded. Without a secret
// no answer is kept: any client of the engine could have written it, and
// checking it at the origin costs the request it would save.

// Answer returns the answer kept under key, at most limit bytes, and its
// record. On a miss it takes the key's lease, or waits for the node that
// holds it, as Get does (see "Single flight across the fleet"): when it
// took the lease, lease is its token ("" otherwise), and the caller then
// asks the origin and lets the lease go with PutAnswer (the answer) or
// ReleaseAnswer (none to keep), passing the token. The lease is the
// caller's, not the process's: another caller in this process, holding no
// token or another, cannot let it go. A tier without a secret answers
// nothing and takes no lease.
func (t *Tier) Answer(ctx context.Context, key string, limit int64) (val, rec []byte, lease string, ok bool) {
	if !t.Signed() {
		return nil, nil, "", false
	}
	ek := engineKey(key)
	bound := t.readBound(key, limit)
	raw, ok := t.fetch(ctx, ek, bound)
	if !ok && t.up() {
		raw, lease, ok = t.awaitLease(ctx, ek, bound)
	}
	if !ok {
		t.stats.answerMisses.Add(1)
		return nil, nil, lease, false
	}
	rec, payload, form, err := envelope.Open(magic, t.opts.Secret, key, limit, raw)
	if err == nil {
		val, err = envelope.DecodeUpTo(form, payload, limit)
	}
	switch {
	case err == nil:
		t.stats.answerHits.Add(1)
		return val, rec, "", true
	case errors.Is(err, envelope.ErrSignature):
		t.refusedSignature(ek, err)
	default:
		t.stats.corrupt.Add(1)
	}
	t.log.Debug("shared cache: answer refused, asking the origin", "key", fmt.Sprintf("%q", key), "err", err)
	t.stats.answerMisses.Add(1)
	return nil, nil, "", false
}

// PutAnswer keeps val under key with its record rec, as Put does, and lets
// go the key's lease if lease is the token Answer gave for it ("" when the
// caller took none: then no lease is let go).
func (t *Tier) PutAnswer(key, lease string, rec, val []byte) { _ = t.keep(key, lease, rec, val) }

// ReleaseAnswer lets key's lease go when no PutAnswer follows the miss of
// Answer that took it under the token lease ("" lets nothing go).
func (t *Tier) ReleaseAnswer(key, lease string) { t.releaseLease(engineKey(key), lease, false) }
