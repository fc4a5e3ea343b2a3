package fuse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// Kernel cache settings for immutable data; see the package documentation.
const (
	entryTimeout    = time.Hour
	attrTimeout     = time.Hour
	negativeTimeout = 10 * time.Minute
	// maxRead is the largest read the kernel sends (MaxWrite also sets the
	// read size in go-fuse): one request can carry a whole 1 MiB chunk.
	maxRead = 1 << 20
	// blockSize is reported as st_blksize, the buffer size cat, cp and
	// Python pick for their reads. It serves the reader, not FUSE's
	// request size: GNU cat allocates a fresh buffer of st_blksize per
	// file, and a 1 MiB one is mapped and faulted page by page for every
	// small chunk, which made a warm-page-cache cat of many chunks 3-5x
	// slower than with 128 KiB (docs/PERFORMANCE.md, issue 31). The
	// kernel still merges its page-cache fills into maxRead requests.
	blockSize = 128 << 10
)

// MountOptions configures Mount.
type MountOptions struct {
	// AllowOther lets users other than the one who mounts read the mount.
	// The kernel then checks permissions (default_permissions) against
	// the modes the mount shows: for a local source, each file's and
	// directory's own read and execute bits (see permissions), so that a
	// file of mode 0600 stays private to its owner; for other sources,
	// 0444 and 0555.
	AllowOther bool
	UID, GID   uint32 // owner shown for every file
	Debug      bool   // log every FUSE request
	// DirectIO serves reads of files (chunks and views) without the
	// kernel's page cache (FOPEN_DIRECT_IO), as rclone's --direct-io
	// does: every read comes to volfs and is answered from the chunk
	// cache, so decoded bytes are held once rather than twice and a first
	// read skips filling page-cache pages, at the price of repeated small
	// reads each making a round trip. Shared mmap still works on kernels
	// that grant FUSE_DIRECT_IO_ALLOW_MMAP (6.6 and later).
	DirectIO bool
	// Passthrough lets the kernel read a chunk stored verbatim in a local
	// source from the source file itself (FUSE passthrough), where the
	// kernel and privileges allow and no cache tier is set. Off by default:
	// the kernel then reads the file as it is, so a file rewritten in place
	// during a read gives old and new bytes mixed, which a read through
	// volfs (one version per load) never does; a file replaced by a rename
	// is read whole from one version.
	Passthrough bool
	// NoDiskPassthrough keeps chunks of the disk cache (the tree's
	// Options.Disk) from passing through. By default, where the kernel
	// and privileges allow, the disk cache keeps chunks uncompressed, each
	// in a data file of its own, and the kernel reads a chunk kept there
	// from that file (fs.Tree.DiskBacking).
	NoDiskPassthrough bool
	// PassthroughMinSize is the smallest file that passes through (either
	// kind above); smaller ones are served by volfs. Passthrough saves
	// the READ round trips of a file, and costs a backing file registered
	// at every open (two ioctls and the backing's checks): a file that one
	// READ serves (FUSE reads are at most 1 MiB here) has no round trip to
	// save, and a second read of it, a page-cache hit without
	// passthrough, pays the registration each time. Measured on chunks of
	// the disk cache (docs/PERFORMANCE.md, "A size floor for
	// passthrough"): 64 KiB and 256 KiB chunks read 1.3-1.7x slower warm
	// and no faster cold with passthrough, 2 and 4 MiB ones 1.5-2.3x
	// faster cold and as fast warm. 0 passes every file through.
	PassthroughMinSize int64
}

// Mount serves t at mountpoint and returns the running server; call its
// Unmount to stop, Wait to block until it is unmounted. As root it mounts
// directly; otherwise through fusermount3. A mountpoint inside a local
// source, or a local source inside the mountpoint, is refused: serving it
// would make the server read its own mount and deadlock.
func Mount(mountpoint string, t *fs.Tree, opts MountOptions) (*fuse.Server, error) {
	return mount(mountpoint, t, opts)
}

// tree is what the adapter asks of the tree it serves: *Tree's exported
// methods, so that tests can serve a tree of nodes of their own.
type tree interface {
	Root() fs.Dir
	Source() fetcher.Fetcher
	Options() fs.Options
	OpenAs(ctx context.Context, f fs.File, p string, r fs.Reader) (*fs.Handle, error)
	Errno(ctx context.Context, err error, op, p string) syscall.Errno
	Current(ctx context.Context, f fs.File, version string) bool
	RecordCurrent(ctx context.Context, r *fs.ChunkRecord) bool
}

