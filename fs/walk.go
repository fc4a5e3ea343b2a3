package fs

import (
	"context"
	"errors"
	"path"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// MaxWalkEntries is the bound of the directory entries one Walk examines
// (WalkBounded's maxEntries): a walk
// for volumes costs what their directories list, never what the arrays'
// grids would, and a source of millions of objects is walked only so far.
// Real trees of volumes hold a few thousand directories above their
// chunks; 2^16 entries is seconds of listing over HTTP.
const MaxWalkEntries = 1 << 16

// WalkSkipped says what a Walk did not look into.
type WalkSkipped struct {
	// Deeper counts the directories other than volumes found at the
	// depth limit, not opened.
	Deeper int64
	// Entries counts the entries of listed directories left unexamined
	// once maxEntries had been.
	Entries int64
	// Dirs counts the directories so left unopened (those listed among
	// the unexamined entries).
	Dirs int64
}

// Any reports whether anything was skipped.
func (s WalkSkipped) Any() bool { return s.Deeper > 0 || s.Entries > 0 }

// WalkBounded calls fn for every directory, at most depth directories
// deep, that holds volume metadata: with the volume, or with the reason
// its metadata was refused (the directory then passes through). It never
// descends into arrays' key directories or their views, and it never
// enumerates an array's grid: in a directory that is itself an array
// (zarr, N5) it looks only at what the source lists there, skipping names
// that are chunk keys. It examines at most maxEntries entries in all, and
// returns what it skipped.
func (t *Tree) WalkBounded(ctx context.Context, depth int, maxEntries int64, fn func(dir string, vol *decode.Volume, refused error)) (WalkSkipped, error) {
	return walkFrom(ctx, t.root, "", depth, maxEntries, fn)
}

// walkFrom is WalkBounded from the directory d at key.
func walkFrom(ctx context.Context, d Dir, key string, depth int, maxEntries int64, fn func(dir string, vol *decode.Volume, refused error)) (WalkSkipped, error) {
	var skipped WalkSkipped
	examined := int64(0)
	var walk func(d Dir, key string, depth int) error
	walk = func(d Dir, key string, depth int) error {
		switch d := d.(type) {
		case *volumeDir:
			fn(key, d.vol, nil)
		case *sourceDir:
			if d.refused != nil {
				fn(key, nil, d.refused)
			}
		case *keyDir, *viewDir:
			return nil
		}
		if depth == 0 {
			if _, ok := d.(*sourceDir); ok {
				skipped.Deeper++
			}
			return nil
		}
		l, keys, err := walkListing(ctx, d)
		if err != nil {
			return err
		}
		for i := range l.Len() {
			if examined >= maxEntries {
				rest := l.Len() - i
				skipped.Entries += rest
				for j := i; j < l.Len(); j++ {
					if _, isDir := l.Entry(j); isDir {
						skipped.Dirs++
					}
				}
				return nil
			}
			examined++
			name, isDir := l.Entry(i)
			if !isDir || keys != nil && keys(name) {
				continue
			}
			child, err := d.Lookup(ctx, name)
			if errors.Is(err, fetcher.ErrPermission) {
				continue // a link the source does not follow: logged once by the fetcher
			}
			if err != nil {
				return err
			}
			if cd, ok := child.(Dir); ok {
				if err := walk(cd, path.Join(key, name), depth-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := walk(d, key, depth)
	return skipped, err
}

// walkListing is what WalkBounded looks at in d: for a volume, the
// source's own listing (not the grid of an array that is the directory
// itself) and a test of the names that are that array's chunk keys; for
// any other directory, its listing.
func walkListing(ctx context.Context, d Dir) (Listing, func(string) bool, error) {
	vd, ok := d.(*volumeDir)
	if !ok {
		l, err := d.List(ctx)
		return l, nil, err
	}
	l, err := vd.rest.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	isKey := func(name string) bool {
		if _, ok := vd.arrays[name]; ok && name != "" {
			return true // a named array: a key directory, not walked
		}
		if self, ok := vd.arrays[""]; ok {
			if _, _, ok := self.a.KeyLookup(self.node, name); ok {
				return true
			}
		}
		return vd.hidden[name]
	}
	return l, isKey, nil
}
