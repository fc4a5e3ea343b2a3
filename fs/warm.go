package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"

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
// voxels. Running it walks each chunk through the chunk store's tiers as a
// read does (cache.Store.Warm: the same tiers, order, checks, leases and
// counts), Workers chunks at once, so that afterwards every tier holds it:
// a chunk no tier holds is fetched, decoded and written to each; one that
// some tier holds is copied to the tiers that lack it. Each chunk's fate is
// reported, with the tiers that did not keep it and why. What every tier
// holds already is skipped, so a warm that was interrupted resumes where
// it stopped.
//
// The plan is never enumerated ahead: Run produces its chunks as the
// workers take them, and Total counts a box of a grid by arithmetic, so a
// plan of 2^60 chunks starts at once, in bounded memory.

// Range is a half-open range [Lo, Hi) of voxel coordinates along one axis.
type Range struct{ Lo, Hi int64 }

// WarmStatus is what a warm did with one chunk.
type WarmStatus int

const (
	// WarmFetched: loaded from the origin and decoded, then written to
	// every tier (WarmResult.NotKept says which did not keep it).
	WarmFetched WarmStatus = iota
	// WarmCached: in every tier already, unchanged at the origin.
	WarmCached
	// WarmMissing: the source has no such chunk (it reads as the fill).
	WarmMissing
	// WarmFailed: the load failed; WarmResult.Err says why.
	WarmFailed
	// WarmWouldFetch: in no tier; a dry run does not load it.
	WarmWouldFetch
	// WarmCopied: held by a tier (WarmResult.From), copied to those that
	// lacked it (a shared tier filled from the disk cache).
	WarmCopied
	// WarmWouldCopy: held by some tiers, not all; a dry run does not copy
	// it.
	WarmWouldCopy
)

