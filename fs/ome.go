package fs

import (
	"context"
	"errors"
	"path"
	"sync"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// omeImages remembers the OME-Zarr image (or its absence) of each group
// directory that holds a Zarr array, so that the levels of one image read
// the group's metadata once.
type omeImages struct {
	mu    sync.Mutex
	byDir map[string]*decode.OMEImage // GUARDED_BY(mu); nil values: no image
}

// applyOME gives the Zarr array that vol describes, at key, the axes,
// voxel size and origin of the OME-Zarr image whose level it is (decode.OMEImage.Apply),
// when its parent directory's group metadata (".zattrs", or a v3 group's
// "zarr.json") says so. The metadata itself passes through unchanged: the
// levels keep their paths, so it still describes the mount.
func (t *Tree) applyOME(ctx context.Context, key string, vol *decode.Volume) {
	if key == "" || vol.Format != "zarr2" && vol.Format != "zarr3" || len(vol.Arrays) != 1 {
		return
	}
	parent := path.Dir(key)
	if parent == "." {
		parent = ""
	}
	img := t.omeImage(ctx, parent)
	if img == nil {
		return
	}
	i, ok := img.Level(path.Base(key))
	if !ok {
		return
	}
	if !img.Apply(vol.Arrays[0], i) {
		t.log.Warn("OME-Zarr level has another number of axes than its image: its views have no voxel size",
			"array", "/"+key, "axes", len(img.Axes))
	}
}

// omeImage returns the OME-Zarr image of the group directory dir, or nil.
func (t *Tree) omeImage(ctx context.Context, dir string) *decode.OMEImage {
	t.ome.mu.Lock()
	img, done := t.ome.byDir[dir]
	t.ome.mu.Unlock()
	if done {
		return img
	}
	for _, name := range []string{".zattrs", "zarr.json"} {
		obj, objKey, err := t.fetchMeta(ctx, path.Join(dir, name), maxMetadataBytes)
		if errors.Is(err, fetcher.ErrNotExist) {
			continue
		}
		var data []byte
		if err == nil {
			data, err = untransport(obj, objKey, 1<<20, maxMetadataBytes)
		}
		if err == nil {
			img, err = decode.ParseOME(dir, name, data)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // a cancelled lookup decides nothing
			}
			t.log.Warn("OME-Zarr metadata not used: the image's views have no voxel size", "dir", "/"+dir, "err", err)
		}
		if img != nil || err != nil {
			break
		}
	}
	t.ome.mu.Lock()
	if t.ome.byDir == nil {
		t.ome.byDir = make(map[string]*decode.OMEImage)
	}
	first, done := t.ome.byDir[dir]
	if done { // another lookup parsed it meanwhile, and logged
		img = first
	} else {
		t.ome.byDir[dir] = img
	}
	t.ome.mu.Unlock()
	if !done && img != nil && img.NoScale != nil {
		t.log.Warn("OME-Zarr transforms not used: the image's views have unit spacing and no origin", "dir", "/"+dir, "err", img.NoScale)
	}
	return img
}
