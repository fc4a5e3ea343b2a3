package fs

import (
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs/view"
)

// arrayViews are the stitched views of one array (package fs/view) as
// nodes of its directory: volume.tif, volume.raw, volume.nhdr, volume.mhd,
// sections/ and, for arrays of three or more axes, slabs/. A nil
// *arrayViews is an array without views; its methods then find nothing.
type arrayViews struct {
	t     *Tree
	a     *decode.Array
	v     *view.Views
	key   string          // the array's key, for error messages
	names []fetcher.Entry // every name the views add, in listing order
}

// newViews returns the views of a, or nil when it has none: an array of
// fewer than two axes or of a sample type the views do not write (logged
// at debug level), or one whose chunk keys would collide with a view's
// name (logged as a warning: a chunk must never be hidden). Nothing is
// fetched.
func (t *Tree) newViews(a *decode.Array) *arrayViews {
	g, err := viewGrid(a)
	var v *view.Views
	if err == nil {
		v, err = view.New(g, &viewChunks{t: t, a: a})
	}
	if err != nil {
		t.log.Debug("no stitched views", "array", "/"+a.Key, "err", err)
		return nil
	}
	for _, why := range v.Refused {
		t.log.Warn("stitched views left out", "array", "/"+a.Key, "why", why)
	}
	av := &arrayViews{t: t, a: a, v: v, key: a.Key}
	for _, f := range v.Files {
		av.names = append(av.names, fetcher.Entry{Name: f.Name()})
	}
	if v.Sections.Len() > 0 {
		av.names = append(av.names, fetcher.Entry{Name: view.SectionsDir, IsDir: true})
	}
	if v.Slabs.Len() > 0 {
		av.names = append(av.names, fetcher.Entry{Name: view.SlabsDir, IsDir: true})
	}
	for _, e := range av.names {
		if _, _, ok := a.KeyLookup(a.KeyRoot(), e.Name); ok {
			t.log.Warn("no stitched views: a chunk key has a view's name", "array", "/"+a.Key, "name", e.Name)
			return nil
		}
	}
	return av
}

// ViewNotes returns what `volfs info` says of a's stitched views: why
// some were left out (see view.Views.Refused), or nothing. It does no I/O.
func ViewNotes(a *decode.Array) []string {
	g, err := viewGrid(a)
	if err != nil {
		return nil
	}
	v, err := view.New(g, &viewChunks{a: a})
	if err != nil {
		return nil
	}
	return v.Refused
}

// lookup returns the view called name, or false.
func (v *arrayViews) lookup(name string) (Node, bool) {
	if v == nil {
		return nil, false
	}
	switch name {
	case view.SectionsDir:
		if v.v.Sections.Len() > 0 {
			return &viewDir{d: v.v.Sections, av: v, key: path.Join(v.key, name)}, true
		}
		return nil, false
	case view.SlabsDir:
		if v.v.Slabs.Len() > 0 {
			return &viewDir{d: v.v.Slabs, av: v, key: path.Join(v.key, name)}, true
		}
		return nil, false
	}
	if f, ok := v.v.Lookup(name); ok {
		return &viewFile{f: f, av: v}, true
	}
	return nil, false
}

// entries lists the views' names; nil for an array without views.
func (v *arrayViews) entries() []fetcher.Entry {
	if v == nil {
		return nil
	}
	return v.names
}

