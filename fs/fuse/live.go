package fuse

import (
	"math"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Files the kernel knows
//
// go-fuse keeps an inode (its own, ours, the chunk file's state: about a
// kilobyte) for every file the kernel has looked up, until the kernel
// sends FORGET, which it does only when it evicts the entry itself: under
// memory pressure, often never. So `ls -l` or a program that stats every
// file of a directory of 2^26 chunk files would hold 2^26 of them, and
// keep them after it ended. liveFiles bounds them: it remembers the
// maxLiveFiles files looked up last, and for each file pushed out it asks
// the kernel to drop the entry (FUSE_NOTIFY_INVAL_ENTRY), after which the
// kernel forgets the inode once nobody uses it and go-fuse lets it go. An
// open file keeps working; its name is looked up again at the next open,
// which for a chunk file costs no I/O (its size is in the metadata) and
// keeps its inode number. What the kernel had cached of the file's pages
// goes with the inode.
//
// The kernel takes the directory's lock to drop an entry, and holds it
// shared while it waits for the answer to a lookup in that directory: a
// request handler that dropped an entry itself could wait for its own
// request. So entries are dropped on a goroutine of their own, never by a
// handler, which only queues them.
//
// Directories are bounded the same way, in the same LRU: a zarr array
// with nested keys ("c/0/1/2") or a source of many directories makes one
// directory inode per name a walk looks up, and `find` over 2^16 of them
// held them all. Dropping a directory's entry lets the kernel forget the
// entries below it too; a process whose working directory it is keeps
// it, and a path through it is looked up again (no I/O for key
// directories, which are computed from the metadata).
//
// maxLiveFiles is 8192: about 8 MiB of inodes, and more files than most
// reader holds open.
const maxLiveFiles = 1 << 13

// maxPendingDrops bounds the entries queued to be dropped. The queue only
// grows while the kernel holds the directory's lock for lookups, which
// then wait for the drop, so it stays short; should it fill, the oldest
// queued entries are left to the kernel's own eviction.
const maxPendingDrops = 1 << 16

// liveFiles is the LRU of files the kernel holds; see "Files the kernel
// knows". Safe for concurrent use.
type liveFiles struct {
	max int

	mu      sync.Mutex
	lru     *simplelru.LRU[uint64, liveFile] // GUARDED_BY(mu); by inode number
	pending []liveFile                       // GUARDED_BY(mu); pushed out, to be dropped
	wake    chan struct{}                    // a token when pending is not empty
}

// liveFile is a file or directory looked up: its directory, name and
// node (a *fileInode or a *dirInode).
type liveFile struct {
	dir  *dirInode
	name string
	node any
}

func newLiveFiles(max int) *liveFiles {
	lru, _ := simplelru.NewLRU[uint64, liveFile](math.MaxInt, nil)
	return &liveFiles{max: max, lru: lru, wake: make(chan struct{}, 1)}
}

// add records that the kernel looked up f, numbered ino, and queues the
// files it pushes out to be dropped. It never blocks on the kernel.
func (l *liveFiles) add(ino uint64, f liveFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lru.Add(ino, f)
	for l.lru.Len() > l.max {
		_, old, _ := l.lru.RemoveOldest()
		if len(l.pending) >= maxPendingDrops {
			l.pending = l.pending[1:]
		}
		l.pending = append(l.pending, old)
	}
	if len(l.pending) > 0 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// forget removes node, numbered ino, which go-fuse has let go.
func (l *liveFiles) forget(ino uint64, node any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.lru.Peek(ino); ok && f.node == node {
		l.lru.Remove(ino)
	}
}

// run drops the entries queued until stop is closed.
func (l *liveFiles) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-l.wake:
		}
		for {
			l.mu.Lock()
			batch := l.pending
			l.pending = nil
			l.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, f := range batch {
				// ENOENT: the kernel had dropped it already.
				f.dir.NotifyEntry(f.name)
			}
		}
	}
}

// start runs the dropping of entries for the mount served by srv, until it
// is unmounted.
func (l *liveFiles) start(srv *fuse.Server) {
	stop := make(chan struct{})
	go func() {
		srv.Wait()
		close(stop)
	}()
	go l.run(stop)
}

// len returns the number of files remembered.
func (l *liveFiles) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
