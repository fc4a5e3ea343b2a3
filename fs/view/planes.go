package view

import (
	"context"
	"fmt"
)

// planes is the pixel data every view is made of: a sequence of
// single-channel planes laid end to end, each Shape[1] rows of Shape[0]
// little-endian samples, x fastest. A view says which plane comes where
// with at; the byte arithmetic and the copy out of chunks live here once.
type planes struct {
	m *geom
	n int64 // planes in the sequence
	// at writes the outer index (axes 2..) of plane q into o and returns
	// its channel.
	at func(q int64, o []int64) int64
}

func (r *planes) size() int64 { return r.n * r.m.plane }

// walk calls fn for every row piece of bytes [off, off+n): d is where the
// piece starts in the caller's buffer, q the plane, y the row, [b0, b1)
// the piece's bytes within the row.
func (r *planes) walk(off int64, n int, fn func(d int, q, y, b0, b1 int64)) {
	r.walkWhile(off, n, func(d int, q, y, b0, b1 int64) bool {
		fn(d, q, y, b0, b1)
		return true
	})
}

// walkWhile is walk that stops once fn returns false.
func (r *planes) walkWhile(off int64, n int, fn func(d int, q, y, b0, b1 int64) bool) {
	rb, pb := r.m.rowBytes, r.m.plane
	end := off + int64(n)
	for pos := off; pos < end; {
		q, in := pos/pb, pos%pb
		y, b0 := in/rb, in%rb
		b1 := min(rb, b0+end-pos)
		if !fn(int(pos-off), q, y, b0, b1) {
			return
		}
		pos += b1 - b0
	}
}

// batchChunk is one chunk of a read's batch with its validated layout.
type batchChunk struct {
	lin   int64 // linear chunk index, axis 0 fastest
	coord []int64
	data  []byte // nil: missing, reads as fill
	lay   ChunkLayout
}

// maxBatchChunks and maxBatchBytes bound one batch of a read: a read
// whose bytes need more chunks, or chunks of more decoded bytes (counted
// at the full chunk size), is served as several batches in turn, each
// copied out before the next is asked for. So a read's memory is bounded
// by these, not by how many chunks lie under it: a 128 KiB read of a row
// of one-voxel chunks would otherwise ask for 131072 chunks at once, and
// a 1 MiB read across a row of 2 MiB chunks for a gigabyte of them.
// 4096 chunk loads in flight cost a few MiB of bookkeeping; 32 MiB of
// chunks is 16 of the largest common chunks (64^3 uint64), enough to keep
// a row's worth of ordinary chunks in one batch.
const (
	maxBatchChunks = 4096
	maxBatchBytes  = 16 << 20
)

// batchLimit is the number of chunks one batch may hold: maxBatchChunks,
// fewer for chunks so large that maxBatchBytes would be passed, and at
// least one.
func (m *geom) batchLimit() int {
	if m.limit > 0 {
		return m.limit
	}
	return int(max(1, min(maxBatchChunks, maxBatchBytes/m.chunkBytes)))
}

// linRow returns the linear chunk index of the chunk at x = 0 of row y
// of plane q: a chunk row's chunks are linRow + cx. o is scratch space of
// ndim-2, left holding plane q's outer index.
func (r *planes) linRow(q, y int64, o []int64) int64 {
	m := r.m
	r.at(q, o)
	lin := m.nchunks[0] * (y / m.Chunk[1])
	stride := m.nchunks[0] * m.nchunks[1]
	for i, v := range o {
		lin += stride * (v / m.Chunk[i+2])
		stride *= m.nchunks[i+2]
	}
	return lin
}

