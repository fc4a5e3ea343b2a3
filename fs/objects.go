package fs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/decode/ngobj"
	"github.com/volfs/volfs/fetcher"
)

// The derived object views beside a precomputed segmentation's
// pass-through directories (package decode/ngobj converts):
//
//	skeletons.swc/<id>.swc  each object of the directory the info's
//	                        "skeletons" key names, as SWC
//	mesh.obj/<id>.obj       each legacy mesh of the "mesh" directory, its
//	mesh.ply/<id>.ply       fragments merged, as OBJ and binary PLY
//
// A view lists one file per object, from the source directory's listing
// (skeleton objects named by a segment id, meshes by their manifest
// "<id>:0") or, for sharded skeletons, from the minishard indexes of the
// shard files it lists (objshard.go), without reading an object. A file
// is converted when it is looked up, so that stat knows its size; the
// node holds the converted bytes like a decoded value, so an inode the
// kernel keeps converts once.
// Multi-resolution (Draco) meshes are not converted: their views are
// empty and their directories pass through.
const (
	SkeletonView = "skeletons.swc"
	MeshOBJView  = "mesh.obj"
	MeshPLYView  = "mesh.ply"
)

// maxObjectBytes bounds the stored size of one object (a skeleton, a mesh
// fragment, all fragments of one mesh together) read for a view: what a
// conversion holds in memory is a small multiple of it.
const maxObjectBytes = 256 << 20

// objectDirNames returns the directories a precomputed info names by its
// "skeletons" and "mesh" members, by member ("" when absent or null),
// each read on its own: a member that is not a string is in bad with
// why, and does not hide the other (an info whose "mesh" was 5 lost its
// skeletons too).
func objectDirNames(original []byte) (names, bad map[string]string) {
	var info struct {
		Skeletons json.RawMessage `json:"skeletons"`
		Mesh      json.RawMessage `json:"mesh"`
	}
	names, bad = map[string]string{}, map[string]string{}
	if json.Unmarshal(original, &info) != nil {
		return names, bad
	}
	for member, raw := range map[string]json.RawMessage{"skeletons": info.Skeletons, "mesh": info.Mesh} {
		var s *string
		if err := json.Unmarshal(raw, &s); len(raw) > 0 && err != nil {
			bad[member] = fmt.Sprintf("%q: want a directory name, got %.40s", member, raw)
		} else if s != nil {
			names[member] = *s
		}
	}
	return names, bad
}

// objectViews returns the derived object views of a precomputed volume
// directory, by view name, each with the directory it converts: none for
// another format, nor for a key that does not name a directory inside
// the layer.
func (d *volumeDir) objectViews() map[string]string {
	if d.vol.Format != "precomputed" {
		return nil
	}
	names, _ := objectDirNames(d.vol.Original)
	v := map[string]string{}
	if localName(names["skeletons"]) {
		v[SkeletonView] = names["skeletons"]
	}
	if localName(names["mesh"]) {
		v[MeshOBJView], v[MeshPLYView] = names["mesh"], names["mesh"]
	}
	return v
}

// localName reports whether a name from an info file or a manifest is a
// relative path inside its directory: not absolute, no URL, no "..".
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

// objectView opens the view called name, converting the directory dir.
func (d *volumeDir) objectView(ctx context.Context, name, dir string) (Node, error) {
	key := path.Join(d.vol.Dir, dir)
	n, err := d.rest.Lookup(ctx, dir)
	if err != nil {
		return nil, err
	}
	src, ok := n.(Dir)
	if !ok {
		return nil, fmt.Errorf("fs: %s: not a directory: %w", key, fetcher.ErrNotExist)
	}
	return &objectDir{t: d.t, view: name, key: key, src: src}, nil
}

// objectDir is one derived view of an object directory.
type objectDir struct {
	t    *Tree
	view string // SkeletonView, MeshOBJView or MeshPLYView
	key  string // the object directory's key
	src  Dir    // the object directory as the source shows it

	once  sync.Once
	skel  *ngobj.SkeletonInfo // for SkeletonView
	shard *decode.Sharding    // the skeletons' sharding; nil when each is an object
	off   bool                // a layout not converted: the view is empty
	err   error
}

func (d *objectDir) IsDir() bool { return true }

// ext is the extension of the view's files.
func (d *objectDir) ext() string { return d.view[strings.IndexByte(d.view, '.'):] }

