package fs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// Warming the disk cache
//
// `volfs warm` stages chunks in the disk cache before a job, so that a
// mount with the same --cache-dir serves them without the origin. A
// WarmPlan is what to warm: the chunks under some paths of the tree (a
// volume, an array or scale, a key directory, chunk files, or any
// directory above volumes), optionally only those that meet a box of
// voxels. Running it loads each chunk that is not on disk yet through the
// same path a mount's read takes (the chunk store, Tree.loader: disk
// lookup, fetch, decode, write-behind to the disk cache), Workers loads at
// once, and reports each chunk's fate. What is on disk already is
// skipped, so a warm that was interrupted resumes where it stopped.

// Range is a half-open range [Lo, Hi) of voxel coordinates along one axis.
type Range struct{ Lo, Hi int64 }

// WarmStatus is what a warm did with one chunk.
type WarmStatus int

const (
	// WarmFetched: loaded from the origin, decoded and kept on disk.
	WarmFetched WarmStatus = iota
	// WarmCached: on disk already, unchanged at the origin.
	WarmCached
	// WarmMissing: the source has no such chunk (it reads as the fill).
	WarmMissing
	// WarmFailed: the load failed; WarmResult.Err says why.
	WarmFailed
	// WarmWouldFetch: not on disk; a dry run does not load it.
	WarmWouldFetch
)

// WarmResult is one chunk's fate.
type WarmResult struct {
	Key    string // the chunk's path in the tree
	Size   int64  // its decoded size
	Status WarmStatus
	Err    error // for WarmFailed
}

// WarmPlan is the chunks a warm covers; see "Warming the disk cache".
type WarmPlan struct {
	t       *Tree
	targets []warmTarget
	// box, per array axis, the chunk index range [lo, hi) a chunk must
	// meet; nil for every chunk.
	box map[*decode.Array][][2]int64
}

// warmTarget is one path's chunks: a whole array, the chunks under one of
// its key directories, or one chunk.
type warmTarget struct {
	a     *decode.Array
	node  decode.KeyDir
	whole bool
	c     []int64 // one chunk when not nil
}

// PlanWarm resolves paths (slash-separated, relative to the tree's root;
// none means the root) into the chunks they hold. A directory that is not
// a volume is walked for volumes as `volfs info` walks (depth levels, at
// most MaxWalkEntries entries). bbox, when not empty, limits every array
// to the chunks that meet it: one range per axis, x first, then y and z,
// in the array's voxel coordinates (those its chunk names use: a
// precomputed scale's include its voxel_offset); it needs the paths to
// lie in one array. A path that holds no chunk (a metadata file, a view,
// an object passed through) is an error naming it.
func (t *Tree) PlanWarm(ctx context.Context, paths []string, bbox []Range, depth int) (*WarmPlan, error) {
	if len(paths) == 0 {
		paths = []string{""}
	}
	p := &WarmPlan{t: t}
	for _, pth := range paths {
		n, err := t.Resolve(ctx, pth)
		if err != nil {
			return nil, fmt.Errorf("fs: warm %s: %w", orRoot(pth), err)
		}
		switch n := n.(type) {
		case *chunkFile:
			p.targets = append(p.targets, warmTarget{a: n.a, c: n.c})
		case *keyDir:
			p.targets = append(p.targets, warmTarget{a: n.a, node: n.node, whole: n.views != nil || n.node.IsRoot()})
		case *volumeDir:
			for _, a := range n.vol.Arrays {
				p.targets = append(p.targets, warmTarget{a: a, whole: true})
			}
		case Dir:
			_, err := walkFrom(ctx, n, path.Clean("/" + pth)[1:], depth, MaxWalkEntries, func(_ string, v *decode.Volume, _ error) {
				if v == nil {
					return
				}
				for _, a := range v.Arrays {
					p.targets = append(p.targets, warmTarget{a: a, whole: true})
				}
			})
			if err != nil {
				return nil, fmt.Errorf("fs: warm %s: %w", orRoot(pth), err)
			}
		default:
			return nil, fmt.Errorf("fs: warm %s: not a chunk, an array or a directory of them: %w", pth, fetcher.ErrInvalidKey)
		}
	}
	if len(bbox) > 0 {
		arrays := map[*decode.Array]bool{}
		for _, tg := range p.targets {
			arrays[tg.a] = true
		}
		if len(arrays) != 1 {
			return nil, fmt.Errorf("fs: warm: --bbox needs paths within one array or scale, got %d arrays", len(arrays))
		}
		p.box = map[*decode.Array][][2]int64{}
		for a := range arrays {
			box, err := chunkBox(a, bbox)
			if err != nil {
				return nil, err
			}
			p.box[a] = box
		}
	}
	return p, nil
}