func mount(mountpoint string, t tree, opts MountOptions) (*fuse.Server, error) {
	if err := checkOutsideSource(mountpoint, t.Source()); err != nil {
		return nil, err
	}
	topts := t.Options()
	ino := &inodes{tree: t, opts: opts, mtime: time.Now(), inos: newInoTable(), live: newLiveFiles(maxLiveFiles)}
	ino.tgids.proc = "/proc"
	var caps uint64
	if opts.DirectIO {
		caps |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	}
	mountOpts := []string{"ro"}
	if opts.AllowOther {
		ino.modes, _ = t.Source().(fetcher.Local)
		mountOpts = append(mountOpts, "default_permissions")
	}
	root := ino.newDir(t.Root(), "")
	et, at, nt := entryTimeout, attrTimeout, negativeTimeout
	if ttl := topts.MetadataTTL; ttl > 0 {
		et, at, nt = min(et, ttl), min(at, ttl), min(nt, ttl)
	}
	srv, err := gofs.Mount(mountpoint, root, &gofs.Options{
		EntryTimeout:    &et,
		AttrTimeout:     &at,
		NegativeTimeout: &nt,
		UID:             opts.UID,
		GID:             opts.GID,
		// go-fuse numbers from 2^63 by default; 32-bit programs that stat
		// such an inode fail with EOVERFLOW.
		FirstAutomaticIno: 2,
		MountOptions: fuse.MountOptions{
			FsName:        t.Source().String(),
			Name:          "volfs",
			AllowOther:    opts.AllowOther,
			Options:       mountOpts,
			MaxWrite:      maxRead,
			MaxReadAhead:  maxRead,
			MaxBackground: 64,
			// Granted by kernels that know it; others ignore it.
			ExtraCapabilities: caps,
			// Reads are answered from memory; splicing buys nothing and
			// costs a pipe per request.
			DisableSplice: true,
			// READDIRPLUS would stat every entry of a listing: a storm on a
			// directory of a million chunks.
			DisableReadDirPlus:   true,
			DisableXAttrs:        true,
			IgnoreSecurityLabels: true,
			DirectMount:          os.Geteuid() == 0,
			Debug:                opts.Debug,
			PanicHandler: func(r any) fuse.Status {
				topts.Log.Error(fmt.Sprintf("panic in a FUSE handler: %v", r))
				return fuse.EIO
			},
		},
	})
	if err != nil {
		return nil, err
	}
	ino.live.start(srv)
	ino.pass.Store(probePassthrough(srv, t, opts))
	return srv, nil
}

// checkOutsideSource refuses a mountpoint at or below the root of a local
// source src, and a local source at or below the mountpoint (which the
// mount would hide from the server that reads it), both with symbolic
// links resolved.
func checkOutsideSource(mountpoint string, src fetcher.Fetcher) error {
	local, ok := src.(fetcher.Local)
	if !ok {
		return nil
	}
	return CheckApart(local.Root(), mountpoint)
}

// CheckApart refuses a mountpoint at or below the local source directory
// root, and a root at or below the mountpoint, with symbolic links
// resolved: serving either would make volfs read its own mount. It does no
// I/O beyond resolving the two paths.
func CheckApart(root, mountpoint string) error {
	abs, err := filepath.Abs(mountpoint)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return fmt.Errorf("fs: mountpoint %s: %w", mountpoint, err)
	}
	src := root
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return fmt.Errorf("fs: source %s: %w", src, err)
	}
	if within(abs, root) {
		return fmt.Errorf("fs: mountpoint %s is inside the source %s; mount it elsewhere", mountpoint, root)
	}
	if within(root, abs) {
		return fmt.Errorf("fs: source %s is inside the mountpoint %s, which would hide it; mount it elsewhere", root, mountpoint)
	}
	return nil
}

// within reports whether the clean absolute path p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// inodes holds what every node of one mount shares.
type inodes struct {
	tree  tree
	opts  MountOptions
	mtime time.Time     // shown for every file: the data has no other
	modes fetcher.Local // the source's modes, shown with AllowOther; nil for 0444/0555
	inos  *inoTable
	live  *liveFiles // nil when not mounted (tests)
	tgids tgidCache
	// pass says whether opens pass files through; set once the mount
	// is up (nil before: none do).
	pass atomic.Pointer[passthrough]
	// gens are the generations of the files moved on (pages.go).
	gens generations
}

func (m *inodes) newDir(d fs.Dir, p string) *dirInode { return &dirInode{m: m, dir: d, path: p} }