// WarmResult is one chunk's fate.
type WarmResult struct {
	Key    string // the chunk's path in the tree
	Size   int64  // its decoded size
	Status WarmStatus
	Err    error // for WarmFailed
	// From names the tier that held the chunk ("" for the origin);
	// Lacked, the tiers that did not, which a warm wrote it to.
	From   string
	Lacked []string
	// NotKept, when not nil, says which tiers do not hold the chunk after
	// the warm and why (wrapping cache.ErrNoIdentity, disk.ErrFull, or a
	// tier's own error). A missing or failed chunk is kept nowhere.
	NotKept error
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
	seen := map[string]bool{} // arrays by Key: a group's may be found twice
	addArrays := func(v *decode.Volume) {
		for _, a := range v.Arrays {
			if !seen[a.Key] {
				seen[a.Key] = true
				p.targets = append(p.targets, warmTarget{a: a, whole: true})
			}
		}
	}
	// dirs are the directories from the root down to each volume the
	// plan covers, whose group metadata the warm keeps (keepGroups).
	dirs := map[string]bool{}
	above := func(p string) {
		for p = path.Clean("/" + p)[1:]; ; p = path.Dir(p) {
			if p == "." || p == "/" {
				p = ""
			}
			dirs[p] = true
			if p == "" {
				return
			}
		}
	}
	for _, pth := range paths {
		above(path.Dir(path.Clean("/" + pth)))
		n, err := t.Resolve(ctx, pth)
		if err != nil {
			return nil, fmt.Errorf("fs: warm %s: %w", orRoot(pth), err)
		}
		switch n := n.(type) {
		case *chunkFile:
			p.targets = append(p.targets, warmTarget{a: n.a, c: n.c})
		case *keyDir:
			p.targets = append(p.targets, warmTarget{a: n.a, node: n.node, whole: n.views != nil || n.node.IsRoot()})
		case Dir:
			// A volume's directory is walked too: a group's (a
			// consolidated Zarr group, whose .zmetadata names its
			// arrays) holds volumes below its own arrays.
			var groups []string // consolidated groups' array directories
			_, err := walkFrom(ctx, n, path.Clean("/" + pth)[1:], depth, MaxWalkEntries, func(dir string, v *decode.Volume, _ error) {
				if v == nil {
					return
				}
				above(path.Dir("/" + dir))
				addArrays(v)
				for _, a := range consolidatedArrays(v) {
					groups = append(groups, path.Join(dir, a))
				}
			})
			if err != nil {
				return nil, fmt.Errorf("fs: warm %s: %w", orRoot(pth), err)
			}
			// The arrays a consolidated group names, opened by name: a
			// source that cannot list shows none of them to the walk,
			// nor, on some servers, the directories between (an HTTP
			// server that redirects "labels" to a "labels/" it cannot
			// list).
			for _, g := range groups {
				d, err := t.openDir(ctx, g, false)
				if err != nil {
					return nil, fmt.Errorf("fs: warm %s: an array that %s/.zmetadata names: %w", g, orRoot(pth), err)
				}
				if vd, ok := d.(*volumeDir); ok {
					above(path.Dir("/" + g))
					addArrays(vd.vol)
				}
			}
		default:
			return nil, fmt.Errorf("fs: warm %s: not a chunk, an array or a directory of them: %w", pth, fetcher.ErrInvalidKey)
		}
	}
	t.keepGroups(ctx, dirs)
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

// consolidatedArrays returns the directories, relative to v's, of the
// arrays that v's consolidated metadata (a Zarr v2 ".zmetadata") names;
// none for other volumes, or metadata that does not parse (decode refused
// it already).
func consolidatedArrays(v *decode.Volume) []string {
	if v.MetaName != ".zmetadata" {
		return nil
	}
	var top struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(v.Original, &top) != nil {
		return nil
	}
	var dirs []string
	for k := range top.Metadata {
		if d, ok := strings.CutSuffix(k, "/.zarray"); ok && d != "" {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	return dirs
}

// groupMetadata are the names of the metadata files of a group (Zarr v2,
// Zarr v3, N5) or of a consolidated hierarchy: what a reader opens on its
// way from the root down to an array.
var groupMetadata = []string{".zgroup", ".zattrs", ".zmetadata", "zarr.json", "attributes.json"}

// keepGroups looks up the group metadata files in each of dirs, through
// the tree: objectFile's metadata path (groupObject) reads them through
// the disk cache's metadata keeping, so that a mount with the origin gone
// opens the hierarchy from its root (zarr.open of the mount). A file that
// does not exist is kept as such by the same path; other failures are left
// to the mount, which then fails them as the origin did.
func (t *Tree) keepGroups(ctx context.Context, dirs map[string]bool) {
	if t.opts.Disk == nil {
		return
	}
	for dir := range dirs {
		for _, name := range groupMetadata {
			t.Resolve(ctx, path.Join(dir, name))
		}
	}
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
		in := func(c []int64) bool { return inBox(box, c) }
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

// countCap bounds the chunks Total visits one by one (a key directory's,
// or the sizes of a box's chunks).
const countCap = 1 << 16

// Total returns the number of chunks of the plan and their decoded bytes.
// A box of a grid is counted by arithmetic; its bytes are exact up to
// countCap chunks and an upper bound (every chunk counted whole) beyond.
// known is false when the plan cannot be counted so: a key directory of
// more than countCap chunks, or more than 2^63 chunks.
func (p *WarmPlan) Total() (chunks, bytes int64, known bool) {
	add := func(n, b int64) bool {
		if n < 0 || b < 0 || chunks > math.MaxInt64-n || bytes > math.MaxInt64-b {
			return false
		}
		chunks, bytes = chunks+n, bytes+b
		return true
	}
	for _, tg := range p.targets {
		box := p.box[tg.a]
		var n, b int64
		switch {
		case tg.c != nil:
			if inBox(box, tg.c) {
				n, b = 1, tg.a.ChunkSize(tg.c)
			}
		case tg.whole:
			var ok bool
			if n, b, ok = gridTotal(tg.a, box); !ok {
				return 0, 0, false
			}
		default:
			keyChunks(tg.a, tg.node, func(c []int64) bool { return inBox(box, c) }, func(a *decode.Array, c []int64) bool {
				n++
				b += a.ChunkSize(c)
				return n <= countCap
			})
			if n > countCap {
				return 0, 0, false
			}
		}
		if !add(n, b) {
			return 0, 0, false
		}
	}
	return chunks, bytes, true
}

// inBox reports whether the chunk at c lies in box (nil: every chunk).
func inBox(box [][2]int64, c []int64) bool {
	for i, r := range box {
		if c[i] < r[0] || c[i] >= r[1] {
			return false
		}
	}
	return true
}

// gridTotal counts the chunks of a within box (nil: the whole grid) and
// their bytes, as Total says; false when they overflow.
func gridTotal(a *decode.Array, box [][2]int64) (n, b int64, ok bool) {
	n = 1
	for i := range a.Grid {
		lo, hi := int64(0), a.Grid[i]
		if box != nil {
			lo, hi = box[i][0], box[i][1]
		}
		if hi <= lo {
			return 0, 0, true
		}
		if n > math.MaxInt64/(hi-lo) {
			return 0, 0, false
		}
		n *= hi - lo
	}
	if n <= countCap {
		gridChunks(a, box, func(a *decode.Array, c []int64) bool {
			b += a.ChunkSize(c)
			return true
		})
		return n, b, true
	}
	// The box's first chunk is, along each axis, as wide as any of the
	// box's: all but the grid's last are whole, and a box one chunk wide
	// holds only that one.
	first := make([]int64, len(a.Grid))
	if box != nil {
		for i := range first {
			first[i] = box[i][0]
		}
	}
	whole := a.ChunkSize(first)
	if whole > 0 && n > math.MaxInt64/whole {
		return 0, 0, false
	}
	return n, n * whole, true
}

// Run warms the plan's chunks, workers at once (at least one), and calls
// each, one call at a time, with every chunk's result. With dryRun it
// loads and writes nothing: chunks no tier holds are WarmWouldFetch,
// those some tiers lack WarmWouldCopy. A failed chunk does not stop the
// others; the end of ctx does (its error is returned), promptly: no chunk
// starts after it, and a chunk still loading is abandoned and not
// reported, but one whose load completed is reported as it ended, kept or
// not, so that the results reported are what the tiers hold. Run returns
// once every chunk has settled. The disk cache
// holds what the warm writes (disk.Cache.Hold), so that a warm larger than
// the cache reports the chunks that did not fit instead of evicting its
// own. The tiers' writes are done when each is called.
func (p *WarmPlan) Run(ctx context.Context, workers int, dryRun bool, each func(WarmResult)) error {
	if len(p.t.tiers) == 0 && !dryRun {
		return ErrNoDiskCache
	}
	if !dryRun {
		p.t.warming.Store(true)
		defer p.t.warming.Store(false)
		if p.t.opts.Disk != nil {
			// Held from here on: the chunks, and the metadata read so
			// far (read again now), which a mount without the origin
			// needs as much as them.
			p.t.opts.Disk.Hold()
			p.t.TouchMetadata()
		}
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
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue // drain: the producer stops at ctx's end
				}
				r := p.t.warmChunk(ctx, j.a, j.c, dryRun)
				if r.Status == WarmFailed && ctx.Err() != nil {
					continue // abandoned: left for the next warm
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
	return ctx.Err()
}

// warmChunk warms the chunk at c of a through the chunk store's tiers
// (cache.Store.Warm), under the read deadline a read of it would have.
func (t *Tree) warmChunk(ctx context.Context, a *decode.Array, c []int64, dryRun bool) WarmResult {
	key := a.ChunkKey(c)
	r := WarmResult{Key: key, Size: a.ChunkSize(c)}
	if len(t.tiers) == 0 {
		r.Status = WarmWouldFetch // a dry run without a disk cache
		return r
	}
	lctx, cancel := t.readContext(ctx)
	defer cancel()
	w, err := t.store.Warm(lctx, t.tierChunk(a, key, c), dryRun)
	err = t.readError(ctx, lctx, err)
	r.From, r.Lacked, r.NotKept = w.Served, w.Lacked, w.NotKept
	switch {
	case isMissing(err):
		r.Status = WarmMissing
	case err != nil:
		r.Status, r.Err = WarmFailed, err
	case len(w.Lacked) == 0:
		r.Status = WarmCached
	case dryRun && w.Served == "":
		r.Status = WarmWouldFetch
	case dryRun:
		r.Status = WarmWouldCopy
	case w.Served == "":
		r.Status = WarmFetched
	default:
		r.Status = WarmCopied
	}
	return r
}

// ErrNoDiskCache is returned by a warm of a tree without a disk cache.
var ErrNoDiskCache = errors.New("fs: warm needs a disk cache (--cache-dir)")

// groupObject returns a group's metadata file at key (groupMetadata) read
// whole through fetchMeta, which keeps it in the disk cache and serves that
// copy when the origin cannot be reached; ok is false for another name, or
// without a disk cache, or when the metadata path could not read it (the
// caller then shows the object as any other).
func (t *Tree) groupObject(ctx context.Context, key string) (n Node, err error, ok bool) {
	if t.opts.Disk == nil || !slices.Contains(groupMetadata, path.Base(key)) {
		return nil, nil, false
	}
	obj, _, err := t.fetchMeta(ctx, key, maxMetadataBytes)
	switch {
	case err == nil:
		return bytesFile(obj.Data), nil, true
	case errors.Is(err, fetcher.ErrNotExist):
		return nil, err, true
	}
	return nil, nil, false
}