// info reads the object directory's info once: a skeleton info, which a
// skeleton view needs, or a mesh info, which may be absent for legacy
// meshes. It reports whether the view converts.
func (d *objectDir) info(ctx context.Context) (bool, error) {
	d.once.Do(func() {
		key := path.Join(d.key, "info")
		var data []byte
		obj, objKey, err := d.t.fetchMeta(context.WithoutCancel(ctx), key, maxMetadataBytes)
		if err == nil {
			data, err = untransport(obj, objKey, 1<<20, maxMetadataBytes)
		}
		if d.view != SkeletonView {
			if errors.Is(err, fetcher.ErrNotExist) {
				return // legacy meshes need no info
			}
			var mi struct {
				Type string `json:"@type"`
			}
			if err == nil {
				err = json.Unmarshal(data, &mi)
			}
			d.off = mi.Type != "" && mi.Type != "neuroglancer_legacy_mesh"
		} else if err == nil {
			d.skel, err = ngobj.ParseSkeletonInfo(data)
			if err == nil && decode.ShardingGiven(d.skel.Sharding) {
				d.shard, err = decode.ParseSharding(d.skel.Sharding)
			}
		}
		if err != nil {
			d.err = fmt.Errorf("fs: %s: %w", key, err)
		}
	})
	return !d.off, d.err
}

// Lookup reads the object of "<id><ext>" and converts it.
func (d *objectDir) Lookup(ctx context.Context, name string) (Node, error) {
	id, ok := strings.CutSuffix(name, d.ext())
	if !ok || !isSegmentID(id) {
		return nil, fmt.Errorf("fs: %s/%s: %w", d.key, name, fetcher.ErrNotExist)
	}
	on, err := d.info(ctx)
	if err != nil {
		return nil, err
	}
	if !on {
		return nil, fmt.Errorf("fs: %s: a layout %s does not convert: %w", d.key, d.view, fetcher.ErrNotExist)
	}
	if d.view == SkeletonView {
		key := path.Join(d.key, id)
		var data []byte
		if d.shard != nil {
			n, _ := strconv.ParseUint(id, 10, 64)
			data, err = d.t.readSharded(ctx, d.key, d.shard, n, maxObjectBytes)
		} else {
			data, err = d.get(ctx, key, maxObjectBytes)
		}
		if err != nil {
			return nil, err
		}
		swc, err := ngobj.SkeletonSWC(d.skel, "/"+key, data)
		if err != nil {
			return nil, fmt.Errorf("fs: %s: %w", key, err)
		}
		return bytesFile(swc), nil
	}
	m, err := d.mesh(ctx, id)
	if err != nil {
		return nil, err
	}
	man := "/" + path.Join(d.key, id+":0")
	if d.view == MeshOBJView {
		return bytesFile(m.OBJ(man)), nil
	}
	return bytesFile(m.PLY(man)), nil
}

// get reads the object at key (or its ".gz" sibling), at most limit bytes
// stored and decoded.
func (d *objectDir) get(ctx context.Context, key string, limit int64) ([]byte, error) {
	obj, objKey, err := d.t.fetchBy(ctx, key, limit, d.t.src.Get)
	if err != nil {
		return nil, err
	}
	return untransport(obj, objKey, 0, int(limit))
}

// mesh reads the manifest of id and merges its fragments, refusing a
// fragment name outside the mesh directory and more than maxObjectBytes
// of fragments in all.
func (d *objectDir) mesh(ctx context.Context, id string) (*ngobj.Mesh, error) {
	key := path.Join(d.key, id+":0")
	data, err := d.get(ctx, key, maxMetadataBytes)
	if err != nil {
		return nil, err
	}
	frags, err := ngobj.ParseManifest("/"+key, data)
	if err != nil {
		return nil, fmt.Errorf("fs: %s: %w", key, err)
	}
	var m ngobj.Mesh
	left := int64(maxObjectBytes)
	for _, f := range frags {
		if !localName(f) {
			return nil, fmt.Errorf("fs: %s: fragment %q outside the mesh directory: %w", key, f, ngobj.ErrCorrupt)
		}
		fkey := path.Join(d.key, f)
		b, err := d.get(ctx, fkey, left)
		if err != nil {
			if errors.Is(err, fetcher.ErrNotExist) {
				return nil, fmt.Errorf("fs: %s: fragment %s missing: %w", key, fkey, ngobj.ErrCorrupt)
			}
			return nil, err
		}
		left -= int64(len(b))
		if err := m.AddLegacyFragment("/"+fkey, b); err != nil {
			return nil, fmt.Errorf("fs: %s: %w", key, err)
		}
	}
	return &m, nil
}