// viewGrid describes a to the views: axes fastest first (x, y, z, ...),
// which reverses the metadata order of an array whose last axis is x.
func viewGrid(a *decode.Array) (view.Grid, error) {
	n := len(a.Shape)
	typ, ok := sampleTypes[[2]int{int(a.DType.Kind), a.DType.Size}]
	if !ok {
		return view.Grid{}, fmt.Errorf("fs: %s: sample type %s: %w", a.Key, a.DType.Name, view.ErrUnsupported)
	}
	g := view.Grid{
		Shape:     permute(a, a.Shape),
		Chunk:     permute(a, a.Chunk),
		Channels:  a.Channels,
		Type:      typ,
		BigEndian: a.DType.BigEndian,
	}
	if len(a.Resolution) == n {
		g.Resolution = make([]float64, n)
		for k := range n {
			g.Resolution[k] = a.Resolution[metaAxis(a, k)]
		}
		g.Unitless = a.Unitless
	}
	// The origin: OME-Zarr's translation, or the voxel offset
	// (precomputed) in the resolution's unit, or in voxels without one.
	switch {
	case len(a.Origin) == n && g.Resolution != nil:
		g.Origin = make([]float64, n)
		for k := range n {
			g.Origin[k] = a.Origin[metaAxis(a, k)]
		}
	case len(a.Offset) == n && slices.ContainsFunc(a.Offset, func(o int64) bool { return o != 0 }):
		g.Origin = make([]float64, n)
		for k := range n {
			g.Origin[k] = float64(a.Offset[metaAxis(a, k)])
			if g.Resolution != nil {
				g.Origin[k] *= g.Resolution[k]
			}
		}
	}
	if len(a.Axes) == n {
		g.Axes = make([]view.Axis, n)
		for k := range n {
			ax := a.Axes[metaAxis(a, k)]
			g.Axes[k] = view.Axis{Name: ax.Name, Role: ax.Type}
		}
	}
	return g, nil
}

// chunkLayout returns the layout, in the views' axis order, of the chunk
// at c (metadata order) of a, whose decoded bytes are data. The chunk
// path hands out exactly ChunkSize bytes in the model's layout (an N5
// block re-laid to its clipped extent after its header), so the layout
// follows from the coordinates alone; other bytes are corrupt.
func chunkLayout(a *decode.Array, c []int64, data []byte) (view.ChunkLayout, error) {
	if size := a.ChunkSize(c); int64(len(data)) != size {
		return view.ChunkLayout{}, fmt.Errorf("%w: fs: %s: %d decoded bytes, want %d", view.ErrCorrupt, a.ChunkKey(c), len(data), size)
	}
	strides, channel := a.Strides(c)
	return view.ChunkLayout{
		Header:        a.HeaderSize(c),
		Strides:       permute(a, strides),
		ChannelStride: channel,
		Extent:        permute(a, a.Extent(c)),
	}, nil
}

// sampleTypes maps a DType's kind and size onto the views' sample types.
var sampleTypes = map[[2]int]view.SampleType{
	{'u', 1}: view.Uint8, {'i', 1}: view.Int8,
	{'u', 2}: view.Uint16, {'i', 2}: view.Int16,
	{'u', 4}: view.Uint32, {'i', 4}: view.Int32, {'f', 4}: view.Float32,
	{'u', 8}: view.Uint64, {'i', 8}: view.Int64, {'f', 8}: view.Float64,
}

// metaAxis returns the metadata axis of a that is axis k of its views.
func metaAxis(a *decode.Array, k int) int {
	if a.XLast {
		return len(a.Shape) - 1 - k
	}
	return k
}

// permute converts per-axis values between metadata order and the views'
// order (the conversion is its own inverse).
func permute(a *decode.Array, v []int64) []int64 {
	out := make([]int64, len(v))
	for k := range v {
		out[k] = v[metaAxis(a, k)]
	}
	return out
}

// viewChunks gives the views of a the chunks of the tree, each with its
// layout (chunkLayout): the tree knows both from the chunk's coordinates,
// so they travel down to the views together.
type viewChunks struct {
	t *Tree
	a *decode.Array
}

