package fs

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
)

// Read-ahead across chunk files
//
// The kernel's read-ahead never crosses from one file into the next, and
// programs read chunks one file at a time: `cat scale/*` opens, reads and
// closes a handle per chunk. So read-ahead follows readers, not handles: a
// reader is one process (Reader.Process: under FUSE the thread group of
// the thread whose request opened the file, which the adapter finds; a
// client of volfs serve) reading one sequence of chunks, and it outlives
// the handles it opens. One process has one read-ahead
// window per sequence however many threads it reads with. The first read
// of each handle is the reader's touch of that chunk: the tree asks the
// store for the chunk (GetHit tells whether the reader had to wait), then
// tells the reader's cache.Tracker, which advises which positions to
// prefetch or to cancel; the positions become chunk keys and go to
// Store.Prefetch. A reader idle for cache.IdleAfter is stopped (its unread
// prefetches cancelled, its budget returned) and forgotten.
//
// A pool of threads that shares out one directory (each thread opens the
// next name from a queue) touches its chunks out of order: by up to the
// number of threads, and further when a thread is held up between taking
// a name and its first read. The reader remembers the threads of its last
// poolMemory touches, and the tracker tolerates twice as many positions
// of disorder as there are distinct threads among them
// (cache.Tracker.TouchConcurrent), so the pool keeps one run.
//
// # Positions
//
// A reader's positions are the ranks of chunk names in the lexical order
// of their key directory's names: the order of `cat dir/*` (in the C
// locale), `ls | sort` and Python's sorted(os.listdir(dir)). For
// precomputed names ("0-64_0-64_0-64") and for zarr grids of more than ten
// chunks along an axis ("0.10" before "0.2") that order is not the grid's.
// The sorted names of a directory are generated once (maxLexicalNames
// bounds them) and kept for the few directories read last; a directory of
// more chunks than that falls back to grid order over the whole array
// (decode.Array.Index), which a reader that walks the grid follows.
const maxLexicalNames = 1 << 17

// poolMemory is how many of a reader's last touches it remembers the
// threads of: enough to see every thread of a pool of 32 at least once.
const poolMemory = 64

// maxSeqs bounds the key directories whose sorted names are kept, and
// maxSeqBytes their names' bytes (with each string's header): at most a
// few directories of maxLexicalNames names.
const (
	maxSeqs     = 64
	maxSeqBytes = 16 << 20
)

// sequence is what a reader follows: positions 0 to len()-1 of one
// array, each standing for the chunks that a prefetch of it loads.
type sequence interface {
	len() int64
	array() *decode.Array
	// chunks returns the grid coordinates (metadata order) of the chunks
	// a prefetch of position p loads.
	chunks(p int64) [][]int64
}

// keySeq is the order in which a reader is expected to read chunk files.
type keySeq struct {
	id    string // the key directory's key, or "#grid:" and the array's
	a     *decode.Array
	node  decode.KeyDir
	names []string // sorted lexically; nil for grid order over a
}

func (s *keySeq) len() int64 {
	if s.names == nil {
		return s.a.NumChunks()
	}
	return int64(len(s.names))
}

// pos returns the position of the chunk file f.
func (s *keySeq) pos(f *chunkFile) int64 {
	if s.names == nil {
		return s.a.Index(f.c)
	}
	return int64(sort.SearchStrings(s.names, f.name))
}

func (s *keySeq) array() *decode.Array { return s.a }

// chunks returns the grid coordinates of the chunk at position p.
func (s *keySeq) chunks(p int64) [][]int64 {
	if s.names == nil {
		return [][]int64{s.a.Coords(p)}
	}
	if _, c, ok := s.a.KeyLookup(s.node, s.names[p]); ok && c != nil {
		return [][]int64{c}
	}
	return nil
}

// readers holds the read-ahead state of a tree. Safe for concurrent use.
type readers struct {
	t *Tree

	mu       sync.Mutex
	m        map[readerKey]*reader // GUARDED_BY(mu)
	seqs     map[string]*keySeq    // GUARDED_BY(mu); by keySeq.id
	seqBytes int64                 // GUARDED_BY(mu); bytes of the names in seqs
}

type readerKey struct {
	seq  string    // keySeq.id, or "" for a view
	view *viewFile // the view file read, or nil
	pid  uint32    // Reader.Process
}

// reader is one process reading one sequence of chunks, or one view file.
//
// LOCK ORDERING: readers.mu before reader.mu; neither is held while
// prefetches are issued.
type reader struct {
	rs   *readers
	key  readerKey
	seq  sequence
	tr   *cache.Tracker
	idle *time.Timer

	mu     sync.Mutex
	ctx    context.Context    // GUARDED_BY(mu); scope of the prefetches issued since the last cancel
	cancel context.CancelFunc // GUARDED_BY(mu)
	tids   [poolMemory]uint32 // GUARDED_BY(mu); the threads of the last touches, a ring
	ntids  int                // GUARDED_BY(mu); touches recorded in tids
}

func (rs *readers) init(t *Tree) {
	rs.t = t
	rs.m = make(map[readerKey]*reader)
	rs.seqs = make(map[string]*keySeq)
}