// attr fills out for the node n at path p. It fails only when the node's
// permissions cannot be read.
func (m *inodes) attr(ctx context.Context, n fs.Node, p string, out *fuse.Attr) error {
	f, isFile := n.(fs.File)
	perm, err := m.permissions(ctx, p, !isFile)
	if err != nil {
		return err
	}
	out.Mode = fuse.S_IFDIR | perm
	out.Nlink = 2
	if isFile {
		out.Mode = fuse.S_IFREG | perm
		out.Nlink = 1
		out.Size = uint64(f.Size())
		out.Blocks = (out.Size + 511) / 512
	}
	out.Owner = fuse.Owner{Uid: m.opts.UID, Gid: m.opts.GID}
	out.Blksize = blockSize
	out.SetTimes(&m.mtime, &m.mtime, &m.mtime)
	return nil
}

// permissions returns the permission bits shown for the node at path p:
// 0555 for a directory and 0444 for a file, or, when the mount shows the
// source's modes, the read and execute bits of the source's own file or
// directory at p. A file the source does not hold under its own name takes
// them from the object it stands for (p+".gz", or p without ".orig"), and
// failing that from its nearest directory in the source, without execute
// bits: a missing chunk (read as zeros) and the stitched views follow
// their scale's directory. A source that refuses the stat shows no
// permissions at all.
func (m *inodes) permissions(ctx context.Context, p string, isDir bool) (uint32, error) {
	if m.modes == nil {
		if isDir {
			return 0o555, nil
		}
		return 0o444, nil
	}
	candidates := []string{p}
	if !isDir {
		candidates = append(candidates, p+".gz")
		if orig, ok := strings.CutSuffix(p, fs.OrigSuffix); ok {
			candidates = append(candidates, orig)
		}
	}
	for dir := p; dir != ""; {
		if dir = path.Dir(dir); dir == "." {
			dir = ""
		}
		candidates = append(candidates, dir)
	}
	for _, key := range candidates {
		mode, err := m.modes.Mode(ctx, key)
		switch {
		case errors.Is(err, fetcher.ErrNotExist), errors.Is(err, fetcher.ErrInvalidKey):
			continue
		case errors.Is(err, fetcher.ErrPermission):
			return 0, nil
		case err != nil:
			return 0, err
		}
		perm := uint32(mode.Perm() & 0o555)
		if mode.IsDir() != isDir {
			// A file shown for a directory of the source (or the
			// reverse): reading is what the source allows; searching a
			// directory goes with reading it.
			perm &= 0o444
			if isDir {
				perm |= perm >> 2
			}
		}
		return perm, nil
	}
	return 0, fmt.Errorf("fs: %s: no permissions in the source: %w", p, fetcher.ErrNotExist)
}

// dirInode serves a Dir.
type dirInode struct {
	gofs.Inode
	m    *inodes
	dir  fs.Dir
	path string
}

var (
	_ gofs.NodeLookuper    = (*dirInode)(nil)
	_ gofs.NodeReaddirer   = (*dirInode)(nil)
	_ gofs.NodeGetattrer   = (*dirInode)(nil)
	_ gofs.NodeOnForgetter = (*dirInode)(nil)
)

// OnForget tells the mount's liveFiles that go-fuse let the directory go.
func (n *dirInode) OnForget() {
	if n.m.live != nil {
		n.m.live.forget(n.StableAttr().Ino, n)
	}
}

func (n *dirInode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	p := path.Join(n.path, name)
	child, err := n.dir.Lookup(ctx, name)
	if err != nil {
		return nil, n.m.tree.Errno(ctx, err, "lookup", p)
	}
	if err := n.m.attr(ctx, child, p, &out.Attr); err != nil {
		return nil, n.m.tree.Errno(ctx, err, "lookup", p)
	}
	ino, err := n.m.inos.of(child, p)
	if err != nil {
		return nil, n.m.tree.Errno(ctx, err, "lookup", p)
	}
	out.Attr.Ino = ino
	if d, ok := child.(fs.Dir); ok {
		dn := n.m.newDir(d, p)
		if n.m.live != nil {
			n.m.live.add(ino, liveFile{dir: n, name: name, node: dn})
		}
		return n.NewInode(ctx, dn, gofs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino}), 0
	}
	f := &fileInode{m: n.m, file: child.(fs.File), path: p}
	if n.m.live != nil {
		n.m.live.add(ino, liveFile{dir: n, name: name, node: f})
	}
	// A file moved to a later generation is another node (pages.go).
	return n.NewInode(ctx, f, gofs.StableAttr{Mode: fuse.S_IFREG, Ino: ino, Gen: n.m.gens.of(ino)}), 0
}