func (c *viewChunks) Get(ctx context.Context, coords [][]int64) ([]view.Chunk, error) {
	meta := make([][]int64, len(coords))
	for i, v := range coords {
		meta[i] = permute(c.a, v)
	}
	datas, err := c.t.chunks(ctx, c.a, meta)
	if err != nil {
		return nil, err
	}
	out := make([]view.Chunk, len(datas))
	for i, d := range datas {
		if d == nil {
			continue
		}
		out[i].Data = d
		if out[i].Layout, err = chunkLayout(c.a, meta[i], d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Reserve takes n bytes of the store's budget of bytes in flight, so
// that readers of views wait for room rather than hold more than the
// budget between them (view.Reserver).
func (c *viewChunks) Reserve(ctx context.Context, n int64) (func(), error) {
	return c.t.store.Reserve(ctx, n)
}

func (c *viewChunks) Fill() []byte {
	if c.a.Fill != nil {
		return c.a.Fill
	}
	return make([]byte, c.a.DType.Size)
}

// chunks returns the decoded bytes of the chunks of a at coords (metadata
// order), one entry per coordinate, nil for a chunk the source does not
// have, through the chunk store as one batch (cache.Store.GetBatch): a
// batch of fewer than cache.BatchInline loads runs on the caller, a larger
// one on the store's pool of Options.Workers loaders. The first error
// cancels the loads only this batch waits for (a load shared with another
// reader goes on for it) and is returned. A chunk memory has held longer
// than Options.MetadataTTL is checked as a chunk file's is, and loaded
// again when its objects changed (chunkversion.go). A read that carries a
// ChunkRecord (withRecord) notes each chunk's version in it, and fails
// with ESTALE when it holds another (chunkrecord.go).
func (t *Tree) chunks(ctx context.Context, a *decode.Array, coords [][]int64) ([][]byte, error) {
	keys, mkeys := make([]string, len(coords)), make([]string, len(coords))
	for i, c := range coords {
		keys[i] = a.ChunkKey(c)
		mkeys[i] = memKey(a, keys[i])
	}
	res, err := t.store.GetBatch(ctx, mkeys, func(i int) cache.Loader { return t.loader(a, keys[i], coords[i]) })
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(res))
	rec := recordOf(ctx)
	for i, r := range res {
		out[i] = r.Val // nil for a missing chunk (a kept not-found error)
		// The version of out[i], looked up once for the TTL's check and
		// the record, again only for a value loaded since.
		var cv chunkVersion
		known := false
		if out[i] != nil && (t.opts.MetadataTTL > 0 || rec != nil) {
			cv, known = t.versionOf(mkeys[i], out[i]), true
		}
		if known && t.stale(ctx, mkeys[i], out[i], cv) {
			// Held past the TTL and rewritten since (chunkversion.go).
			t.store.Cache().Remove(mkeys[i])
			known = false
			if out[i], err = t.store.Get(ctx, mkeys[i], t.loader(a, keys[i], coords[i])); isMissing(err) {
				out[i], err = nil, nil
			}
			if err != nil {
				return nil, err
			}
		}
		if rec != nil {
			v := missingVersion
			if out[i] != nil {
				if !known {
					cv = t.versionOf(mkeys[i], out[i])
				}
				v = cv.version
			}
			if err := rec.note(mkeys[i], keys[i], v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// viewFile is a view file as a tree File. Its readers read ahead as
// chunk files' do (viewahead.go).
type viewFile struct {
	f  view.File
	av *arrayViews

	seqOnce sync.Once
	seq     *viewSeq // made on the first read-ahead
}

func (f *viewFile) IsDir() bool { return false }
func (f *viewFile) Size() int64 { return f.f.Size() }

// ReadAt reads as File promises: fewer bytes only at the end, and 0, nil
// at or past it. Read without a handle (volfs cat), it reads ahead as
// reader 0.
func (f *viewFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.readAt(ctx, p, off, Reader{})
}

// readAt is ReadAt for the reader rd, whose read-ahead window it moves.
func (f *viewFile) readAt(ctx context.Context, p []byte, off int64, rd Reader) (int, error) {
	size := f.f.Size()
	if off >= size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), size-off)]
	n, err := f.f.ReadAt(ctx, p, off)
	if err == io.EOF {
		err = nil
	}
	if err == nil {
		f.readAhead(rd, off, int64(n))
	}
	return n, err
}

// viewDir is sections/ or slabs/: files made as they are looked up.
type viewDir struct {
	d   *view.Dir
	av  *arrayViews
	key string // for error messages
}

func (d *viewDir) IsDir() bool { return true }

func (d *viewDir) Lookup(_ context.Context, name string) (Node, error) {
	f, ok := d.d.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("fs: %s: no such view: %w", path.Join(d.key, name), fetcher.ErrNotExist)
	}
	return &viewFile{f: f, av: d.av}, nil
}

func (d *viewDir) List(context.Context) (Listing, error) { return viewListing{d.d}, nil }

// viewListing generates the names of a view directory as they are read.
type viewListing struct{ d *view.Dir }

func (l viewListing) Len() int64                   { return int64(l.d.Len()) }
func (l viewListing) Entry(i int64) (string, bool) { return l.d.Name(int(i)), false }
