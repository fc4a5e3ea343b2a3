package fs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// Sharded object directories (a skeleton directory or an annotation by_id
// index whose info has a "sharding" member) are read through the sharding
// code of the image chunks (decode.Sharding): an object costs the ranged
// reads of the shard index, its minishard index and itself, the indexes
// memoised and shared with every other read of the mount, every object
// pinned to the version first seen (treeSource) as a chunk load is. A
// view lists the ids the minishard indexes of its shard files list,
// without reading an object.

// maxListedObjects bounds the ids a sharded view lists: 8 bytes each held
// while the directory is read.
const maxListedObjects = 1 << 22

// shardRecipe keys the memoised indexes of a sharded object directory:
// its sharding, so that an info edited during the mount never meets an
// index parsed under the old one.
func shardRecipe(sh *decode.Sharding) string { return "objects(" + sh.String() + ")" }

// objectLoad runs fn with a treeSource of its own, as Tree.load runs a
// chunk load: when an object changed between the reads fn made (a shard
// rewritten between its index and an object), the memos fn used and the
// id lists of the objects it read are dropped, and fn runs once more; a
// second change is fn's error, which wraps fetcher.ErrChanged (ESTALE).
func (t *Tree) objectLoad(ctx context.Context, key, recipe string, fn func(src *treeSource) error) error {
	for attempt := 1; ; attempt++ {
		src := &treeSource{t: t, last: key, l: &cache.Load{}, recipe: recipe, began: time.Now()}
		err := fn(src)
		if !errors.Is(err, fetcher.ErrChanged) {
			return err
		}
		for _, m := range src.memos {
			t.memo.Remove(m)
		}
		// A shard read changed: its id list, made from the old
		// version, goes too, though this load did not use it.
		for _, o := range src.seen {
			t.memo.Remove(recipe + "/" + o.Key + idsMemo)
		}
		if attempt == 2 {
			return err
		}
		t.log.Debug("an object changed while it was read from a shard: reading it again", "object", key, "err", err)
	}
}

// readSharded returns the stored bytes of object id of the sharded
// directory dir, at most limit bytes. An id that no shard holds is an
// error wrapping fetcher.ErrNotExist (ENOENT).
func (t *Tree) readSharded(ctx context.Context, dir string, sh *decode.Sharding, id uint64, limit int64) ([]byte, error) {
	var b []byte
	err := t.objectLoad(ctx, dir, shardRecipe(sh), func(src *treeSource) (err error) {
		b, err = sh.Read(ctx, src, dir, id, limit)
		return err
	})
	if errors.Is(err, decode.ErrMissing) {
		return nil, fmt.Errorf("fs: %s: object %d: %w (%w)", dir, id, fetcher.ErrNotExist, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fs: %s: object %d: %w", dir, id, err)
	}
	return b, nil
}

// idsMemo ends the memo key of a shard file's id list: the shard's key,
// then this.
const idsMemo = "#ids"

// shardedIDs lists the object ids of the sharded directory dir, whose
// pass-through listing is l: the ids of every shard file l names, sorted.
// Files that are not shard files of sh are left out. Each shard's ids are
// memoised (8 bytes an id, in the tree's bounded memo, under the
// sharding's recipe) with the shard's identity, as its indexes are: a
// listing again walks no minishard index, and a load that finds the
// shard changed drops the list with the indexes (objectLoad).
func (t *Tree) shardedIDs(ctx context.Context, dir string, sh *decode.Sharding, l Listing) ([]uint64, error) {
	var ids []uint64
	for i := range l.Len() {
		name, isDir := l.Entry(i)
		if _, ok := sh.ShardNumber(name); isDir || !ok {
			continue
		}
		err := t.objectLoad(ctx, dir, shardRecipe(sh), func(src *treeSource) error {
			b, err := src.Memo(ctx, path.Join(dir, name)+idsMemo, func(ctx context.Context) ([]byte, error) {
				got, err := sh.ShardIDs(ctx, src, dir, name, maxListedObjects)
				if err != nil {
					return nil, err
				}
				b := make([]byte, 8*len(got))
				for i, id := range got {
					binary.LittleEndian.PutUint64(b[8*i:], id)
				}
				return b, nil
			})
			if err != nil {
				return err
			}
			if len(ids)+len(b)/8 > maxListedObjects {
				return fmt.Errorf("%w: more than %d objects", decode.ErrCorrupt, maxListedObjects)
			}
			for ; len(b) >= 8; b = b[8:] {
				ids = append(ids, binary.LittleEndian.Uint64(b))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fs: %s: listing %s: %w", dir, name, err)
		}
	}
	// Shards hold disjoint ids (each id hashes to one), so they merge
	// by sorting.
	slices.Sort(ids)
	return ids, nil
}

// idListing lists ids as "<id><ext>" files.
type idListing struct {
	ids []uint64
	ext string
}

func (l idListing) Len() int64 { return int64(len(l.ids)) }
func (l idListing) Entry(i int64) (string, bool) {
	return strconv.FormatUint(l.ids[i], 10) + l.ext, false
}