func (n *dirInode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	l, err := n.dir.List(ctx)
	if err != nil {
		return nil, n.m.tree.Errno(ctx, err, "readdir", n.path)
	}
	return &dirStream{l: l, n: l.Len(), i: -2}, 0
}

func (n *dirInode) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if err := n.m.attr(ctx, n.dir, n.path, &out.Attr); err != nil {
		return n.m.tree.Errno(ctx, err, "getattr", n.path)
	}
	return 0
}

// dirStream generates directory entries as the kernel reads them, after
// "." and "..", which the kernel does not add.
type dirStream struct {
	l fs.Listing
	n int64 // l.Len(), asked once: a listing's length is fixed, and a concatenation's costs a call per part
	i int64 // index of the next entry; -2 and -1 are "." and ".."
}

func (s *dirStream) HasNext() bool { return s.i < s.n }
func (s *dirStream) Close()        {}

func (s *dirStream) Next() (fuse.DirEntry, syscall.Errno) {
	if s.i < 0 {
		s.i++
		return fuse.DirEntry{Name: [...]string{".", ".."}[s.i+1], Mode: fuse.S_IFDIR}, 0
	}
	name, isDir := s.l.Entry(s.i)
	s.i++
	mode := uint32(fuse.S_IFREG)
	if isDir {
		mode = fuse.S_IFDIR
	}
	return fuse.DirEntry{Name: name, Mode: mode}, 0
}

// fileInode serves a File.
type fileInode struct {
	gofs.Inode
	m    *inodes
	file fs.File
	path string
	// failed is the last read that failed with EIO, so that the kernel's
	// re-read of it fails at once (failureMemory).
	failed failedRange
	// modes counts the open handles by passthrough mode (passthrough.go).
	modes modes
	// pages is the version of the kernel's cached pages (pages.go).
	pages pages
}

var (
	_ gofs.NodeOpener      = (*fileInode)(nil)
	_ gofs.NodeReader      = (*fileInode)(nil)
	_ gofs.NodeGetattrer   = (*fileInode)(nil)
	_ gofs.NodeFlusher     = (*fileInode)(nil)
	_ gofs.NodeReleaser    = (*fileInode)(nil)
	_ gofs.NodeOnForgetter = (*fileInode)(nil)
)

// OnForget tells the mount's liveFiles and generations that go-fuse let
// the file go.
func (n *fileInode) OnForget() {
	if n.m.live != nil {
		n.m.live.forget(n.StableAttr().Ino, n)
	}
	n.m.gens.forget(n.StableAttr().Ino, n)
}

// Open opens the file as the tree's Handle, for the calling process: the
// FUSE request names the calling thread, whose thread group (tgidCache)
// is the reader that read-ahead follows across the files it opens. An
// open of a chunk file whose kernel pages are of a version no longer
// current while a handle reads through them fails with ESTALE, and moves
// the file to its next generation, which the kernel's retry of the open
// finds (pages.go); one made by a way the kernel cannot look up again
// once the file has moved reads past the pages.
func (n *fileInode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		return nil, 0, syscall.EROFS
	}
	h, err := n.m.tree.OpenAs(ctx, n.file, n.path, n.m.reader(ctx))
	if err != nil {
		return nil, 0, n.m.tree.Errno(ctx, err, "open", n.path)
	}
	out := n.m.openFlags()
	if !n.m.opts.DirectIO {
		var ok bool
		if out, ok = n.pages.open(ctx, n.m.tree, n.file, h, out); !ok {
			if n.m.gens.moved(n.StableAttr()) {
				// Moved on already, yet opened: by a way the kernel
				// cannot look up again (pages.openPast).
				out = n.pages.openPast(h, n.m.openFlags())
			} else {
				h.Close()
				n.m.gens.move(n.StableAttr(), n)
				return nil, 0, syscall.ESTALE
			}
		}
	}
	return n.m.pass.Load().open(ctx, n.m.tree, n.file, h, &n.modes), out, 0
}

// reader is the reader of the FUSE request of ctx: its thread group and
// thread, or 0 for a request that names no caller.
func (m *inodes) reader(ctx context.Context) fs.Reader {
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return fs.Reader{}
	}
	return fs.Reader{Process: m.tgids.of(caller.Pid), Thread: caller.Pid}
}

