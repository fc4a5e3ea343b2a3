package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/decode/ngobj"
	"github.com/volfs/volfs/fetcher"
)

// ObjectDir describes one object directory of a precomputed segmentation
// (the directories its info's "skeletons" and "mesh" keys name), for
// `volfs info`.
type ObjectDir struct {
	Dir  string // the directory's key
	Type string // its info's "@type", or the type its key implies when it has none
	// Sharding describes its neuroglancer_uint64_sharded_v1 sharding
	// (decode.Sharding.String), "" when each object is a file.
	Sharding string
	// Views names the views that convert it, space separated; "" when
	// none does, and Note then says why.
	Views string
	Note  string
}

// ObjectDirs returns the object directories of the precomputed volume v,
// reading each one's info: none for another format. A directory whose
// info cannot be read or parsed is returned with the error as its Note.
func (t *Tree) ObjectDirs(ctx context.Context, v *decode.Volume) []ObjectDir {
	if v.Format != "precomputed" {
		return nil
	}
	names, bad := objectDirNames(v.Original)
	var out []ObjectDir
	for _, o := range []struct{ dir, kind string }{{names["skeletons"], "skeletons"}, {names["mesh"], "mesh"}} {
		if why, ok := bad[o.kind]; ok {
			out = append(out, ObjectDir{Dir: path.Join(v.Dir, "info"), Note: "not converted: " + why})
			continue
		}
		if o.dir == "" {
			continue
		}
		od := ObjectDir{Dir: path.Join(v.Dir, o.dir)}
		if !localName(o.dir) {
			od.Dir, od.Note = o.dir, "not converted: not a directory inside the layer"
			out = append(out, od)
			continue
		}
		t.describeObjectDir(ctx, &od, o.kind)
		out = append(out, od)
	}
	return out
}

// describeObjectDir fills od from the info of od.Dir, an object directory
// of kind "skeletons" or "mesh", as objectDir.info decides what converts.
func (t *Tree) describeObjectDir(ctx context.Context, od *ObjectDir, kind string) {
	key := path.Join(od.Dir, "info")
	obj, objKey, err := t.fetchMeta(ctx, key, maxMetadataBytes)
	var data []byte
	if err == nil {
		data, err = untransport(obj, objKey, 1<<20, maxMetadataBytes)
	}
	var info struct {
		Type     string          `json:"@type"`
		Sharding json.RawMessage `json:"sharding"`
	}
	switch {
	case kind == "mesh" && errors.Is(err, fetcher.ErrNotExist):
		od.Type, od.Views = "neuroglancer_legacy_mesh (no info)", MeshOBJView+" "+MeshPLYView
		return
	case err == nil:
		err = json.Unmarshal(data, &info)
	}

	if err != nil {
		od.Note = fmt.Sprintf("not converted: %s: %v", key, err)
		return
	}
	od.Type = info.Type
	if decode.ShardingGiven(info.Sharding) {
		sh, err := decode.ParseSharding(info.Sharding)
		if err != nil {
			od.Note = fmt.Sprintf("not converted: %s: sharding.%v", key, err)
			return
		}
		od.Sharding = sh.String()
	}
	switch {
	case kind == "skeletons" && (info.Type == "" || info.Type == "neuroglancer_skeletons"):
		// What the view checks before it converts (transform, vertex
		// attributes), so that info never promises a view that lists
		// as EIO.
		if _, err := ngobj.ParseSkeletonInfo(data); err != nil {
			od.Note = fmt.Sprintf("not converted: %s: %v", key, err)
		} else {
			od.Views = SkeletonView
		}
	case kind == "mesh" && (info.Type == "" || info.Type == "neuroglancer_legacy_mesh"):
		od.Views = MeshOBJView + " " + MeshPLYView
	case kind == "mesh" && info.Type == "neuroglancer_multilod_draco":
		od.Note = "not converted (multi-resolution Draco meshes), passed through"
	default:
		od.Note = fmt.Sprintf("not converted: @type %q, passed through", info.Type)
	}
	if od.Type == "" {
		od.Type = map[string]string{"skeletons": "neuroglancer_skeletons", "mesh": "neuroglancer_legacy_mesh"}[kind]
	}
}
