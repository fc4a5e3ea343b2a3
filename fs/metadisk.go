package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
)

// Metadata on disk
//
// A tree with a disk cache (Options.Disk) keeps there, besides decoded
// chunks, what it read to build itself: each metadata object it fetched
// (info, .zarray, .zattrs, zarr.json, attributes.json, .zmetadata, their
// ".gz" siblings) as stored, with its identity (fetcher.Identity: ETag,
// generation, or size and times) and transport encoding; the answer that
// such an object does not exist; and each directory listing (or the
// answer that the source cannot list). `volfs warm` builds a tree, so it
// keeps everything the paths it warms needed; it also keeps the answer
// that a chunk object does not exist (getChunk), so that a chunk it found
// missing reads as the fill value with the origin gone.
//
// While the origin answers, these copies are never read: metadata comes
// from the origin, and what it says is written over the copy, so a
// metadata object that changed at the origin is served as it is now, and
// its copy replaced. When the origin cannot be reached at all (the
// fetcher's retries ran out on a transient failure: refused or reset
// connections, DNS, timeouts, 5xx; never a 404 or a 403), the copy is
// served unchecked instead, under the rule of the disk cache's chunks
// (see offline): the tree takes the origin as unreachable for
// offlineFor, logs that once, and reads metadata from disk first
// meanwhile. Nothing that has no copy is made up: a metadata read or a
// listing with no copy fails as the origin made it fail, and a chunk that
// was not warmed reads as EIO, never as the fill value.
//
// An object whose identity the source does not give (an HTTP server
// without ETag or Last-Modified) is not kept, as its chunks are not. A
// listing of more than maxMetadataBytes encoded is not kept.

// Entry kinds, the first field of a kept entry's identity record.
const (
	metaObject      = "object"      // an object's bytes
	metaAbsent      = "absent"      // no such object (or directory)
	metaListing     = "listing"     // a directory's entries
	metaUnsupported = "unsupported" // the source cannot list
)

// metaKey names a kept metadata entry in the disk cache: the source, two
// NULs (no chunk's tierKey has them: keys are clean), what it is, and the
// object or directory key.
func (t *Tree) metaKey(what, key string) string {
	return t.src.String() + "\x00\x00" + what + "\x00" + key
}

// getMeta is t.src.Get of a metadata object, kept on disk and served from
// there when the origin cannot be reached; see "Metadata on disk".
func (t *Tree) getMeta(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	d := t.opts.Disk
	if d == nil {
		return t.src.Get(ctx, key, limit)
	}
	dkey := t.metaKey("get", key)
	if t.ids.offline.active() {
		if obj, err, ok := t.diskObject(dkey, key, limit); ok {
			return obj, err
		}
	}
	obj, err := t.src.Get(ctx, key, limit)
	switch {
	case err == nil && obj.ID.Known():
		t.keepMeta(dkey, encodeSeen([]seen{{metaObject, obj.ID}, {"encoding", fetcher.Identity(obj.ContentEncoding)}}), obj.Data)
	case errors.Is(err, fetcher.ErrNotExist):
		t.keepMeta(dkey, encodeSeen([]seen{{metaAbsent, ""}}), nil)
	case err != nil && ctx.Err() == nil && errors.Is(err, fetcher.ErrTransient):
		if kept, kerr, ok := t.diskObject(dkey, key, limit); ok {
			t.ids.failed(err)
			return kept, kerr
		}
	}
	return obj, err
}

// getChunk is t.src.Get of a chunk object (or shard): chunks are kept
// decoded by the chunk store's tiers, not here, but a warm (Tree.warming)
// keeps the answer that one does not exist, so that with the origin gone
// a chunk that warm found missing reads as the fill value, as it did,
// instead of EIO; see "Metadata on disk".
func (t *Tree) getChunk(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	if t.opts.Disk == nil {
		return t.src.Get(ctx, key, limit)
	}
	dkey := t.metaKey("get", key)
	keptAbsent := func() (error, bool) {
		_, err, ok := t.diskObject(dkey, key, limit)
		return err, ok && errors.Is(err, fetcher.ErrNotExist)
	}
	if t.ids.offline.active() {
		if err, ok := keptAbsent(); ok {
			return fetcher.Object{}, err
		}
	}
	obj, err := t.src.Get(ctx, key, limit)
	switch {
	case errors.Is(err, fetcher.ErrNotExist) && t.warming.Load():
		t.keepMeta(dkey, encodeSeen([]seen{{metaAbsent, ""}}), nil)
	case err != nil && ctx.Err() == nil && errors.Is(err, fetcher.ErrTransient):
		if kerr, ok := keptAbsent(); ok {
			t.ids.failed(err)
			return fetcher.Object{}, kerr
		}
	}
	return obj, err
}

// diskObject returns the kept answer of a Get of key, whose entry is dkey:
// the object, or an error wrapping ErrNotExist; ok is false when none is
// kept.
func (t *Tree) diskObject(dkey, key string, limit int64) (obj fetcher.Object, err error, ok bool) {
	var rec []seen
	data, ok := t.opts.Disk.GetUpTo(dkey, limit, func(ident []byte) error {
		var good bool
		if rec, good = decodeSeen(ident); !good || len(rec) == 0 {
			return fmt.Errorf("fs: unreadable metadata entry: %w", errStaleMeta)
		}
		return nil
	})
	if !ok {
		return fetcher.Object{}, nil, false
	}
	switch {
	case rec[0].key == metaAbsent:
		return fetcher.Object{}, fmt.Errorf("fs: %s/%s: %w (as kept on disk; the origin cannot be reached)", t.src, key, fetcher.ErrNotExist), true
	case rec[0].key == metaObject && len(rec) == 2:
		return fetcher.Object{Data: data, ContentEncoding: string(rec[1].id), ID: rec[0].id}, nil, true
	}
	return fetcher.Object{}, nil, false
}

