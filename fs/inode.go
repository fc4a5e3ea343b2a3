package fs

import (
	"sync"

	"github.com/volfs/volfs/decode"
)

// inoTable gives every node of a mount a stable inode number, so that
// st_ino does not change when the kernel forgets a node and looks it up
// again, and so that concurrent lookups of one name find one go-fuse
// inode (go-fuse dedupes by StableAttr.Ino). Numbers are small (from 2;
// the root is 1), because 32-bit programs that stat an inode number past
// 2^32 fail with EOVERFLOW, and unique, unlike a hash of the path.
//
// A chunk file's number is its array's base plus the chunk's grid index:
// each array reserves NumChunks numbers the first time one of its chunks
// is looked up, so a grid of a million chunks costs one map entry. Every
// other node (directories, metadata, pass-through objects) gets the next
// number the first time its path is looked up, and keeps it for the life
// of the mount. Safe for concurrent use.
type inoTable struct {
	mu     sync.Mutex
	next   uint64                   // GUARDED_BY(mu)
	paths  map[string]uint64        // GUARDED_BY(mu)
	arrays map[*decode.Array]uint64 // GUARDED_BY(mu); first number of the array's chunks
}

func newInoTable() *inoTable {
	return &inoTable{next: 2, paths: make(map[string]uint64), arrays: make(map[*decode.Array]uint64)}
}

// of returns the inode number of node n at path p.
func (m *inoTable) of(n Node, p string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := n.(*chunkFile); ok {
		base, ok := m.arrays[f.a]
		if !ok {
			base = m.next
			m.next += uint64(f.a.NumChunks())
			m.arrays[f.a] = base
		}
		return base + uint64(f.a.Index(f.c))
	}
	ino, ok := m.paths[p]
	if !ok {
		ino = m.next
		m.next++
		m.paths[p] = ino
	}
	return ino
}