// openFlags are the FUSE open flags of every file: the page cache kept
// across opens, or bypassed with MountOptions.DirectIO. A chunk file's
// open drops its pages when they are of a version no longer current
// (pages.go).
func (m *inodes) openFlags() uint32 {
	if m.opts.DirectIO {
		return fuse.FOPEN_DIRECT_IO
	}
	return fuse.FOPEN_KEEP_CACHE
}

// Release closes a handle. A reader's read-ahead is not stopped with its
// handle: the next chunk file it opens continues the sequence. It stops
// when the reader is idle (cache.IdleAfter).
func (n *fileInode) Release(_ context.Context, fh gofs.FileHandle) syscall.Errno {
	if h, ok := handleOf(fh); ok {
		n.pages.close(h)
	}
	release(fh)
	return 0
}

// Read reads through the handle that Open returned (Handle.Read: the
// bytes are handed to go-fuse without a copy when the tree holds them),
// and remembers a failure for the kernel's re-read (failureMemory).
func (n *fileInode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if errno := n.failed.recent(off, int64(len(dest))); errno != 0 {
		return nil, errno
	}
	h, ok := handleOf(fh)
	var closeAfter func() // the handle opened for this read, closed once go-fuse wrote the reply
	if !ok {
		// go-fuse reads only through the handle Open returned; a read
		// without one is served as a first open would be. The reply may
		// be the chunk the handle holds, which its Close gives back.
		var err error
		if h, err = n.m.tree.OpenAs(ctx, n.file, n.path, n.m.reader(ctx)); err != nil {
			return nil, n.m.tree.Errno(ctx, err, "read", n.path)
		}
		closeAfter = h.Close
	}
	pieces, release, err := h.ReadPieces(ctx, dest, off)
	if closeAfter != nil {
		if release == nil {
			release = closeAfter
		} else {
			first := release
			release = func() { first(); closeAfter() }
		}
	}
	if err == nil && !n.m.opts.DirectIO {
		if err = n.pages.read(h, n.path); err != nil && release != nil {
			release()
		}
	}
	if err != nil {
		if closeAfter != nil {
			closeAfter() // a second Close does nothing
		}
		errno := n.m.tree.Errno(ctx, err, "read", n.path)
		if errno == syscall.EIO {
			n.failed.remember(off, int64(len(dest)), errno)
		}
		return nil, errno
	}
	if release == nil && len(pieces) == 1 {
		return fuse.ReadResultData(pieces[0]), 0
	}
	return newLent(pieces, release), 0
}

// lent is a reply written from memory the tree lends (fs.Handle.ReadPieces):
// go-fuse writes its pieces to /dev/fuse with one writev (Slices; it
// never flattens a result that has them) and calls Done once the kernel
// has taken them, which lets the tree have its memory back.
type lent struct {
	pieces  [][]byte
	size    int
	release func()
}

// newLent returns the reply of pieces, which release gives back (nil:
// nothing to give back). An empty reply gives them back at once: go-fuse
// calls Done only for a reply with bytes.
func newLent(pieces [][]byte, release func()) fuse.ReadResult {
	size := 0
	for _, b := range pieces {
		size += len(b)
	}
	if size == 0 {
		if release != nil {
			release()
		}
		return fuse.ReadResultData(nil)
	}
	return &lent{pieces: pieces, size: size, release: release}
}

// Slices is go-fuse's scatter-gather reply: the pieces as they are.
func (r *lent) Slices() ([][]byte, fuse.Status) { return r.pieces, fuse.OK }

// Bytes flattens the pieces into buf, for a go-fuse path without
// scatter-gather.
func (r *lent) Bytes(buf []byte) ([]byte, fuse.Status) {
	if len(buf) < r.size {
		buf = make([]byte, r.size)
	}
	k := 0
	for _, b := range r.pieces {
		k += copy(buf[k:], b)
	}
	return buf[:k], fuse.OK
}

func (r *lent) Size() int { return r.size }

// Done gives the pieces back; go-fuse calls it once, after the write.
func (r *lent) Done() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

func (n *fileInode) Getattr(ctx context.Context, _ gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if err := n.m.attr(ctx, n.file, n.path, &out.Attr); err != nil {
		return n.m.tree.Errno(ctx, err, "getattr", n.path)
	}
	return 0
}

// Flush answers ENOSYS, which the kernel takes as success and as a sign to
// send no more FLUSH requests: a read-only file has nothing to flush, and
// every close saves a round trip.
func (n *fileInode) Flush(context.Context, gofs.FileHandle) syscall.Errno { return syscall.ENOSYS }
