package fs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/internal/mem"
)

// Reading a pass-through object in ranged parts
//
// An object store bounds each connection (tens of MiB/s, tens of ms to the
// first byte), not how many there are: one stream per reader reads a large
// object at one connection's rate. So a reader going through a remote
// object in order (cat, cp, sha256sum) is served from a window of ranged
// parts requested ahead of it, several in flight at once, as
// mountpoint-s3's prefetcher and gcsfuse's buffered reads do:
//
//   - A window starts when a read continues where the last one ended (or
//     starts at 0). A read elsewhere is one ranged read of its own bytes:
//     a seek, or dd at random offsets, costs what it reads.
//   - It starts partsFirstWindow ahead of the reader and doubles each time
//     the reader passes the end of a part (it keeps up), to
//     partsMaxWindow, the cap per object. Parts are a quarter of the
//     window, between partsMinPart and partsMaxPart.
//   - Every part ahead of the read is reserved in the tree's memory budget
//     (cache.MemBudget.TryReserve, the budget read-ahead draws from)
//     before it is requested; a refusal stops the window there until the
//     reader frees room. Nothing waits for room while holding it. The part
//     a read itself needs is requested without a reservation: those are
//     the bytes a plain ranged read would hold.
//   - A read inside the window (the kernel's reads overtake each other by
//     a MiB or two) is served from its parts; parts the reader has passed
//     by more than partsBehind are dropped, their budget given back and
//     their buffers too (to internal/mem's pool, where the fetcher's
//     ranges are the caller's alone: fetcher.OwnedRanger).
//   - A read outside the window (a seek, or a kernel read that came late)
//     is a plain ranged read and leaves the window be; the next read that
//     continues it (the reader did seek) cancels every part and restarts
//     the window small there.
//   - When the file's last handle closes (Handle.Close: a reader that
//     stopped early, or was killed) the window is cancelled at once; with
//     no read for partsIdle it is cancelled too, for a reader that keeps
//     its file open but reads no more.
//
// Versions: every request of an object file, a part or a plain ranged
// read, is pinned (fetcher.WithVersion) to one version of the object: the
// one its size was taken from (its listing or Stat), or else the first
// reply's. Sources with preconditions refuse another version (If-Match,
// ifGenerationMatch), and the identity of every reply is compared too, so
// an object rewritten while it is read fails the read with
// fetcher.ErrChanged (ESTALE) and never serves bytes of two versions.
//
// Every request is pinned to the file's size too (fetcher.WithSize): a
// reply that tells of another whole size is ErrChanged, whatever its
// ETag. A chunk's window (chunkparts.go) must also prove its version: a
// reply that names none, or another before any reply matched, sends its
// handles back to the chunk store (errUnproven) rather than failing.
//
// One window per file, not per open: two readers of one object at
// different places take turns breaking it, and are served by plain ranged
// reads (a chunk's window serves one handle at a time instead). A handle
// for one piece of an object (Tree.OpenRange: a Range request of volfs
// serve) reads just that piece, with no window.
// Local sources (a pread is no round trip) and servers that ignore Range
// (fetcher.RangeIgnorer: each range would read the object from its start)
// are not read in parts.
const (
	partsFirstWindow = 1 << 20
	// partsMaxWindow is the most requested ahead of one reader: 12 parts
	// of partsMaxPart in flight. Against an origin that caps each
	// response at 64 MiB/s and answers 20 ms late, a part is 20 ms of
	// waiting in 82: 8 parts (32 MiB) read at 0.62-0.93x of 8 parallel
	// curls, 12 at 0.84-0.95x with 123 MiB of RSS, and 64 MiB of 8 MiB
	// parts at 0.66-1.11x with 165-207 MiB (docs/PERFORMANCE.md).
	partsMaxWindow = 48 << 20
	partsMinPart   = 256 << 10
	// partsMaxPart is large enough that a request's first-byte latency
	// (20 ms at an object store) is a small share of it at one
	// connection's rate.
	partsMaxPart = 4 << 20
	// partsBehind is how far behind the latest read a part is kept for a
	// kernel read that came late (FUSE reads are at most 1 MiB, and a few
	// are sent at once).
	partsBehind = 4 << 20
	// partsSlack is how far past the window's end a read may start and
	// still continue the window: the kernel's reads of one file run a few
	// MiB ahead of each other, most of all while the window is small.
	partsSlack = 8 << 20
	partsIdle  = time.Second
	// partsPieceMax is the largest piece of an object that a handle for
	// that piece alone (Tree.OpenRange: volfs serve's Range requests)
	// reads in ranged reads of its own, a few requests of the front
	// end's block; a larger piece is read through the window.
	partsPieceMax = 4 << 20
)