// isSegmentID reports whether s is a segment id as an object name: a
// decimal uint64 without sign or leading zeros.
func isSegmentID(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil && (s == "0" || s[0] != '0')
}

// List lists one file per object from the object directory's listing.
func (d *objectDir) List(ctx context.Context) (Listing, error) {
	on, err := d.info(ctx)
	if err != nil {
		return nil, err
	}
	if !on {
		return entryListing(nil), nil
	}
	l, err := d.src.List(ctx)
	if err != nil {
		return nil, err
	}
	if d.shard != nil {
		ids, err := d.t.shardedIDs(ctx, d.key, d.shard, l)
		if err != nil {
			return nil, err
		}
		return idListing{ids, d.ext()}, nil
	}
	var ids []int64 // indexes into l of the objects
	for i := range l.Len() {
		if name, isDir := l.Entry(i); !isDir && d.objectID(name) != "" {
			ids = append(ids, i)
		}
	}
	return objectListing{d, l, ids}, nil
}

// objectID returns the segment id of the object called name in the object
// directory, "" when it is not one the view shows.
func (d *objectDir) objectID(name string) string {
	if d.view != SkeletonView {
		id, ok := strings.CutSuffix(name, ":0")
		if !ok {
			return ""
		}
		name = id
	}
	if !isSegmentID(name) {
		return ""
	}
	return name
}

type objectListing struct {
	d   *objectDir
	l   Listing
	ids []int64
}

func (s objectListing) Len() int64 { return int64(len(s.ids)) }
func (s objectListing) Entry(i int64) (string, bool) {
	name, _ := s.l.Entry(s.ids[i])
	return s.d.objectID(name) + s.d.ext(), false
}

// AnnotationCSV names the file in a neuroglancer_annotations_v1 directory
// that shows its annotations as CSV, one row per object of the by_id
// index (decode/ngobj AnnotationInfo.Header and Row say the columns): in
// listing order when unsharded; by id when sharded, the objects of each
// shard file read in runs of few requests (decode.Sharding.ShardObjects).
// It is built when looked up, reading every annotation, at most maxAnnotations
// of them and maxObjectBytes in all. A by_id index whose sharding volfs
// does not read is not converted: no file is shown, and a line is logged.
const AnnotationCSV = "annotations.csv"

const maxAnnotations = 1 << 20

// maxAnnotationBytes bounds the stored bytes of all annotations that one
// annotations.csv reads: maxObjectBytes, a variable so that tests can
// lower it.
var maxAnnotationBytes int64 = maxObjectBytes

// annotationState is what a source directory knows of its annotation
// info: looked up once, except after an error other than a missing info,
// so that listing a directory costs no request for it after the first.
// mu is held across that one fetch, so that concurrent listers share it.
type annotationState struct {
	mu   sync.Mutex
	done bool                  // GUARDED_BY(mu)
	ai   *ngobj.AnnotationInfo // GUARDED_BY(mu)
}

// annotationInfo returns the annotation info of d, nil when d is not an
// annotation directory whose by_id index volfs reads.
func (d *sourceDir) annotationInfo(ctx context.Context) *ngobj.AnnotationInfo {
	d.ann.mu.Lock()
	defer d.ann.mu.Unlock()
	if d.ann.done {
		return d.ann.ai
	}
	key := path.Join(d.key, "info")
	obj, objKey, err := d.t.fetchMeta(ctx, key, maxMetadataBytes)
	if err != nil {
		d.ann.done = errors.Is(err, fetcher.ErrNotExist)
		return nil
	}
	d.ann.done = true
	data, err := untransport(obj, objKey, 1<<20, maxMetadataBytes)
	if err != nil || !ngobj.IsAnnotationInfo(data) {
		return nil
	}
	ai, err := ngobj.ParseAnnotationInfo(data)
	if err != nil {
		d.t.log.Warn("annotation info not converted", "object", "/"+key, "err", err)
		return nil
	}
	if !localName(ai.ByID.Key) {
		return nil
	}
	if decode.ShardingGiven(ai.ByID.Sharding) {
		if _, err := decode.ParseSharding(ai.ByID.Sharding); err != nil {
			d.t.log.Warn("annotation info not converted", "object", "/"+key, "err", fmt.Errorf("by_id.%w", err))
			return nil
		}
	}
	d.ann.ai = ai
	return ai
}

