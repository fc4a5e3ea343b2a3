package fuse

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fs"
)

// Inode numbers
//
// inoTable gives every node of a mount an inode number that no other node
// of the mount ever had, so that go-fuse, which takes two lookups with one
// StableAttr.Ino for the same file, can never serve one file's bytes for
// another's. Numbers are small where possible (from 2; the root is 1),
// because 32-bit programs that stat an inode number past 2^32 fail with
// EOVERFLOW.
//
// Numbers are handed out, never derived, and each is handed out once:
//
//   - A chunk file's number is its array's base plus the chunk's grid
//     index. Each array reserves a range of NumChunks numbers the first
//     time one of its chunks is looked up, so a grid of a million chunks
//     costs one map entry. The reservation is checked: only an array of at
//     most maxRange chunks whose range ends below lowLimit gets one.
//   - Every other node (directories, metadata, pass-through objects, and
//     the chunks of an array without a range) takes the next free number
//     below lowLimit the first time its path is looked up (a pass-through
//     object's path and version: fs.ObjectVersion), or, once that
//     space is used up, the next number of the high space [lowLimit,
//     highLimit). The high space is for paths only, so no metadata can
//     exhaust it; a lookup that finds it used up fails (EIO), never
//     reuses a number.
//
// Numbers 0, 1 (the root) and 2^64-1 (which go-fuse reserves, and panics
// on) are never handed out.
//
// A chunk file keeps its number when its node moves to a later generation
// (pages.go: a new version while a handle reads the old one's pages): the
// node is then known by its number and generation, as go-fuse's
// StableAttr has both.
//
// The numbers of paths are remembered in an LRU of maxPaths entries, so
// the table is bounded whatever the mount lists. A path that falls out of
// it and is looked up again gets a new number: unique still, but not the
// one it had. That happens only to nodes the kernel has not asked about
// for a while, beyond the maxPaths most recent; chunk files of arrays with
// ranges, the bulk of any tree, keep theirs for the life of the mount.
const (
	// lowLimit ends the space of ranges and first path numbers.
	lowLimit = 1 << 63
	// highLimit ends the space of path numbers handed out once the low
	// space is used up. go-fuse reserves 2^64-1.
	highLimit = math.MaxUint64 - 1
	// maxRange is the largest grid that reserves a range: a trillion
	// chunks, beyond any real array. Larger grids come only from crafted
	// metadata; their chunks are numbered by path, so that they cannot use
	// up the low space.
	maxRange = 1 << 40
	// maxPaths bounds the paths whose numbers are remembered: about 120
	// bytes each (the path, the LRU's element and map slot).
	maxPaths = 1 << 15
)

// errInoSpace is returned when the high space of inode numbers is used up.
var errInoSpace = errors.New("fs: inode numbers used up")

// inoTable hands out inode numbers; see "Inode numbers" above. Safe for
// concurrent use.
type inoTable struct {
	// Limits, constants except in tests.
	lowLimit, highLimit, maxRange uint64

	mu     sync.Mutex
	next   uint64                         // GUARDED_BY(mu); next free number below lowLimit
	high   uint64                         // GUARDED_BY(mu); next free number of [lowLimit, highLimit)
	arrays map[*decode.Array]uint64       // GUARDED_BY(mu); base of the array's range, 0 for none
	paths  *simplelru.LRU[string, uint64] // GUARDED_BY(mu)
}

func newInoTable() *inoTable { return newInoTableLimits(lowLimit, highLimit, maxRange, maxPaths) }

// newInoTableLimits returns a table with the given limits, for tests.
func newInoTableLimits(low, high, maxRange uint64, maxPaths int) *inoTable {
	paths, err := simplelru.NewLRU[string, uint64](maxPaths, nil)
	if err != nil {
		panic(fmt.Sprintf("fs: inode table: %v", err))
	}
	return &inoTable{
		lowLimit: low, highLimit: high, maxRange: maxRange,
		next: 2, high: low, arrays: make(map[*decode.Array]uint64), paths: paths,
	}
}

// of returns the inode number of node n at path p.
func (m *inoTable) of(n fs.Node, p string) (uint64, error) {
	if v, ok := fs.ObjectVersion(n); ok {
		// A rewritten object is another inode (fs.ObjectVersion).
		p += "\x00" + v
	}
	a, index, _ := fs.GridChunk(n)
	return m.number(a, index, p)
}

// number returns the inode number of the node at path p: the chunk of
// grid index index of a, or when a is nil another node.
func (m *inoTable) number(a *decode.Array, index int64, p string) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a != nil {
		base, ok := m.arrays[a]
		if !ok {
			base = m.reserve(uint64(a.NumChunks()))
			m.arrays[a] = base
		}
		if base != 0 {
			return base + uint64(index), nil
		}
	}
	if ino, ok := m.paths.Get(p); ok {
		return ino, nil
	}
	ino, err := m.one()
	if err != nil {
		return 0, fmt.Errorf("fs: %s: %w", p, err)
	}
	m.paths.Add(p, ino)
	return ino, nil
}

// reserve returns the first of n consecutive numbers below lowLimit, or 0
// when n is over maxRange or the numbers left are too few.
//
// REQUIRES: m.mu held.
func (m *inoTable) reserve(n uint64) uint64 {
	end, carry := bits.Add64(m.next, n, 0)
	if n == 0 || n > m.maxRange || carry != 0 || end > m.lowLimit {
		return 0
	}
	base := m.next
	m.next = end
	return base
}

// one returns a number never handed out before: below lowLimit while any
// is left, then from the high space.
//
// REQUIRES: m.mu held.
func (m *inoTable) one() (uint64, error) {
	if m.next < m.lowLimit {
		m.next++
		return m.next - 1, nil
	}
	if m.high < m.highLimit {
		m.high++
		return m.high - 1, nil
	}
	return 0, errInoSpace
}