// ignoresRange reports whether the tree's source has been seen to answer
// a ranged request with the whole object (fetcher.RangeIgnorer): each
// part would then read the object from its start.
func (t *Tree) ignoresRange() bool {
	ri, ok := t.src.(fetcher.RangeIgnorer)
	return ok && ri.IgnoresRange()
}

// objectParts is the window of one objectFile. The zero value is a file
// read in no window, pinned to no version yet.
type objectParts struct {
	mu    sync.Mutex
	id    fetcher.Identity // GUARDED_BY(mu); the version every read is pinned to
	parts []*part          // GUARDED_BY(mu); contiguous, in order, up to end
	end   int64            // GUARDED_BY(mu); where the next part starts
	next  int64            // GUARDED_BY(mu); where the last read ended
	// window is how far ahead of the furthest read parts are requested;
	// 0 when there is no window.
	window  int64       // GUARDED_BY(mu)
	lastUse time.Time   // GUARDED_BY(mu); when a read last used the window
	idle    *time.Timer // GUARDED_BY(mu); cancels an unused window
	armed   bool        // GUARDED_BY(mu); idle is running
	reading int         // GUARDED_BY(mu); reads waiting for or copying parts
	// ranged is set once a part has come back from a source not seen to
	// ignore Range: until then a window requests only what its read
	// needs, so that a server that sends the whole object for each range
	// is found out by one request, not by a window of them.
	ranged bool // GUARDED_BY(mu)
	// handles is how many handles of the file are open (Handle.Close).
	handles int // GUARDED_BY(mu)
	// idleAfter is partsIdle when 0, or what a test sets.
	idleAfter time.Duration // GUARDED_BY(mu)
	// named is set for a window that has another way to read its file (a
	// chunk's: chunkparts.go), whose replies must show they are of the
	// pinned version: a reply that names none (no ETag on a GET where the
	// Stat found one), or another before any reply has named the pinned
	// one (proven: a server whose HEAD and GET disagree, or a rewrite
	// since the open, with nothing of the version opened served yet),
	// fails its read with errUnproven, and the window's handles read the
	// other way (Handle.parts); unproven records that one did.
	named, proven, unproven bool // GUARDED_BY(mu)
}

// errUnproven is a reply of a named window that does not show it is of
// the version opened.
var errUnproven = errors.New("fs: a ranged reply does not show it is of the version opened")

// hold counts an open handle of the file.
func (w *objectParts) hold() {
	w.mu.Lock()
	w.handles++
	w.mu.Unlock()
}

// holdIdle counts an open handle of the file if it has none, and reports
// whether it did.
func (w *objectParts) holdIdle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handles > 0 {
		return false
	}
	w.handles++
	return true
}

// drop counts a handle closed, cancels the window with the last, and
// reports whether it was the last.
func (w *objectParts) drop(f *objectFile) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handles--; w.handles > 0 {
		return false
	}
	w.handles, w.next = 0, 0 // the next open that reads from 0 starts anew
	w.resetLocked(f)
	return true
}