// collect returns the chunks under the row bytes [xlo, xhi) of bytes
// [off, off+n) of the sequence, in the order the bytes need them (plane,
// then chunk row, then x), each once, with their coordinates, and the
// position in the batch of each linear chunk index; at most limit (>= 1)
// chunks. stop is where the bytes these chunks cover end: off+n, or the
// start of the first row piece whose chunks do not all fit beside the
// ones before it. wide reports a first row piece that alone needs more
// than limit chunks: nothing is collected then (see readWide). Its work
// is proportional to the bytes up to stop and the chunks collected, never
// to the array's geometry.
func (r *planes) collect(off, n int64, limit int, xlo, xhi int64) (batch []batchChunk, coords [][]int64, index map[int64]int, stop int64, wide bool) {
	m := r.m
	o := make([]int64, m.ndim-2)
	// Room for the chunk rows the range spans when it lies in one plane,
	// so that the batch rarely grows.
	rows := n/m.rowBytes + 2
	hint := min(m.nchunks[0]*(rows/m.Chunk[1]+2), int64(limit), 1<<14)
	index = make(map[int64]int, hint) // linear chunk index -> batch position
	batch = make([]batchChunk, 0, hint)
	stop = off + n
	cw := m.Chunk[0] * m.size             // bytes of a chunk's row piece
	lastQ, lastCY := int64(-1), int64(-1) // the last whole row collected
	r.walkWhile(off, int(n), func(d int, q, y, b0, b1 int64) bool {
		cy := y / m.Chunk[1]
		whole := b0 == 0 && b1 == m.rowBytes
		if whole && q == lastQ && cy == lastCY {
			return true // every chunk of this chunk row is collected already
		}
		b0, b1 = max(b0, xlo), min(b1, xhi)
		if b0 >= b1 {
			return true
		}
		row := r.linRow(q, y, o)
		// The chunks of this piece not in the batch yet: they come
		// after every chunk of the batch in x, or are all in it, except
		// where planes share chunks out of order; count them first.
		lo, hi := b0/cw, (b1-1)/cw
		fresh := 0
		for cx := lo; cx <= hi && len(batch)+fresh <= limit; cx++ {
			if _, ok := index[row+cx]; !ok {
				fresh++
			}
		}
		if len(batch)+fresh > limit {
			if len(batch) == 0 {
				wide = true
			}
			stop = off + int64(d)
			return false
		}
		for cx := lo; cx <= hi; cx++ {
			if _, ok := index[row+cx]; !ok {
				index[row+cx] = len(batch)
				batch = append(batch, batchChunk{lin: row + cx})
			}
		}
		if whole {
			lastQ, lastCY = q, cy
		}
		return true
	})

	// One allocation for every coordinate of the batch.
	flat := make([]int64, len(batch)*m.ndim)
	coords = make([][]int64, len(batch))
	for i := range batch {
		c := flat[i*m.ndim : (i+1)*m.ndim : (i+1)*m.ndim]
		lin := batch[i].lin
		for k := range c {
			c[k] = lin % m.nchunks[k]
			lin /= m.nchunks[k]
		}
		batch[i].coord, coords[i] = c, c
	}
	return batch, coords, index, stop, wide
}

// wideRun returns the end of the run of row pieces from off (before end)
// that lie in the same chunk row as the first one, and the row bytes
// [xlo, xhi) that the run spans: the bytes a row piece too wide for one
// batch shares its chunks with, read in column windows by readWide.
func (r *planes) wideRun(off, end int64) (runEnd, xlo, xhi int64) {
	o := make([]int64, r.m.ndim-2)
	first := int64(-1)
	runEnd, xlo, xhi = off, r.m.rowBytes, 0
	r.walkWhile(off, int(end-off), func(d int, q, y, b0, b1 int64) bool {
		row := r.linRow(q, y, o)
		if first >= 0 && row != first {
			return false
		}
		first = row
		runEnd = off + int64(d) + b1 - b0
		xlo, xhi = min(xlo, b0), max(xhi, b1)
		return true
	})
	return runEnd, xlo, xhi
}

// chunkBatch is one batch of a read: its chunks hold the row bytes
// [xlo, xhi) of bytes [off, end) of the sequence.
type chunkBatch struct {
	off, end, xlo, xhi int64
	chunks             []batchChunk
	coords             [][]int64
	index              map[int64]int // linear chunk index -> position in chunks
}

// batches calls fn with the batches of a read of bytes [off, end) of the
// sequence, in turn, until fn returns false: of at most limit chunks
// each, batches of whole row pieces in byte order, and a run of rows
// whose chunk row alone is too wide for one batch in windows of columns
// aligned to chunks, each window's chunks asked for once for every row
// of the run.
func (r *planes) batches(off, end int64, limit int, fn func(b *chunkBatch) bool) {
	m := r.m
	for off < end {
		chunks, coords, index, stop, wide := r.collect(off, end-off, limit, 0, m.rowBytes)
		if !wide {
			if !fn(&chunkBatch{off, stop, 0, m.rowBytes, chunks, coords, index}) {
				return
			}
			off = stop
			continue
		}
		runEnd, xlo, xhi := r.wideRun(off, end)
		cw := m.Chunk[0] * m.size
		w := int64(limit) * cw
		for x := xlo - xlo%cw; x < xhi; x += w {
			wlo, whi := max(x, xlo), min(x+w, xhi)
			chunks, coords, index, _, _ := r.collect(off, runEnd-off, limit, wlo, whi)
			if !fn(&chunkBatch{off, runEnd, wlo, whi, chunks, coords, index}) {
				return
			}
		}
		off = runEnd
	}
}