func orRoot(p string) string {
	if p == "" {
		return "the source's root"
	}
	return p
}

// chunkBox returns, per axis of a, the chunk index range [lo, hi) of the
// chunks that meet bbox (x, y, z ranges of voxel coordinates).
func chunkBox(a *decode.Array, bbox []Range) ([][2]int64, error) {
	n := len(a.Shape)
	if len(bbox) > n {
		return nil, fmt.Errorf("fs: warm: --bbox has %d ranges, %s has %d axes", len(bbox), a.Key, n)
	}
	box := make([][2]int64, n)
	for i := range box {
		box[i] = [2]int64{0, a.Grid[i]}
	}
	for k, r := range bbox {
		axis := k
		if a.XLast {
			axis = n - 1 - k
		}
		if r.Hi <= r.Lo {
			return nil, fmt.Errorf("fs: warm: --bbox range %d (%s): %d:%d is empty", k, "xyz"[k:k+1], r.Lo, r.Hi)
		}
		off := int64(0)
		if axis < len(a.Offset) {
			off = a.Offset[axis]
		}
		lo, hi := r.Lo-off, r.Hi-off
		ch := a.Chunk[axis]
		box[axis] = [2]int64{min(max(floorDiv(lo, ch), 0), a.Grid[axis]), min(max(floorDiv(hi+ch-1, ch), 0), a.Grid[axis])}
	}
	return box, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// chunks calls yield for every chunk of the plan, in order, until it
// returns false.
func (p *WarmPlan) chunks(yield func(a *decode.Array, c []int64) bool) {
	for _, tg := range p.targets {
		box := p.box[tg.a]
		in := func(c []int64) bool {
			for i, r := range box {
				if c[i] < r[0] || c[i] >= r[1] {
					return false
				}
			}
			return true
		}
		switch {
		case tg.c != nil:
			if in(tg.c) && !yield(tg.a, tg.c) {
				return
			}
		case tg.whole:
			if !gridChunks(tg.a, box, yield) {
				return
			}
		default:
			if !keyChunks(tg.a, tg.node, in, yield) {
				return
			}
		}
	}
}

// gridChunks yields every chunk of a within box (nil: the whole grid),
// the last axis fastest. It returns false if yield did.
func gridChunks(a *decode.Array, box [][2]int64, yield func(*decode.Array, []int64) bool) bool {
	n := len(a.Grid)
	lo, hi := make([]int64, n), make([]int64, n)
	for i := range n {
		lo[i], hi[i] = 0, a.Grid[i]
		if box != nil {
			lo[i], hi[i] = box[i][0], box[i][1]
		}
		if lo[i] >= hi[i] {
			return true
		}
	}
	c := append([]int64(nil), lo...)
	for {
		if !yield(a, append([]int64(nil), c...)) {
			return false
		}
		i := n - 1
		for ; i >= 0; i-- {
			if c[i]++; c[i] < hi[i] {
				break
			}
			c[i] = lo[i]
		}
		if i < 0 {
			return true
		}
	}
}

// keyChunks yields the chunks under the key directory node of a that in
// accepts. It returns false if yield did.
func keyChunks(a *decode.Array, node decode.KeyDir, in func([]int64) bool, yield func(*decode.Array, []int64) bool) bool {
	for i := range a.KeyLen(node) {
		name, _ := a.KeyEntry(node, i)
		sub, c, ok := a.KeyLookup(node, name)
		switch {
		case !ok:
		case c == nil:
			if !keyChunks(a, sub, in, yield) {
				return false
			}
		case in(c):
			if !yield(a, c) {
				return false
			}
		}
	}
	return true
}

// Count returns the number of chunks of the plan and their decoded bytes.
func (p *WarmPlan) Count() (chunks, bytes int64) {
	p.chunks(func(a *decode.Array, c []int64) bool {
		chunks++
		bytes += a.ChunkSize(c)
		return true
	})
	return chunks, bytes
}

// Run warms the plan's chunks, workers at once (at least one), and calls
// each, one call at a time, with every chunk's result. With dryRun it
// loads nothing: chunks not on disk are WarmWouldFetch. A failed chunk
// does not stop the others; the end of ctx does (its error is returned).
// The disk cache's writes run behind the loads: Tree.Close waits for
// them.
func (p *WarmPlan) Run(ctx context.Context, workers int, dryRun bool, each func(WarmResult)) error {
	if len(p.t.tiers) == 0 && !dryRun {
		return ErrNoDiskCache
	}
	if !dryRun {
		p.t.warming.Store(true)
		defer p.t.warming.Store(false)
	}
	type job struct {
		a *decode.Array
		c []int64
	}
	jobs := make(chan job)
	go func() {
		defer close(jobs)
		p.chunks(func(a *decode.Array, c []int64) bool {
			select {
			case jobs <- job{a, c}:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	var mu sync.Mutex // serialises each
	var wg sync.WaitGroup
	var stopped atomic.Bool
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r := p.t.warmChunk(ctx, j.a, j.c, dryRun)
				if ctx.Err() != nil {
					stopped.Store(true)
					continue // drain: the producer stops at ctx's end
				}
				mu.Lock()
				each(r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !dryRun {
		p.t.TouchMetadata()
	}
	if stopped.Load() || ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// warmChunk warms the chunk at c of a.
func (t *Tree) warmChunk(ctx context.Context, a *decode.Array, c []int64, dryRun bool) WarmResult {
	key := a.ChunkKey(c)
	r := WarmResult{Key: key, Size: a.ChunkSize(c)}
	switch {
	case t.onDisk(ctx, a, key, c):
		r.Status = WarmCached
		return r
	case dryRun:
		r.Status = WarmWouldFetch
		return r
	}
	_, err := t.store.Get(ctx, memKey(a, key), t.loader(a, key, c))
	switch {
	case err == nil:
		r.Status = WarmFetched
	case isMissing(err):
		r.Status = WarmMissing
	default:
		r.Status, r.Err = WarmFailed, err
	}
	return r
}

// onDisk reports whether every tier of the chunk store (the disk cache,
// then a shared tier if any) holds the chunk at c of a, made from objects
// the source still holds unchanged: what a load would serve without the
// origin. A chunk that some tier lacks is loaded, which fills the tiers
// above the one that has it (cache.Store.Loader).
func (t *Tree) onDisk(ctx context.Context, a *decode.Array, key string, c []int64) bool {
	if len(t.tiers) == 0 {
		return false
	}
	check := func(rec []byte) error { return t.ids.check(ctx, rec) }
	for _, tier := range t.tiers {
		if _, _, ok := tier.Get(ctx, t.tierKey(a, key), a.ChunkSize(c), check); !ok {
			return false
		}
	}
	return true
}

// ErrNoDiskCache is returned by a warm of a tree without a disk cache.
var ErrNoDiskCache = errors.New("fs: warm needs a disk cache (--cache-dir)")