// part is one ranged request of the window. data and err are set before
// done closes; the part's budget is given back once it is dropped, done
// and read by nobody.
type part struct {
	off, n  int64
	done    chan struct{}
	data    []byte
	err     error
	cancel  context.CancelFunc
	release func() // gives back the budget reserved for it
	readers int    // GUARDED_BY(objectParts.mu); reads copying from it
	dropped bool   // GUARDED_BY(objectParts.mu)
}

// errPartDropped is a part cancelled by the window (a seek, the idle
// timer) while a read waited for it: that read is served plainly.
var errPartDropped = errors.New("fs: part dropped by its window")

// fallBack reports whether the handles of a named window read its file
// the other way from now on: once a reply did not show it was of the
// version opened, or once the source is seen to ignore Range (ignores:
// each part would read the object from its start, and one beyond
// fetcher.MaxRangeSkip is refused). The second may come after a reply
// proved the version (provedVersion): the handle then reads the rest
// whole, pinned to it (Handle.readPinned), never through the chunk
// store's usual whole load, which is pinned to nothing.
func (w *objectParts) fallBack(ignores bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.unproven || ignores
}

// provedVersion reports whether a reply of the window named the version
// it is pinned to, so that bytes of that version may have been served:
// every later read of its handles must be of it (Handle.readPinned). A
// named window it reports false of is given up for good (unproven), under
// the same lock: its handles read the chunk path from then on, which may
// serve a version written since the open, and a reply of the version
// opened still in flight for another read of theirs (the kernel sends a
// file's reads at once) must not prove it and serve its bytes after
// (adopt refuses it).
func (w *objectParts) provedVersion() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.named && !w.proven {
		w.unproven = true
	}
	return w.named && w.proven
}

// proved is provedVersion without its side effect: it gives up no window.
func (w *objectParts) proved() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.named && w.proven
}

// isNamed reports whether the window is a chunk's (named).
func (w *objectParts) isNamed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.named
}

// version returns the version reads of the file are pinned to.
func (w *objectParts) version() fetcher.Identity {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// adopt checks the version a reply was read from against the file's,
// taking it as the file's if the file has none yet.
func (w *objectParts) adopt(key string, got fetcher.Identity) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.named && w.unproven, w.named && !got.Known() && !w.proven:
		w.unproven = true
		return fmt.Errorf("fs: %s: a reply of version %q: %w", key, got, errUnproven)
	case w.named && !got.Known():
		// Bytes of the version were served: one of an unknown
		// version cannot follow them.
		return fmt.Errorf("fs: %s: a reply that names no version, the file shows %s: %w", key, w.id, fetcher.ErrChanged)
	case !got.Known():
		return nil
	case !w.id.Known():
		w.id = got
		return nil
	case got != w.id:
		return w.changedLocked(fmt.Errorf("fs: %s: a reply of version %s, the file shows %s: %w", key, got, w.id, fetcher.ErrChanged))
	}
	w.proven = true
	return nil
}