// chunksAt returns the coordinates of the chunks under bytes [off, off+n)
// of the sequence, clipped to it, in the order readAt asks for them; at
// most limit of them (the first), so that its cost is bounded by limit:
// its batches hold at most limit chunks, so that a limit below the
// batches' own (4096 chunks) collects no more than it returns.
func (r *planes) chunksAt(off, n int64, limit int) [][]int64 {
	var all [][]int64
	r.batches(max(off, 0), min(off+n, r.size()), min(limit, r.m.batchLimit()), func(b *chunkBatch) bool {
		all = append(all, b.coords...)
		return len(all) < limit
	})
	return all[:min(len(all), limit)]
}

// readAt fills p with bytes [off, off+len(p)) of the sequence, which must
// lie inside it. It asks Chunks for the chunks under the range in the
// order the bytes need them (plane, then chunk row, then x), each chunk
// once, and copies out of them: in one batch, unless the range needs more
// than batchLimit chunks. Then each batch (see batches) is copied out
// before the next is asked for. If chunks is a Reserver, each batch's
// decoded bytes are reserved before it is asked for and released once it
// is copied out.
func (r *planes) readAt(ctx context.Context, chunks Chunks, p []byte, off int64) error {
	var err error
	r.batches(off, off+int64(len(p)), r.m.batchLimit(), func(b *chunkBatch) bool {
		err = r.readBatch(ctx, chunks, p[b.off-off:b.end-off], b)
		return err == nil
	})
	return err
}

// readBatch fills the row bytes [b.xlo, b.xhi) of p, bytes [b.off,
// b.end) of the sequence, from the chunks of b, which hold every byte of
// them.
func (r *planes) readBatch(ctx context.Context, chunks Chunks, p []byte, b *chunkBatch) error {
	batch, coords, index, xlo, xhi := b.chunks, b.coords, b.index, b.xlo, b.xhi
	m := r.m
	if res, ok := chunks.(Reserver); ok {
		release, err := res.Reserve(ctx, int64(len(coords))*m.chunkBytes)
		if err != nil {
			return fmt.Errorf("view: %w", err)
		}
		defer release()
	}
	o := make([]int64, m.ndim-2)
	got, err := chunks.Get(ctx, coords)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if len(got) != len(coords) {
		return fmt.Errorf("%w: asked for %d chunks, got %d", ErrCorrupt, len(coords), len(got))
	}
	fill, err := m.fill(chunks)
	if err != nil {
		return err
	}
	for i := range batch {
		if got[i].Data == nil {
			continue
		}
		batch[i].data, batch[i].lay = got[i].Data, got[i].Layout
		if err := m.check(batch[i].coord, batch[i].lay, len(got[i].Data)); err != nil {
			return err
		}
	}

	var tmp [8]byte
	lo := make([]int64, m.ndim)
	r.walk(b.off, len(p), func(d int, q, y, b0, b1 int64) {
		if b0 < xlo || b1 > xhi {
			d += int(max(xlo-b0, 0))
			b0, b1 = max(b0, xlo), min(b1, xhi)
			if b0 >= b1 {
				return
			}
		}
		ch := r.at(q, o)
		cy := y / m.Chunk[1]
		lo[1] = y - cy*m.Chunk[1]
		stride := m.nchunks[0] * m.nchunks[1]
		linRow := m.nchunks[0] * cy
		for i, v := range o {
			lo[i+2] = v % m.Chunk[i+2]
			linRow += stride * (v / m.Chunk[i+2])
			stride *= m.nchunks[i+2]
		}
		cw := m.Chunk[0] * m.size // bytes of a chunk's row piece
		j := -1
		for cx := b0 / cw; cx <= (b1-1)/cw; cx++ {
			// Chunks of a row are usually next to each other in the
			// batch: try that before the map.
			if j++; j == 0 || j >= len(batch) || batch[j].lin != linRow+cx {
				j = index[linRow+cx]
			}
			bc := &batch[j]
			s := m.source(bc, ch, lo, fill)
			// The chunk covers row bytes [cx*cw, (cx+1)*cw); copy the part
			// inside [b0, b1), whole elements directly, a partial first or
			// last element through tmp.
			pb0, pb1 := max(b0, cx*cw), min(b1, (cx+1)*cw)
			dst := p[d+int(pb0-b0) : d+int(pb1-b0)]
			e := pb0/m.size - cx*m.Chunk[0] // element within the chunk
			if skip := pb0 % m.size; skip != 0 {
				s.run(tmp[:m.size], e, 1)
				k := copy(dst, tmp[skip:m.size])
				dst = dst[k:]
				e++
			}
			whole := int64(len(dst)) / m.size
			s.run(dst[:whole*m.size], e, whole)
			if rest := dst[whole*m.size:]; len(rest) > 0 {
				s.run(tmp[:m.size], e+whole, 1)
				copy(rest, tmp[:m.size])
			}
		}
	})
	return nil
}