// touch tells the reader rd.Process of f's sequence that its thread
// rd.Thread read f for the first time through a handle, and whether it
// waited for the chunk, then issues or cancels prefetches as its tracker
// advises. It does nothing when read-ahead is off.
func (rs *readers) touch(f *chunkFile, rd Reader, waited bool) {
	if rs.t.opts.ReadAhead <= 0 || f.dir == nil {
		return
	}
	seq := rs.seqOf(f.dir)
	r := rs.reader(readerKey{seq: seq.id, pid: rd.Process}, seq, nil)
	r.touch(seq.pos(f), rd.Thread, waited)
}

// touch tells r that its thread tid touched position pos.
func (r *reader) touch(pos int64, tid uint32, waited bool) {
	r.idle.Reset(cache.IdleAfter)
	r.apply(r.tr.TouchConcurrent(pos, waited, 2*r.threads(tid)-1))
}

// threads records a touch by thread tid and returns the distinct threads
// among the last poolMemory touches.
func (r *reader) threads(tid uint32) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tids[r.ntids%poolMemory] = tid
	r.ntids++
	seen := r.tids[:min(r.ntids, poolMemory)]
	n := int64(0)
	for i, x := range seen {
		if !slices.Contains(seen[:i], x) {
			n++
		}
	}
	return n
}

// seqOf returns the sequence of the key directory d, made on first use.
func (rs *readers) seqOf(d *keyDir) *keySeq {
	id := d.key
	n := d.a.KeyLen(d.node)
	if n > maxLexicalNames {
		id = "#grid:" + d.a.Key
	}
	rs.mu.Lock()
	s, ok := rs.seqs[id]
	rs.mu.Unlock()
	if ok {
		return s
	}
	s = &keySeq{id: id, a: d.a, node: d.node}
	size := int64(0)
	if n <= maxLexicalNames {
		s.names = make([]string, n)
		for i := range n {
			s.names[i], _ = d.a.KeyEntry(d.node, i)
			size += int64(len(s.names[i])) + 16
		}
		slices.Sort(s.names)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if prev, ok := rs.seqs[id]; ok {
		return prev
	}
	if len(rs.seqs) >= maxSeqs || rs.seqBytes+size > maxSeqBytes {
		// Readers keep theirs; only the lookup is lost.
		clear(rs.seqs)
		rs.seqBytes = 0
	}
	rs.seqs[id] = s
	rs.seqBytes += size
	return s
}

// reader returns the reader of key, made on first use. Without charge,
// each position is charged the bytes of one chunk.
func (rs *readers) reader(key readerKey, seq sequence, charge func(int64) int64) *reader {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.m[key]; ok {
		return r
	}
	r := &reader{rs: rs, key: key, seq: seq}
	a := seq.array()
	cfg := cache.TrackerConfig{
		Len:        seq.len(),
		ChunkBytes: a.ChunkSize(make([]int64, len(a.Grid))),
		MaxBytes:   rs.t.opts.ReadAhead,
		Budget:     rs.t.budget,
	}
	if charge != nil {
		// The window is counted in positions of viewBlock file bytes
		// (nothing is computed before the reader runs: finding the
		// chunks under a block of a hostile geometry is work); the
		// budget is charged what each prefetch really holds.
		cfg.Charge = charge
		cfg.ChunkBytes = viewBlock
	}
	r.tr = cache.NewTracker(cfg)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.idle = time.AfterFunc(cache.IdleAfter, func() { rs.stop(r) })
	rs.m[key] = r
	return r
}

// apply carries out a tracker's advice.
func (r *reader) apply(adv cache.Advice) {
	r.mu.Lock()
	if adv.Cancel {
		r.cancel()
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	ctx := r.ctx
	r.mu.Unlock()
	if len(adv.Prefetch) == 0 {
		return
	}
	a := r.seq.array()
	keys := make([]string, 0, len(adv.Prefetch))
	mkeys := make([]string, 0, len(adv.Prefetch))
	coords := make([][]int64, 0, len(adv.Prefetch))
	for _, p := range adv.Prefetch {
		for _, c := range r.seq.chunks(p) {
			keys = append(keys, a.ChunkKey(c))
			mkeys = append(mkeys, memKey(a, keys[len(keys)-1]))
			coords = append(coords, c)
		}
	}
	t := r.rs.t
	t.store.Prefetch(ctx, mkeys, func(i int) cache.Loader { return t.loader(a, keys[i], coords[i]) })
}

// stop stops r, cancelling its prefetches, and forgets it. A touch that
// races with it finds a fresh tracker, or a new reader.
func (rs *readers) stop(r *reader) {
	r.tr.Stop()
	r.mu.Lock()
	r.cancel()
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.mu.Unlock()
	rs.mu.Lock()
	if rs.m[r.key] == r {
		delete(rs.m, r.key)
	}
	rs.mu.Unlock()
}

// stopAll stops every reader, for Tree.Close.
func (rs *readers) stopAll() {
	rs.mu.Lock()
	all := make([]*reader, 0, len(rs.m))
	for _, r := range rs.m {
		all = append(all, r)
	}
	rs.mu.Unlock()
	for _, r := range all {
		r.idle.Stop()
		rs.stop(r)
	}
}