// changed is the error of a read that found another version than the
// file's: err, or errUnproven in a named window that no reply has yet
// shown to be of the version opened.
func (w *objectParts) changed(err error) error {
	if !errors.Is(err, fetcher.ErrChanged) {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changedLocked(err)
}

// changedLocked is changed with w.mu held.
//
// REQUIRES: w.mu held.
func (w *objectParts) changedLocked(err error) error {
	if !w.named || w.proven {
		return err
	}
	w.unproven = true
	return fmt.Errorf("%w (%v)", errUnproven, err)
}

// lend serves the n bytes at off (within the file) from the window,
// starting one if the read continues the last, and reports whether it did;
// a read it does not serve is the caller's (a plain ranged read). It
// returns them as slices of the window's parts, in order, and release,
// which the caller must call once it is done with them (ReadAt after its
// copy; the FUSE adapter after the kernel has taken the reply: go-fuse's
// ReadResult.Done). Until then the parts are held: not freed, their budget
// not given back, whatever the window does. release is nil unless ok and
// err is nil.
func (w *objectParts) lend(ctx context.Context, f *objectFile, off, n int64) (pieces [][]byte, release func(), ok bool, err error) {
	w.mu.Lock()
	switch {
	case w.window > 0 && len(w.parts) > 0 && off >= w.parts[0].off && off <= w.end+partsSlack:
		// Inside the window.
	case off == w.next:
		w.resetLocked(f)
		w.window, w.end = partsFirstWindow, off
	default:
		// Elsewhere: a read the kernel sent late, or a seek. The window
		// stays for the reads that come back to it; a read that
		// continues this one starts a new window (above).
		w.next = off + n
		w.mu.Unlock()
		return nil, nil, false, nil
	}
	w.next = max(w.next, off+n)
	w.dropBehindLocked(f, off)
	w.fillLocked(f, off, off+n)
	var need []*part // a read spans one or two parts, rarely more
	for _, pt := range w.parts {
		if pt.off < off+n && pt.off+pt.n > off {
			pt.readers++
			need = append(need, pt)
		}
	}
	w.reading++
	w.lastUse = time.Now()
	w.armIdleLocked(f)
	w.mu.Unlock()

	for _, pt := range need {
		select {
		case <-pt.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err == nil {
			err = pt.err
		}
		if err != nil {
			break
		}
		pieces = append(pieces, pt.data[max(off, pt.off)-pt.off:min(off+n, pt.off+pt.n)-pt.off])
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.reading--
	passed := 0
	for _, pt := range need {
		if off+n >= pt.off+pt.n {
			passed++
		}
	}
	if err != nil {
		w.unholdLocked(f, need)
		if errors.Is(err, errPartDropped) {
			return nil, nil, false, nil
		}
		if ctx.Err() == nil {
			// A failed part fails this read; the next read starts over.
			w.resetLocked(f)
		}
		return nil, nil, true, err
	}
	if w.window > 0 {
		for range passed {
			w.window = min(2*w.window, partsMaxWindow)
		}
	}
	release = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.unholdLocked(f, need)
	}
	return pieces, release, true, nil
}

// unholdLocked lets go of parts a read held, freeing those dropped since.
//
// REQUIRES: w.mu held.
func (w *objectParts) unholdLocked(f *objectFile, held []*part) {
	for _, pt := range held {
		pt.readers--
		w.freeLocked(f, pt)
	}
}

// fillLocked requests parts from the window's end until it reaches need
// (the read's end, whatever the budget says) and the window ahead of off.
//
// REQUIRES: w.mu held.
func (w *objectParts) fillLocked(f *objectFile, off, need int64) {
	limit := min(f.size, max(need, off+w.window))
	if !w.ranged {
		limit = need
	}
	var budget *cache.MemBudget // nil reserves nothing
	if f.t.store != nil {
		budget = f.t.store.MemBudget()
	}
	for w.end < limit {
		size := min(max(w.window/4, partsMinPart), partsMaxPart)
		if w.end < need {
			size = max(size, need-w.end) // the read's bytes in one request
		}
		size = min(size, f.size-w.end)
		release, ok := budget.TryReserve(size)
		if !ok {
			if w.end >= need {
				return
			}
			release = func() {}
		}
		ctx, cancel := context.WithCancel(context.Background())
		pt := &part{off: w.end, n: size, done: make(chan struct{}), cancel: cancel, release: release}
		w.parts = append(w.parts, pt)
		w.end += size
		go w.fetch(ctx, f, pt, w.id)
	}
}

// fetch reads one part, pinned to the version id (when known).
func (w *objectParts) fetch(ctx context.Context, f *objectFile, pt *part, id fetcher.Identity) {
	data, got, err := f.t.src.GetRange(f.pin(ctx, id), f.key, pt.off, pt.n)
	if err == nil && int64(len(data)) != pt.n {
		err = fmt.Errorf("fs: %s: %d bytes at %d, want %d: the object is shorter than its file: %w",
			f.key, len(data), pt.off, pt.n, fetcher.ErrChanged)
	}
	if err == nil && pt.n > 0 {
		err = w.adopt(f.key, got)
	}
	err = w.changed(err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && pt.dropped && ctx.Err() != nil {
		err = errPartDropped
	}
	if err != nil {
		f.t.putRange(data)
		data = nil
	} else if !f.t.ignoresRange() {
		w.ranged = true
	}
	pt.data, pt.err = data, err
	close(pt.done)
	w.freeLocked(f, pt)
}

// freeLocked gives back a part's buffer and budget once it is dropped,
// done, and read by nobody.
//
// REQUIRES: w.mu held.
func (w *objectParts) freeLocked(f *objectFile, pt *part) {
	if !pt.dropped || pt.readers > 0 {
		return
	}
	select {
	case <-pt.done:
	default:
		return // fetch frees it when done
	}
	f.t.putRange(pt.data)
	pt.data = nil
	if pt.release != nil {
		pt.release()
		pt.release = nil
	}
}

// dropLocked drops a part: its request is cancelled, its budget given
// back as soon as nobody reads it.
//
// REQUIRES: w.mu held.
func (w *objectParts) dropLocked(f *objectFile, pt *part) {
	pt.dropped = true
	pt.cancel()
	w.freeLocked(f, pt)
}

// dropBehindLocked drops the parts that end partsBehind or more before off.
//
// REQUIRES: w.mu held.
func (w *objectParts) dropBehindLocked(f *objectFile, off int64) {
	i := 0
	for i < len(w.parts) && w.parts[i].off+w.parts[i].n+partsBehind <= off {
		w.dropLocked(f, w.parts[i])
		i++
	}
	w.parts = w.parts[i:]
}

// resetLocked drops the window, cancelling every part: every request
// first, then the buffers and budget of those done are given back, so
// that no request waits for another part's buffer to be freed.
//
// REQUIRES: w.mu held.
func (w *objectParts) resetLocked(f *objectFile) {
	for _, pt := range w.parts {
		pt.dropped = true
		pt.cancel()
	}
	for _, pt := range w.parts {
		w.freeLocked(f, pt)
	}
	w.parts, w.window = nil, 0
	if w.idle != nil {
		w.idle.Stop()
		w.armed = false
	}
}

// armIdleLocked starts the timer that drops a window unused for
// partsIdle, unless it runs: a read only moves lastUse, which the timer
// looks at when it fires, so that reads do not reset a timer each.
//
// REQUIRES: w.mu held.
func (w *objectParts) armIdleLocked(f *objectFile) {
	if w.armed {
		return
	}
	w.armed = true
	if w.idle != nil {
		w.idle.Reset(w.idleLocked())
		return
	}
	w.idle = time.AfterFunc(w.idleLocked(), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.window == 0 {
			w.armed = false
			return
		}
		idle := w.idleLocked()
		if wait := idle - time.Since(w.lastUse); wait > 0 || w.reading > 0 {
			w.idle.Reset(max(wait, idle/4))
			return
		}
		w.resetLocked(f)
	})
}

// idleLocked is how long a window may go unused: partsIdle, or what a
// test set.
//
// REQUIRES: w.mu held.
func (w *objectParts) idleLocked() time.Duration {
	if w.idleAfter > 0 {
		return w.idleAfter
	}
	return partsIdle
}

// continues reports whether a read at off continues the last read the
// window saw: where a stream (stream.go) takes over from the window when
// the source turns out to ignore Range.
func (w *objectParts) continues(off int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return off == w.next && off > 0
}

// putRange gives the bytes of a GetRange back to internal/mem's pool when
// the source says they are the caller's alone (fetcher.OwnedRanger), and
// leaves them to the collector otherwise.
func (t *Tree) putRange(b []byte) {
	if o, ok := t.src.(fetcher.OwnedRanger); ok && o.RangesOwned() && b != nil {
		mem.Put(b)
	}
}