// annotationCSV builds the CSV of d's annotations.
func (d *sourceDir) annotationCSV(ctx context.Context, ai *ngobj.AnnotationInfo) (Node, error) {
	n, err := d.Lookup(ctx, ai.ByID.Key)
	if err != nil {
		return nil, err
	}
	byID, ok := n.(Dir)
	if !ok {
		return nil, fmt.Errorf("fs: %s: by_id is not a directory: %w", path.Join(d.key, ai.ByID.Key), ngobj.ErrCorrupt)
	}
	l, err := byID.List(ctx)
	if err != nil {
		return nil, err
	}
	if decode.ShardingGiven(ai.ByID.Sharding) {
		return d.shardedAnnotationCSV(ctx, ai, l)
	}
	var rows [][]string
	left := maxAnnotationBytes
	tooMany := func() error {
		return fmt.Errorf("fs: %s: more than %d annotations or %d bytes: %w", d.key, maxAnnotations, maxAnnotationBytes, ngobj.ErrCorrupt)
	}
	for i := range l.Len() {
		name, isDir := l.Entry(i)
		if isDir || !isSegmentID(name) {
			continue
		}
		key := path.Join(d.key, ai.ByID.Key, name)
		if len(rows) == maxAnnotations || left <= 0 {
			return nil, tooMany()
		}
		obj, objKey, err := d.t.fetchBy(ctx, key, min(left, 1<<20), d.t.src.Get)
		if err != nil {
			return nil, err
		}
		b, err := untransport(obj, objKey, 0, 1<<20)
		if err != nil {
			return nil, err
		}
		// A transport encoding undone may make b larger than its
		// stored bound: checked before it counts.
		if int64(len(b)) > left {
			return nil, tooMany()
		}
		left -= int64(len(b))
		row, err := ai.Row(name, b)
		if err != nil {
			return nil, fmt.Errorf("fs: %s: %w", key, err)
		}
		rows = append(rows, row)
	}
	return bytesFile(ngobj.CSV(ai.Header(), rows)), nil
}

// shardedAnnotationCSV builds the CSV of d's annotations from its sharded
// by_id index, whose pass-through listing is l: shard by shard, the
// objects of each read in runs (decode.Sharding.ShardObjects), the rows
// sorted by id.
func (d *sourceDir) shardedAnnotationCSV(ctx context.Context, ai *ngobj.AnnotationInfo, l Listing) (Node, error) {
	sh, err := decode.ParseSharding(ai.ByID.Sharding)
	if err != nil {
		return nil, fmt.Errorf("fs: %s: by_id.%w", d.key, err)
	}
	dir := path.Join(d.key, ai.ByID.Key)
	type row struct {
		id     uint64
		fields []string
	}
	var rows []row
	left := maxAnnotationBytes
	for i := range l.Len() {
		name, isDir := l.Entry(i)
		if _, ok := sh.ShardNumber(name); isDir || !ok {
			continue
		}
		var got []row
		var spent int64
		err := d.t.objectLoad(ctx, dir, shardRecipe(sh), func(src *treeSource) error {
			got, spent = got[:0], 0
			return sh.ShardObjects(ctx, src, dir, name, 1<<20, func(id uint64, b []byte) error {
				if len(rows)+len(got) == maxAnnotations || spent+int64(len(b)) > left {
					return fmt.Errorf("fs: %s: more than %d annotations or %d bytes: %w", d.key, maxAnnotations, maxAnnotationBytes, ngobj.ErrCorrupt)
				}
				spent += int64(len(b))
				f, err := ai.Row(strconv.FormatUint(id, 10), b)
				if err != nil {
					return fmt.Errorf("annotation %d: %w", id, err)
				}
				got = append(got, row{id, f})
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("fs: %s: %w", path.Join(dir, name), err)
		}
		left -= spent
		rows = append(rows, got...)
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	fields := make([][]string, len(rows))
	for i, r := range rows {
		fields[i] = r.fields
	}
	return bytesFile(ngobj.CSV(ai.Header(), fields)), nil
}
