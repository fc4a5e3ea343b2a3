package fs

import (
	"context"
	"errors"
	"fmt"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// Node is an entry of the tree: a Dir or a File.
type Node interface {
	// IsDir reports whether the node is a Dir.
	IsDir() bool
}

// Dir is a directory of the tree.
type Dir interface {
	Node
	// Lookup returns the child called name; an error wrapping
	// fetcher.ErrNotExist when there is none.
	Lookup(ctx context.Context, name string) (Node, error)
	// List returns the children. Listing a source that cannot list (an
	// HTTP server without an index) returns what the metadata tells.
	List(ctx context.Context) (Listing, error)
}

// Listing is a directory's children, addressed by index so that a listing
// of a million generated names need not exist in memory.
type Listing interface {
	Len() int64
	// Entry returns the name of the i-th child, 0 <= i < Len, and whether
	// it is a directory.
	Entry(i int64) (name string, isDir bool)
}

// File is a regular file of the tree. Its bytes are those of one version
// of the source per Handle (docs/CONSISTENCY.md): a chunk file read
// through a File, not a Handle, reads what memory holds at each read.
type File interface {
	Node
	Size() int64
	// ReadAt reads len(p) bytes at off, or fewer at the end of the file,
	// with io.ReaderAt's contract except that a read at the end returns
	// 0, nil.
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// GridChunk reports whether n is the file of one chunk of a grid, and if
// so its array and the chunk's grid index (decode.Array.Index): what the
// FUSE adapter numbers its inode by, so that a chunk file keeps its
// st_ino when the kernel forgets it and looks it up again.
func GridChunk(n Node) (a *decode.Array, index int64, ok bool) {
	f, ok := n.(*chunkFile)
	if !ok {
		return nil, 0, false
	}
	return f.a, f.a.Index(f.c), true
}

// slicer is a File whose bytes live in memory: slice returns them without a
// copy, for the FUSE read path. The result must not be modified.
type slicer interface {
	slice(ctx context.Context, off, n int64) ([]byte, error)
}

// opener is a File that can fail at open, before any read.
type opener interface {
	open(ctx context.Context) error
}

// lender is a File whose reads can lend memory the tree holds instead of
// copying it (Handle.ReadPieces).
type lender interface {
	lend(ctx context.Context, p []byte, off int64) (pieces [][]byte, release func(), err error)
}

// holder is a File that keeps work going for its open handles (an
// object's window of parts in flight): hold is called at each open that
// succeeded and drop at its close, so that the work stops with the last
// handle rather than when it next times out.
type holder interface {
	hold()
	drop()
}

// object returns the pass-through file at key; size -1 means unknown, and
// id is the version the size was taken from (a listing's), when known. A
// group's metadata file (groupMetadata) is read whole at once through the
// metadata path, which keeps it on disk and serves it from there with the
// origin gone (groupObject).
func (t *Tree) object(ctx context.Context, key string, size int64, id fetcher.Identity) (Node, error) {
	if n, err, ok := t.groupObject(ctx, key); ok {
		return n, err
	}
	if size < 0 {
		var err error
		if size, id, err = t.src.Stat(ctx, key); err != nil {
			return nil, err
		}
	}
	f := &objectFile{t: t, key: key, size: size}
	f.parts.id = id
	return f, nil
}

// ObjectVersion reports whether n is a pass-through object, and if so names
// the version of it that n shows: its size and identity. A rewritten object
// is a new node with another version, which the FUSE adapter numbers as
// another inode, so that the kernel drops the entry, attributes and page
// cache of the old one when it looks the name up again (after
// --metadata-ttl), while handles open on the old node keep reading it.
func ObjectVersion(n Node) (string, bool) {
	f, ok := n.(*objectFile)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d %s", f.size, f.parts.version()), true
}

// objectFile is an object shown byte for byte, every read of it pinned to
// the version and size its size was taken from (parts.go). A remote object
// read in order is read in ranged parts, many in flight (parts.go); from a
// server that ignores Range, in one stream (fetcher.Streamer, stream.go);
// any other read, and every read of a handle for one piece of it
// (Tree.OpenRange), is a ranged read of its own bytes (readPlain). It also
// carries the window of a large chunk read in parts (chunkparts.go),
// whose reads that fail its version check go back to the chunk's own path.
type objectFile struct {
	t      *Tree
	key    string
	size   int64
	parts  objectParts
	stream objectStream
}

func (f *objectFile) IsDir() bool { return false }

func (f *objectFile) hold() { f.parts.hold() }

func (f *objectFile) drop() {
	if f.parts.drop(f) {
		f.stream.end()
	}
}

func (f *objectFile) Size() int64 { return f.size }

// ReadAt reads the version of the object that f shows; once the object
// has been rewritten at the source, an error wrapping fetcher.ErrChanged
// (ESTALE) that says when a new open sees the new version.
func (f *objectFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	pieces, release, err := f.lend(ctx, p, off)
	k := 0
	for _, b := range pieces {
		if len(b) > 0 && &b[0] != &p[k] {
			copy(p[k:], b)
		}
		k += len(b)
	}
	if release != nil {
		release()
	}
	return k, err
}

// explain says, of an error wrapping fetcher.ErrChanged, when a new open
// sees the new version. An object not found by a read is one deleted at
// the source since the file was looked up (or opened, for a chunk read in
// parts): a change too (ESTALE), not ENOENT, which read(2) never means.
func (f *objectFile) explain(err error) error {
	if errors.Is(err, fetcher.ErrNotExist) {
		err = fmt.Errorf("fs: %s: deleted at the source (%v): %w", f.key, err, fetcher.ErrChanged)
	}
	if !errors.Is(err, fetcher.ErrChanged) {
		return err
	}
	if ttl := f.t.opts.MetadataTTL; ttl > 0 {
		return fmt.Errorf("%w (rewritten at the source after this file was looked up: a file opened again once --metadata-ttl %v has passed reads the new version)", err, ttl)
	}
	return fmt.Errorf("%w (rewritten at the source after this file was looked up: the mount reads its source as unchanging with --metadata-ttl 0; mount again, or mount with --metadata-ttl, to read the new version)", err)
}

// lend reads the bytes at off for a front end that can write pieces of
// memory to its client (lender), or for ReadAt, which copies them into
// p: a read served by the window of parts returns the parts' own bytes,
// held until release is called; any other read fills p and returns it,
// with nothing to release. A local object is one pread per read (nothing
// to wait for); a remote one read in order is read in ranged parts
// (parts.go), or from a server that ignores Range in one stream
// (stream.go); any other read is a ranged read of its own bytes.
func (f *objectFile) lend(ctx context.Context, p []byte, off int64) ([][]byte, func(), error) {
	if off < f.size && !f.t.local {
		q := p[:min(int64(len(p)), f.size-off)]
		if !f.t.ignoresRange() {
			if pieces, release, ok, err := f.parts.lend(ctx, f, off, int64(len(q))); ok {
				return pieces, release, f.explain(err)
			}
		} else if st, ok := f.t.src.(fetcher.Streamer); ok && !f.parts.isNamed() {
			// Not a chunk's window: its stream takes a reply that names no
			// version, which may not follow bytes of the version proved.
			if k, ok := f.stream.read(fetcher.WithVersion(ctx, f.key, f.parts.version()), st, f.key, q, off, f.parts.continues(off)); ok {
				return [][]byte{q[:k]}, nil, nil
			}
		}
	}
	k, err := f.readPlain(ctx, p, off)
	return [][]byte{p[:k]}, nil, err
}

// readPlain reads p at off, or fewer bytes at the end of the file, with
// one read of its own and no window of parts: a local pread, or a ranged
// read pinned to the file's version and size. It serves every read that
// lend does not serve from a window or a stream, and a handle's reads of
// one piece of the file (Tree.OpenRange).
func (f *objectFile) readPlain(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), f.size-off)]
	if f.t.local {
		b, _, err := f.t.src.GetRange(ctx, f.key, off, int64(len(p)))
		return copy(p, b), f.explain(err)
	}
	k, err := f.readRange(ctx, p, off)
	return k, f.explain(err)
}

