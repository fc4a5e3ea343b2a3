package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/volfs/volfs/decode/ngobj"
	"github.com/volfs/volfs/fetcher"
)

// SkeletonView names the directory beside a precomputed segmentation's
// pass-through directories that shows each object of its "skeletons"
// directory as an SWC file "<id>.swc" (package decode/ngobj).
const SkeletonView = "skeletons.swc"

// maxObjectBytes bounds the stored size of one skeleton object read for a
// view: what a conversion may hold in memory is a small multiple of it.
const maxObjectBytes = 256 << 20

// objectViews returns the derived object views of a precomputed volume
// directory, by name: none for another format, or a segmentation without
// a "skeletons" key naming a directory inside it.
func (d *volumeDir) objectViews() map[string]bool {
	if d.vol.Format != "precomputed" {
		return nil
	}
	var info struct {
		Skeletons string `json:"skeletons"`
	}
	if json.Unmarshal(d.vol.Original, &info) != nil || !localName(info.Skeletons) {
		return nil
	}
	return map[string]bool{SkeletonView: true}
}

// localName reports whether a directory named in an info file is a
// relative path inside the layer's directory: not absolute, no URL, no "..".
func localName(s string) bool {
	if s == "" || strings.HasPrefix(s, "/") || strings.Contains(s, "://") {
		return false
	}
	for _, e := range strings.Split(s, "/") {
		if e == ".." || e == "." || e == "" {
			return false
		}
	}
	return true
}

// objectView looks up the view called name in d.
func (d *volumeDir) objectView(ctx context.Context, name string) (Node, error) {
	var info struct {
		Skeletons string `json:"skeletons"`
	}
	_ = json.Unmarshal(d.vol.Original, &info)
	key := path.Join(d.vol.Dir, info.Skeletons)
	n, err := d.rest.Lookup(ctx, info.Skeletons)
	if err != nil {
		return nil, err
	}
	src, ok := n.(Dir)
	if !ok {
		return nil, fmt.Errorf("fs: %s: skeletons is not a directory: %w", key, fetcher.ErrNotExist)
	}
	return &skeletonDir{t: d.t, key: key, src: src}, nil
}

// skeletonDir is the SWC view of a neuroglancer_skeletons directory. It
// lists one "<id>.swc" per object of the directory whose name is a
// segment id, from the directory's listing, without reading an object.
// Sharded skeleton directories are not converted yet: their view is empty.
type skeletonDir struct {
	t   *Tree
	key string // the skeleton directory's key
	src Dir    // the skeleton directory as the source shows it

	once sync.Once
	info *ngobj.SkeletonInfo
	err  error
}

func (d *skeletonDir) IsDir() bool { return true }

// skelInfo reads and parses the skeleton directory's info once.
func (d *skeletonDir) skelInfo(ctx context.Context) (*ngobj.SkeletonInfo, error) {
	d.once.Do(func() {
		key := path.Join(d.key, "info")
		obj, objKey, err := d.t.fetchMeta(context.WithoutCancel(ctx), key, maxMetadataBytes)
		if err != nil {
			d.err = err
			return
		}
		data, err := untransport(obj, objKey, 1<<20, maxMetadataBytes)
		if err == nil {
			d.info, err = ngobj.ParseSkeletonInfo(data)
		}
		if err != nil {
			d.err = fmt.Errorf("fs: %s: %w", key, err)
		}
	})
	return d.info, d.err
}

// Lookup reads the object "<id>" and converts it, so that the file's size
// is known at stat: a skeleton file is converted once per lookup and held
// by its node as decoded bytes are (an inode the kernel keeps converts
// once).
func (d *skeletonDir) Lookup(ctx context.Context, name string) (Node, error) {
	id, ok := strings.CutSuffix(name, ".swc")
	if !ok || !isSegmentID(id) {
		return nil, fmt.Errorf("fs: %s/%s: %w", d.key, name, fetcher.ErrNotExist)
	}
	si, err := d.skelInfo(ctx)
	if err != nil {
		return nil, err
	}
	if si.Sharding != nil && string(si.Sharding) != "null" {
		return nil, fmt.Errorf("fs: %s: sharded skeletons not converted: %w", d.key, fetcher.ErrNotExist)
	}
	key := path.Join(d.key, id)
	obj, objKey, err := d.t.fetchBy(ctx, key, maxObjectBytes, d.t.src.Get)
	if err != nil {
		return nil, err
	}
	data, err := untransport(obj, objKey, 0, maxObjectBytes)
	if err == nil {
		var swc []byte
		if swc, err = ngobj.SkeletonSWC(si, "/"+key, data); err == nil {
			return bytesFile(swc), nil
		}
	}
	return nil, fmt.Errorf("fs: %s: %w", key, err)
}

// isSegmentID reports whether s is a segment id as an object name: a
// decimal uint64 without sign or leading zeros.
func isSegmentID(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil && (s == "0" || s[0] != '0')
}

func (d *skeletonDir) List(ctx context.Context) (Listing, error) {
	si, err := d.skelInfo(ctx)
	if err != nil {
		return nil, err
	}
	if si.Sharding != nil && string(si.Sharding) != "null" {
		return entryListing(nil), nil
	}
	l, err := d.src.List(ctx)
	if err != nil {
		return nil, err
	}
	var ids []int64 // indexes into l of the objects named by a segment id
	for i := range l.Len() {
		if name, isDir := l.Entry(i); !isDir && isSegmentID(name) {
			ids = append(ids, i)
		}
	}
	return skeletonListing{l, ids}, nil
}

type skeletonListing struct {
	l   Listing
	ids []int64
}

func (s skeletonListing) Len() int64 { return int64(len(s.ids)) }
func (s skeletonListing) Entry(i int64) (string, bool) {
	name, _ := s.l.Entry(s.ids[i])
	return name + ".swc", false
}
