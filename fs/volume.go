package fs

import (
	"context"
	"errors"
	"fmt"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// origSuffix names the original metadata file beside the rewritten one.
const origSuffix = ".orig"

// volumeDir is a directory that holds a volume: its rewritten metadata, the
// original metadata, one directory per array, and everything else passed
// through from rest.
type volumeDir struct {
	t      *Tree
	vol    *decode.Volume
	arrays map[string]*arrayDir
	rest   *sourceDir // the same directory as the source shows it
}

func newVolumeDir(t *Tree, vol *decode.Volume, rest *sourceDir) *volumeDir {
	d := &volumeDir{t: t, vol: vol, arrays: make(map[string]*arrayDir), rest: rest}
	for _, a := range vol.Arrays {
		d.arrays[a.Name] = &arrayDir{t: t, a: a}
	}
	return d
}

func (d *volumeDir) IsDir() bool { return true }

func (d *volumeDir) Lookup(ctx context.Context, name string) (Node, error) {
	switch name {
	case d.vol.MetaName:
		return bytesFile(d.vol.Rewritten), nil
	case d.vol.MetaName + origSuffix:
		return bytesFile(d.vol.Original), nil
	}
	if a, ok := d.arrays[name]; ok {
		return a, nil
	}
	return d.rest.Lookup(ctx, name)
}

// List shows the metadata files and arrays first, then whatever else the
// source lists in the directory. A source that cannot list shows only the
// former.
func (d *volumeDir) List(ctx context.Context) (Listing, error) {
	own := []fetcher.Entry{{Name: d.vol.MetaName}, {Name: d.vol.MetaName + origSuffix}}
	taken := map[string]bool{d.vol.MetaName: true, d.vol.MetaName + origSuffix: true}
	for _, a := range d.vol.Arrays {
		own = append(own, fetcher.Entry{Name: a.Name, IsDir: true})
		taken[a.Name] = true
	}
	rest, err := d.rest.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range rest.Len() {
		name, isDir := rest.Entry(i)
		if !taken[name] {
			own = append(own, fetcher.Entry{Name: name, IsDir: isDir})
		}
	}
	return entryListing(own), nil
}

// arrayDir lists the chunk keys of one array's grid.
type arrayDir struct {
	t *Tree
	a *decode.Array
}

func (d *arrayDir) IsDir() bool { return true }

func (d *arrayDir) Lookup(_ context.Context, name string) (Node, error) {
	c, ok := d.a.ParseChunkName(name)
	if !ok {
		return nil, fmt.Errorf("fs: %s/%s: not a chunk key of the grid: %w", d.a.Key, name, fetcher.ErrNotExist)
	}
	return &chunkFile{dir: d, c: c, key: d.a.ChunkKey(c), size: d.a.ChunkSize(c)}, nil
}

func (d *arrayDir) List(context.Context) (Listing, error) { return gridListing{d.a}, nil }

// gridListing generates chunk names as they are read.
type gridListing struct{ a *decode.Array }

func (l gridListing) Len() int64                   { return l.a.NumChunks() }
func (l gridListing) Entry(i int64) (string, bool) { return l.a.ChunkName(l.a.Coords(i)), false }

// chunk returns the decoded bytes of the chunk at c, whose key is key,
// through the cache. A chunk the source does not have is an error wrapping
// fetcher.ErrNotExist.
func (d *arrayDir) chunk(ctx context.Context, key string, c []int64) ([]byte, error) {
	return d.t.cache.Get(ctx, key, func(ctx context.Context) ([]byte, error) {
		return d.load(ctx, key, c)
	})
}

// load fetches and decodes one chunk. Errors name the object and its source.
func (d *arrayDir) load(ctx context.Context, key string, c []int64) ([]byte, error) {
	size := int(d.a.ChunkSize(c))
	// Transport gzip of a raw chunk decodes to exactly size bytes; other
	// encodings store less than that, so twice the size plus slack bounds
	// any honest object, stored or decoded.
	limit := 2*size + 1<<20
	obj, objKey, err := d.t.fetch(ctx, key, int64(limit))
	if err != nil {
		return nil, err
	}
	data, err := untransport(obj, objKey, size, limit)
	if err == nil {
		data, err = d.a.Decode(data, c)
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", d.t.src, objKey, err)
	}
	return data, nil
}

// chunkFile is one chunk key of a grid, shown decoded.
type chunkFile struct {
	dir  *arrayDir
	c    []int64
	key  string // the chunk's key, made once rather than at every read
	size int64
}

func (f *chunkFile) IsDir() bool { return false }
func (f *chunkFile) Size() int64 { return f.size }

// open reports a missing chunk as not found when the tree is set to.
func (f *chunkFile) open(ctx context.Context) error {
	if f.dir.t.opts.Missing != MissingError {
		return nil
	}
	_, err := f.dir.chunk(ctx, f.key, f.c)
	if err != nil && !errors.Is(err, fetcher.ErrNotExist) {
		return nil // other failures surface at read, for that byte range
	}
	return err
}

func (f *chunkFile) slice(ctx context.Context, off, n int64) ([]byte, error) {
	if off >= f.size {
		return nil, nil
	}
	n = min(n, f.size-off)
	b, err := f.dir.chunk(ctx, f.key, f.c)
	if errors.Is(err, fetcher.ErrNotExist) && f.dir.t.opts.Missing == MissingFill {
		return zeros(n), nil
	}
	if err != nil {
		return nil, err
	}
	return b[off : off+n], nil
}

func (f *chunkFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := f.slice(ctx, off, int64(len(p)))
	return copy(p, b), err
}

// zeroBlock backs reads of missing chunks without an allocation per read.
var zeroBlock = make([]byte, maxRead)

// zeros returns n zero bytes that must not be modified.
func zeros(n int64) []byte {
	if n <= int64(len(zeroBlock)) {
		return zeroBlock[:n]
	}
	return make([]byte, n)
}
