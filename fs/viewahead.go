package fs

import (
	"sync"
	"sync/atomic"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fs/view"
)

// Read-ahead of stitched views
//
// The kernel reads ahead within a file, but only by its own window
// (MaxReadAhead, 1 MiB), a small part of the chunks a section, slab or
// volume.raw spans. So a view file's reader reads ahead as a reader of
// chunk files does, with the same machinery (readers): one reader per
// process and view file, a cache.Tracker that follows its run, grows its
// window while it reads on, and cancels its prefetches when it jumps or
// idles, under the tree's global --read-ahead budget and its metrics.
// A position is a block of viewBlock bytes of the file; a prefetch of a
// position loads the chunks under its block that the block before does
// not need (view.ChunksAt), so that a forward run loads each chunk once,
// and is charged their decoded bytes.

// viewBlock is the bytes of a view file one read-ahead position stands
// for: the kernel's largest read (1 MiB), so that a sequential reader
// steps one position per read.
const viewBlock = 1 << 20

// viewAheadChunks bounds the chunks one position lists (and the work of
// finding them): a block over a row of one-voxel chunks would otherwise
// list a chunk per byte. It is the queue of the store's prefetches,
// which drops what does not fit anyway.
const viewAheadChunks = 256

// viewSeqMemo bounds the positions whose chunks a viewSeq keeps between
// the tracker's charge and the prefetch of the same positions.
const viewSeqMemo = 64

// viewSeq is the sequence of blocks of one view file. Safe for
// concurrent use.
type viewSeq struct {
	f *viewFile

	mu   sync.Mutex
	memo map[int64][][]int64 // GUARDED_BY(mu); chunks by position

	listed atomic.Int64 // the chunks view.ChunksAt listed: the work of the read-ahead
}

func (f *viewFile) sequence() *viewSeq {
	f.seqOnce.Do(func() { f.seq = &viewSeq{f: f, memo: make(map[int64][][]int64)} })
	return f.seq
}

func (s *viewSeq) len() int64           { return (s.f.f.Size() + viewBlock - 1) / viewBlock }
func (s *viewSeq) array() *decode.Array { return s.f.av.a }

// chunks returns the chunks (metadata order) under block p that block
// p-1 does not need.
func (s *viewSeq) chunks(p int64) [][]int64 {
	s.mu.Lock()
	c, ok := s.memo[p]
	s.mu.Unlock()
	if ok {
		return c
	}
	a := s.f.av.a
	var before map[string]bool
	if p > 0 {
		prev := view.ChunksAt(s.f.f, (p-1)*viewBlock, viewBlock, viewAheadChunks)
		s.listed.Add(int64(len(prev)))
		before = make(map[string]bool, len(prev))
		for _, v := range prev {
			before[a.ChunkKey(permute(a, v))] = true
		}
	}
	cur := view.ChunksAt(s.f.f, p*viewBlock, viewBlock, viewAheadChunks)
	s.listed.Add(int64(len(cur)))
	for _, v := range cur {
		m := permute(a, v)
		if !before[a.ChunkKey(m)] {
			c = append(c, m)
		}
	}
	s.mu.Lock()
	if len(s.memo) >= viewSeqMemo {
		clear(s.memo)
	}
	s.memo[p] = c
	s.mu.Unlock()
	return c
}

// charge returns the decoded bytes of a prefetch of position p.
func (s *viewSeq) charge(p int64) int64 {
	a := s.f.av.a
	n := int64(0)
	for _, c := range s.chunks(p) {
		n += a.ChunkSize(c)
	}
	return n
}

// readAhead tells the reader rd of f that it read [off, off+n). The touch
// counts as a wait: a read of a view almost always waits for some chunk
// under it, and a reader that finds everything in memory finds the
// prefetches of its window there too.
func (f *viewFile) readAhead(rd Reader, off, n int64) {
	t := f.av.t
	if t.opts.ReadAhead <= 0 || n <= 0 {
		return
	}
	seq := f.sequence()
	r := t.readers.reader(readerKey{view: f, pid: rd.Process}, seq, seq.charge)
	r.touch((off+n-1)/viewBlock, rd.Thread, true)
}