// listMeta is t.src.List of a directory, kept on disk and served from
// there when the origin cannot be reached; see "Metadata on disk".
func (t *Tree) listMeta(ctx context.Context, key string) ([]fetcher.Entry, error) {
	d := t.opts.Disk
	if d == nil {
		return t.src.List(ctx, key)
	}
	dkey := t.metaKey("list", key)
	if t.ids.offline.active() {
		if entries, err, ok := t.diskListing(dkey, key); ok {
			return entries, err
		}
	}
	entries, err := t.src.List(ctx, key)
	switch {
	case err == nil:
		if b, ok := encodeEntries(entries); ok {
			t.keepMeta(dkey, encodeSeen([]seen{{metaListing, ""}}), b)
		}
	case errors.Is(err, fetcher.ErrNotExist):
		t.keepMeta(dkey, encodeSeen([]seen{{metaAbsent, ""}}), nil)
	case errors.Is(err, fetcher.ErrNotSupported):
		t.keepMeta(dkey, encodeSeen([]seen{{metaUnsupported, ""}}), nil)
	case ctx.Err() == nil && errors.Is(err, fetcher.ErrTransient):
		if kept, kerr, ok := t.diskListing(dkey, key); ok {
			t.ids.failed(err)
			return kept, kerr
		}
	}
	return entries, err
}

// diskListing returns the kept answer of a List of key, whose entry is
// dkey; ok is false when none is kept.
func (t *Tree) diskListing(dkey, key string) (entries []fetcher.Entry, err error, ok bool) {
	var kind string
	data, ok := t.opts.Disk.GetUpTo(dkey, maxMetadataBytes, func(ident []byte) error {
		rec, good := decodeSeen(ident)
		if !good || len(rec) == 0 {
			return fmt.Errorf("fs: unreadable listing entry: %w", errStaleMeta)
		}
		kind = rec[0].key
		return nil
	})
	if !ok {
		return nil, nil, false
	}
	switch kind {
	case metaAbsent:
		return nil, fmt.Errorf("fs: list %s/%s: %w (as kept on disk; the origin cannot be reached)", t.src, key, fetcher.ErrNotExist), true
	case metaUnsupported:
		return nil, fmt.Errorf("fs: list %s/%s: %w (as kept on disk; the origin cannot be reached)", t.src, key, fetcher.ErrNotSupported), true
	case metaListing:
		if entries, good := decodeEntries(data); good {
			return entries, nil, true
		}
	}
	return nil, nil, false
}

// errStaleMeta marks a kept metadata entry that cannot be read: the disk
// cache deletes it.
var errStaleMeta = fmt.Errorf("fs: metadata entry: %w", cache.ErrStale)

// keepMeta writes the entry dkey, unless the disk cache holds it already
// with the same record and bytes (a mount that reads unchanged metadata
// rewrites nothing). A failed write is counted by the disk cache.
func (t *Tree) keepMeta(dkey string, ident, data []byte) {
	d := t.opts.Disk
	if int64(len(data)) > maxMetadataBytes {
		return
	}
	t.metaKept.Store(dkey, struct{}{})
	same := false
	old, ok := d.GetUpTo(dkey, maxMetadataBytes, func(id []byte) error {
		same = bytes.Equal(id, ident)
		return nil
	})
	if ok && same && bytes.Equal(old, data) {
		return
	}
	_ = d.Put(dkey, ident, data)
}

// encodeEntries writes a listing as, per entry, the name's length
// (uvarint), the name, 1 for a directory or 0, and the size plus one
// (uvarint: 0 for unknown). It reports false past maxMetadataBytes.
func encodeEntries(entries []fetcher.Entry) ([]byte, bool) {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.Name)))
		b = append(b, e.Name...)
		dir := byte(0)
		if e.IsDir {
			dir = 1
		}
		b = append(b, dir)
		b = binary.AppendUvarint(b, uint64(e.Size+1))
		if len(b) > maxMetadataBytes {
			return nil, false
		}
	}
	return b, true
}

// decodeEntries reads what encodeEntries wrote.
func decodeEntries(b []byte) ([]fetcher.Entry, bool) {
	var entries []fetcher.Entry
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n >= uint64(len(b)-k) {
			return nil, false
		}
		name := string(b[k : k+int(n)])
		b = b[k+int(n):]
		dir := b[0] == 1
		size, k := binary.Uvarint(b[1:])
		if k <= 0 || size > 1<<62 {
			return nil, false
		}
		b = b[1+k:]
		entries = append(entries, fetcher.Entry{Name: name, IsDir: dir, Size: int64(size) - 1})
	}
	return entries, true
}

// TouchMetadata marks every metadata entry the tree has kept on disk as
// just used, so that the chunks a warm wrote after them do not push them
// out of the disk cache first (it evicts the least recently used).
func (t *Tree) TouchMetadata() {
	if t.opts.Disk == nil {
		return
	}
	t.metaKept.Range(func(k, _ any) bool {
		t.opts.Disk.GetUpTo(k.(string), maxMetadataBytes, func([]byte) error { return nil })
		return true
	})
}
