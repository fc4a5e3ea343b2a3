package cache

import (
	"context"

	"github.com/volfs/volfs/internal/mem"
)

// Values given back for reuse
//
// A decoded chunk is a buffer of several MiB. When the cache lets it go,
// its memory is garbage, and the next load decodes into fresh memory the
// kernel must fault in and clear (or memory the collector must find
// first). A load may instead say that the value it returns is memory
// nobody else refers to, and how to give it back for reuse (Load.Own:
// decoders decode into buffers of internal/mem's pool, which the next
// load takes again, faulted in and not cleared). The cache then gives the
// value back once nothing can read it any more: it is no longer kept (an
// eviction, Remove, or a value not kept at all), no tier write behind the
// load still reads it, and every reader that took it with a count
// (Acquire) has released it.
//
// A reader that takes a value without a count (Get, GetHit, GetBatch, and
// a load's waiters through those) may hold it for as long as it likes, so
// such a value is never given back: it stays the collector's. Being
// counted is opt-in, and a path that forgets to count only loses the
// reuse, never another chunk's bytes. The FUSE adapter's reads of chunk
// files are counted (fs.Handle.ReadPieces: released once go-fuse has
// written the reply, ReadResult.Done).
//
// All of owned's fields but recycle are guarded by Cache.mu.
type owned struct {
	val     []byte // the value the load declared (Load.Own)
	recycle func() // gives the memory back; called once, at most
	refs    int    // counted readers, tier writes, and the load's own hold until it is published
	escaped bool   // handed out without a count: never given back
	kept    bool   // in the cache (main or probation)
	done    bool   // given back
}

// flightKey keys, in a load's context, the flight it runs for: how
// Store.Loader's loads tell their flight what they own (Load.Own).
type flightKey struct{}

// Own tells the store that val, which the load is about to return as the
// chunk's value, is memory that nothing but the value refers to, and that
// recycle gives it back for reuse (for example to internal/mem's pool).
// The store calls recycle once no reader, no tier write and no kept entry
// refers to val any more (see "Values given back for reuse"); it never
// calls it if val was handed to any reader without a count, or if the
// load returns anything but val. A load that does not call Own has its
// value left to the garbage collector, as before.
func (l *Load) Own(val []byte, recycle func()) {
	if cap(val) == 0 || recycle == nil {
		return
	}
	l.own = &owned{val: val, recycle: recycle, refs: 1}
}

// owned returns the record of what the load owns when it returns val (the
// value it declared with Own), or nil.
func (l *Load) owned(val []byte) *owned {
	if l.own == nil || !sameMemory(val, l.own.val) {
		return nil
	}
	return l.own
}

// sameMemory reports whether a and b are the same slice of memory: the
// same first byte, length and capacity.
func sameMemory(a, b []byte) bool {
	return cap(a) == cap(b) && len(a) == len(b) && mem.SameStart(a, b)
}

// declare hands o, the record of the value the load running under ctx
// returns, to the load's flight, which publishes it (finish). A load that
// runs for no flight (a Loader called directly) has nobody to count its
// readers: its value is never given back.
//
// The load's own reference (Own's refs: 1) keeps the value while the
// flight has not published it; finish drops it.
func (c *Cache) declare(ctx context.Context, o *owned) {
	if o == nil {
		return
	}
	if f, ok := ctx.Value(flightKey{}).(*flight); ok {
		f.declared = o // read by finish, on this goroutine
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o.escaped = true
	o.refs--
}

// ref takes one reference on o (a tier write behind the load).
func (c *Cache) ref(o *owned) {
	if o == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o.refs++
}

// unref drops one reference on o, and gives it back if that was the last
// thing that could read it.
func (c *Cache) unref(o *owned) {
	if o == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o.refs--
	c.recycleLocked(o)
}

// Hold is a counted reader's hold on a value (Acquire): the value's
// memory is not reused before every hold on it is released. Safe for
// concurrent use.
type Hold struct {
	c        *Cache
	o        *owned // nil for a value that is never given back: nothing to count
	released bool   // GUARDED_BY(c.mu)
}

// Release drops the hold; the holder must not refer to the value after.
// Calls after the first do nothing.
func (h *Hold) Release() {
	if h.o == nil {
		return
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	h.o.refs--
	h.c.recycleLocked(h.o)
}

// Retain returns a second hold on h's value, for a holder that hands the
// value on (a reply written after the holder may have let go of it), or
// false once h is released: the value may be reused by then.
func (h *Hold) Retain() (*Hold, bool) {
	if h.o == nil {
		return h, true // Release of a hold on nothing does nothing
	}
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if h.released {
		return nil, false
	}
	h.o.refs++
	return &Hold{c: h.c, o: h.o}, true
}

// handOut records that a reader took a kept entry's value: counted (a
// reference it will release) or not (the value escapes for good).
//
// REQUIRES: c.mu held.
func handOut(o *owned, counted bool) {
	if o == nil {
		return
	}
	if counted {
		o.refs++
	} else {
		o.escaped = true
	}
}

// unkept records that the cache no longer keeps e's value, and gives it
// back if nothing else can read it.
//
// REQUIRES: c.mu held.
func (c *Cache) unkept(e entry) {
	if e.own == nil {
		return
	}
	e.own.kept = false
	c.recycleLocked(e.own)
}

// recycleLocked gives o's memory back if nothing can read it any more.
//
// REQUIRES: c.mu held.
func (c *Cache) recycleLocked(o *owned) {
	if o.done || o.escaped || o.kept || o.refs > 0 {
		return
	}
	o.done = true
	c.stats.Recycled++
	o.recycle()
}

// Acquire is GetHit for a reader that says when it is done with the
// value: hold, never nil, must be released once the reader (and whatever
// it handed the value to, with Retain's holds) no longer refers to val,
// and val must not be used after. Until then the value's memory is not
// reused; a value taken only by such readers is given back for reuse once
// the cache lets it go (see "Values given back for reuse"). On error, the
// hold holds nothing.
func (c *Cache) Acquire(ctx context.Context, key string, load Loader) (val []byte, hold *Hold, hit bool, err error) {
	e, hit, f := c.lookup(key, load, nil, true)
	if hit {
		return e.val, &Hold{c: c, o: e.own}, true, e.err
	}
	val, err = c.await(ctx, f)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !f.finished {
		// Gone before the load published its value: not counted.
		f.counted--
		return nil, &Hold{c: c}, false, err
	}
	o := f.own
	if o != nil && err != nil {
		// The load finished, and counted this reader, as it left.
		o.refs--
		c.recycleLocked(o)
		o = nil
	}
	return val, &Hold{c: c, o: o}, false, err
}