// fill returns the fill value of one sample, little-endian.
func (m *geom) fill(chunks Chunks) ([]byte, error) {
	f := chunks.Fill()
	if int64(len(f)) != m.size {
		return nil, fmt.Errorf("%w: fill value of %d bytes for %v", ErrCorrupt, len(f), m.Type)
	}
	le := make([]byte, len(f))
	copy(le, f)
	if m.BigEndian {
		for i, j := 0, len(le)-1; i < j; i, j = i+1, j-1 {
			le[i], le[j] = le[j], le[i]
		}
	}
	return le, nil
}

// check verifies that a chunk of n bytes holds every element its layout
// promises, so that the copy can index it without further checks.
func (m *geom) check(c []int64, l ChunkLayout, n int) error {
	if len(l.Strides) != m.ndim || len(l.Extent) != m.ndim {
		return fmt.Errorf("%w: chunk %v: layout has %d strides and %d extents for %d axes",
			ErrCorrupt, c, len(l.Strides), len(l.Extent), m.ndim)
	}
	if l.Header < 0 || l.ChannelStride < 0 {
		return fmt.Errorf("%w: chunk %v: negative header or channel stride", ErrCorrupt, c)
	}
	last := l.Header
	for k := range m.ndim {
		ext := min(l.Extent[k], m.Chunk[k])
		if ext <= 0 {
			return nil // no element stored: the chunk reads as fill
		}
		if l.Strides[k] < 0 || l.Strides[k] > int64(n) {
			return fmt.Errorf("%w: chunk %v: stride %d for %d bytes", ErrCorrupt, c, l.Strides[k], n)
		}
		last += l.Strides[k] * (ext - 1)
	}
	if m.chans > 1 {
		if l.ChannelStride > int64(n) {
			return fmt.Errorf("%w: chunk %v: channel stride %d for %d bytes", ErrCorrupt, c, l.ChannelStride, n)
		}
		last += l.ChannelStride * (m.chans - 1)
	}
	if last+m.size > int64(n) {
		return fmt.Errorf("%w: chunk %v: %d bytes, its layout needs %d", ErrCorrupt, c, n, last+m.size)
	}
	return nil
}

// rowSource is one row of one channel of one chunk, ready to copy.
type rowSource struct {
	data   []byte // nil: every element is fill
	base   int64  // byte of element x=0 of the row
	stride int64  // bytes per x step
	ext    int64  // elements stored along x
	size   int64
	swap   bool
	fill   []byte
}

func (m *geom) source(bc *batchChunk, ch int64, lo []int64, fill []byte) rowSource {
	s := rowSource{size: m.size, swap: m.BigEndian && m.size > 1, fill: fill}
	if bc.data == nil {
		return s
	}
	l := bc.lay
	base := l.Header + ch*l.ChannelStride
	for k := 1; k < m.ndim; k++ {
		if lo[k] >= min(l.Extent[k], m.Chunk[k]) {
			return s
		}
		base += lo[k] * l.Strides[k]
	}
	s.data, s.base, s.stride, s.ext = bc.data, base, l.Strides[0], min(l.Extent[0], m.Chunk[0])
	return s
}

// run writes count elements starting at element e of the row into dst
// (len count*size), little-endian.
func (s *rowSource) run(dst []byte, e, count int64) {
	stored := max(0, min(count, s.ext-e))
	if s.data == nil {
		stored = 0
	}
	if stored > 0 {
		src := s.data[s.base+e*s.stride:]
		n := stored * s.size
		switch {
		case s.stride == s.size && !s.swap:
			copy(dst[:n], src)
		case !s.swap:
			for i := int64(0); i < stored; i++ {
				copy(dst[i*s.size:(i+1)*s.size], src[i*s.stride:])
			}
		default:
			swapCopy(dst[:n], src, s.size, s.stride, stored)
		}
	}
	for i := stored; i < count; i++ {
		copy(dst[i*s.size:], s.fill)
	}
}

// swapCopy copies count elements of size bytes, stride bytes apart in src,
// reversing the bytes of each.
func swapCopy(dst, src []byte, size, stride, count int64) {
	switch size {
	case 2:
		for i := int64(0); i < count; i++ {
			a := src[i*stride:]
			d := dst[2*i:]
			d[0], d[1] = a[1], a[0]
		}
	case 4:
		for i := int64(0); i < count; i++ {
			a := src[i*stride:]
			d := dst[4*i:]
			d[0], d[1], d[2], d[3] = a[3], a[2], a[1], a[0]
		}
	default:
		for i := int64(0); i < count; i++ {
			a := src[i*stride : i*stride+size]
			d := dst[i*size : (i+1)*size]
			for j := range size {
				d[j] = a[size-1-j]
			}
		}
	}
}