// readRange reads p at off with one ranged read, pinned to the file's
// version.
func (f *objectFile) readRange(ctx context.Context, p []byte, off int64) (int, error) {
	b, got, err := f.t.src.GetRange(f.pin(ctx, f.parts.version()), f.key, off, int64(len(p)))
	if err == nil && len(p) > 0 {
		err = f.parts.adopt(f.key, got)
	}
	if err != nil {
		return 0, f.parts.changed(err)
	}
	return copy(p, b), nil
}

// pin returns ctx with reads of the object pinned to the version id and
// to the file's size: a reply that tells of another size (an object
// longer or shorter under the same ETag) is ErrChanged too.
func (f *objectFile) pin(ctx context.Context, id fetcher.Identity) context.Context {
	return fetcher.WithSize(fetcher.WithVersion(ctx, f.key, id), f.key, f.size)
}

// bytesFile is a file held in memory (rewritten metadata).
type bytesFile []byte

func (f bytesFile) IsDir() bool { return false }

func (f bytesFile) Size() int64 { return int64(len(f)) }

func (f bytesFile) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off >= int64(len(f)) {
		return 0, nil
	}
	return copy(p, f[off:]), nil
}

func (f bytesFile) slice(_ context.Context, off, n int64) ([]byte, error) {
	if off >= int64(len(f)) {
		return nil, nil
	}
	return f[off:min(off+n, int64(len(f)))], nil
}
