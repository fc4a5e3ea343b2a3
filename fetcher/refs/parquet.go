package refs

// The Parquet form of a reference set, as fsspec's LazyReferenceMapper
// reads it and kerchunk's refs_to_dataframe (and VirtualiZarr) write it:
//
//	refs.parq/.zmetadata          {"metadata": {key: JSON value}, "record_size": N}
//	refs.parq/<var>/refs.<R>.parq columns path, offset, size, raw
//
// The metadata keys (.zgroup, .zattrs, <var>/.zarray, ...) are inline JSON.
// A chunk key <var>/<i>.<j>... of an array (its <var>/.zarray names shape,
// chunks and dimension_separator) has the linear index L of (i, j, ...) in
// the C-order grid of chunks; its reference is row L % N of record file
// R = L / N. In that row a non-null raw is the chunk's inline bytes; else
// a null path means the key is absent (fill); else offset = size = 0 is the
// whole object at path and anything else the range [offset, offset+size).
// A record file that does not exist holds no keys (writers write only the
// records that hold one).
//
// Record files load lazily, on the first read of one of their keys, once
// however many readers ask at a time, into an LRU bounded in bytes.

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// Bounds of a Parquet reference set, so that a hostile one costs bounded
// memory and time.
const (
	// maxZmetadataBytes bounds the .zmetadata JSON.
	maxZmetadataBytes = 256 << 20
	// maxRecordSize bounds record_size (kerchunk writes 100,000 by default).
	maxRecordSize = 1 << 24
	// maxChunks bounds the chunk grid of one array, so that a linear
	// index never overflows.
	maxChunks = 1 << 62
	// recordCacheBytes is the default budget of loaded records.
	recordCacheBytes = 256 << 20
	// recordLoadTimeout bounds one record file's fetch and decode, which
	// runs on after its first reader leaves so that the others may share it.
	recordLoadTimeout = 2 * time.Minute
)

// parquetSet serves the chunk keys of a Parquet reference set that its
// Fetcher's manifest (the metadata keys) does not hold. It is safe for
// concurrent use.
type parquetSet struct {
	dir        string // the set's directory key under the Fetcher's home root
	url        string // the set's directory URL, for log lines
	recordSize int64
	arrays     map[string]*pqArray // by variable key (the directory of its .zarray)
	records    *recordCache
	// metaID is the version of .zmetadata the set was loaded from. A
	// record file read for the first time is served only while .zmetadata
	// is still that version, and every later read of it is pinned to the
	// version first read (recordIDs): the mount shows one version of the
	// set, never the metadata of one generation with the rows of another.
	metaID fetcher.Identity

	mu        sync.Mutex
	recordIDs map[string]fetcher.Identity // GUARDED_BY(mu); record file -> version first read
}

// pqArray is one array's chunk grid.
type pqArray struct {
	grid []int64 // chunks along each axis
	sep  string  // dimension separator of its chunk keys
	err  error   // why its chunk keys cannot be served, if they cannot
}

// LoadParquet opens the Parquet reference set in the directory source (a
// local path or a URL Options.Open accepts) and returns its Fetcher. It
// returns an error wrapping ErrNotReferenceSet when source/.zmetadata is
// not a reference set's (no record_size), and one wrapping
// fetcher.ErrNotExist when there is no .zmetadata, so that a caller
// sniffing sources may open it as a directory instead. The directory
// stands for the reference file: relative target paths resolve beside it,
// and by default targets must lie under the directory holding it. With
// Options.Sniff it first reads at most sniffParquetBytes of .zmetadata in
// one request (all that is read when the file is no longer) and returns
// ErrNotReferenceSet, that request's failure included, unless
// looksLikeParquetSet takes it for a set's.
func LoadParquet(ctx context.Context, source string, opts Options) (*Fetcher, error) {
	f, err := newSetFetcher(source, strings.TrimSuffix(source, "/"), opts)
	if err != nil {
		return nil, err
	}
	opts = f.opts
	base := f.base
	name := path.Base(base.Path)
	hf, err := f.roots[0].fetcher(opts.Open)
	if err != nil {
		return nil, err
	}
	var data []byte
	var metaID fetcher.Identity
	if opts.Sniff {
		head, id, err := hf.GetRange(ctx, name+"/.zmetadata", 0, sniffParquetBytes)
		if err != nil {
			return nil, fmt.Errorf("refs: %q: %w (%v)", source, ErrNotReferenceSet, err)
		}
		whole := len(head) < sniffParquetBytes
		if !looksLikeParquetSet(head, whole) {
			return nil, fmt.Errorf("refs: %q: %w", source, ErrNotReferenceSet)
		}
		if whole {
			data, metaID = head, id
		}
	}
	if data == nil {
		obj, err := hf.Get(ctx, name+"/.zmetadata", maxZmetadataBytes)
		if err != nil {
			return nil, err
		}
		if obj.ContentEncoding != "" {
			return nil, fmt.Errorf("refs: %s/.zmetadata: served with Content-Encoding %q, not supported", source, obj.ContentEncoding)
		}
		data, metaID = obj.Data, obj.ID
	}
	var zm struct {
		Metadata   map[string]json.RawMessage `json:"metadata"`
		RecordSize *json.Number               `json:"record_size"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if d.Decode(&zm) != nil || zm.RecordSize == nil || zm.Metadata == nil {
		return nil, fmt.Errorf("refs: %q: %w", source, ErrNotReferenceSet)
	}
	rs, err := zm.RecordSize.Int64()
	if err != nil || rs <= 0 || rs > maxRecordSize {
		return nil, fmt.Errorf("refs: %s/.zmetadata: record_size %s is not an integer in [1, %d]", source, zm.RecordSize, maxRecordSize)
	}
	p := &parquetSet{dir: name, url: strings.TrimSuffix(base.String(), "/"), recordSize: rs,
		arrays: map[string]*pqArray{}, records: newRecordCache(recordCacheBytes),
		metaID: metaID, recordIDs: map[string]fetcher.Identity{}}
	f.m = NewManifest()
	for k, v := range zm.Metadata {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, fmt.Errorf("refs: %s/.zmetadata: %q: %w", source, k, err)
		}
		if err := f.m.Add(k, Ref{Data: b.Bytes()}); err != nil {
			return nil, fmt.Errorf("refs: %s/.zmetadata: %w", source, err)
		}
		if k == ".zarray" || strings.HasSuffix(k, "/.zarray") {
			p.arrays[strings.TrimSuffix(strings.TrimSuffix(k, ".zarray"), "/")] = parseGrid(v)
		}
	}
	delete(p.arrays, "") // a root array has no record directory
	f.lazy = p
	return f, nil
}

// sniffParquetBytes is how much of a candidate's .zmetadata LoadParquet
// reads, in one request, to decide by content whether a directory source
// whose name says nothing is a Parquet reference set (Options.Sniff).
const sniffParquetBytes = 256 << 10

// looksLikeParquetSet reports whether head, the first bytes of a
// directory's .zmetadata (all of it when whole), is a Parquet reference
// set's: a JSON object with "metadata" and "record_size" members. A
// consolidated Zarr group's names "zarr_consolidated_format" instead. Of a
// .zmetadata longer than head, only one whose "record_size" lies in head
// is taken for a set's (a set with more metadata before its record_size
// is found under a ".parq" or ".parquet" name).
func looksLikeParquetSet(head []byte, whole bool) bool {
	t := bytes.TrimLeft(head, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	if whole {
		var zm struct {
			Metadata   map[string]json.RawMessage `json:"metadata"`
			RecordSize json.RawMessage            `json:"record_size"`
		}
		return json.Unmarshal(t, &zm) == nil && zm.Metadata != nil && zm.RecordSize != nil
	}
	return bytes.Contains(head, []byte(`"record_size"`)) && bytes.Contains(head, []byte(`"metadata"`))
}

// newSetFetcher makes the Fetcher of the reference set named source, at
// the URL loc (source, or source without its trailing slash), with its
// home root (loc's directory) and the allowed roots; its opts has a Log.
// A loc with no last element is not a set (ErrNotReferenceSet).
func newSetFetcher(source, loc string, opts Options) (*Fetcher, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	base, err := sourceURL(loc)
	if err != nil {
		return nil, err
	}
	dir, name := path.Split(base.Path)
	if name == "" {
		return nil, fmt.Errorf("refs: %q: %w", source, ErrNotReferenceSet)
	}
	home := &root{u: &url.URL{Scheme: base.Scheme, Host: base.Host, Path: strings.TrimSuffix(dir, "/")}}
	home.spec = rootSpec(home.u)
	f := &Fetcher{src: source, base: base, opts: opts, roots: []*root{home},
		resolved: map[string]target{}, logged: map[string]bool{}}
	for _, a := range opts.Allow {
		u, err := sourceURL(strings.TrimSuffix(a, "/"))
		if err != nil {
			return nil, fmt.Errorf("refs: allowed root %q: %w", a, err)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		f.roots = append(f.roots, &root{u: u, spec: rootSpec(u)})
	}
	return f, nil
}

// parseGrid reads an array's chunk grid from its .zarray.
func parseGrid(raw json.RawMessage) *pqArray {
	var za struct {
		Shape  []int64 `json:"shape"`
		Chunks []int64 `json:"chunks"`
		Sep    *string `json:"dimension_separator"`
	}
	if err := json.Unmarshal(raw, &za); err != nil {
		return &pqArray{err: fmt.Errorf(".zarray: %w", err)}
	}
	if len(za.Shape) != len(za.Chunks) {
		return &pqArray{err: fmt.Errorf(".zarray: shape %v and chunks %v differ in rank", za.Shape, za.Chunks)}
	}
	a := &pqArray{grid: make([]int64, len(za.Shape)), sep: "."}
	if za.Sep != nil {
		if *za.Sep != "." && *za.Sep != "/" {
			return &pqArray{err: fmt.Errorf(".zarray: dimension_separator %q", *za.Sep)}
		}
		a.sep = *za.Sep
	}
	total := int64(1)
	for i, s := range za.Shape {
		c := za.Chunks[i]
		if s < 0 || c <= 0 {
			return &pqArray{err: fmt.Errorf(".zarray: shape %v, chunks %v", za.Shape, za.Chunks)}
		}
		a.grid[i] = s/c + min(s%c, 1)
		if a.grid[i] > 0 && total > maxChunks/a.grid[i] {
			return &pqArray{err: fmt.Errorf(".zarray: a grid of more than 2^62 chunks")}
		}
		total *= a.grid[i]
	}
	return a
}

// index returns the linear C-order index of the chunk key rest (the part
// after the array's directory), and false when rest is not a key of the
// grid.
func (a *pqArray) index(rest string) (int64, bool) {
	if len(a.grid) == 0 {
		return 0, rest == "0"
	}
	parts := strings.Split(rest, a.sep)
	if len(parts) != len(a.grid) {
		return 0, false
	}
	var l int64
	for i, s := range parts {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n >= a.grid[i] || strconv.FormatInt(n, 10) != s {
			return 0, false
		}
		l = l*a.grid[i] + n
	}
	return l, true
}

// lookup finds key's reference among the records. A key of no array's
// grid, a record file that does not exist and a row whose path and raw
// are both null are fetcher.ErrNotExist (fill); a record that cannot be
// read, or a row out of bounds, is an error f.fail logs once per key.
func (p *parquetSet) lookup(ctx context.Context, f *Fetcher, key string) (Ref, error) {
	notExist := fmt.Errorf("refs: %q: %w", key, fetcher.ErrNotExist)
	var a *pqArray
	var field, rest string
	for i := strings.LastIndexByte(key, '/'); i > 0; i = strings.LastIndexByte(key[:i], '/') {
		if a = p.arrays[key[:i]]; a != nil {
			field, rest = key[:i], key[i+1:]
			break
		}
	}
	if a == nil {
		return Ref{}, notExist
	}
	recURL := p.url + "/" + field + "/refs.*.parq"
	if a.err != nil {
		return Ref{}, f.fail(ctx, key, recURL, a.err)
	}
	l, ok := a.index(rest)
	if !ok {
		return Ref{}, notExist
	}
	rec, row := l/p.recordSize, l%p.recordSize
	name := fmt.Sprintf("%s/%s/refs.%d.parq", p.dir, field, rec)
	recURL = p.url + "/" + field + fmt.Sprintf("/refs.%d.parq", rec)
	r, err := p.records.get(ctx, name, func(ctx context.Context) (*record, error) {
		hf, err := f.roots[0].fetcher(f.opts.Open)
		if err != nil {
			return nil, err
		}
		return p.loadRecord(ctx, hf, name)
	})
	if errors.Is(err, fetcher.ErrNotExist) {
		return Ref{}, notExist
	}
	if err != nil {
		return Ref{}, f.fail(ctx, key, recURL, err)
	}
	if row >= int64(len(r.rows)) {
		return Ref{}, f.fail(ctx, key, recURL, fmt.Errorf("the record has %d rows; the key is row %d", len(r.rows), row))
	}
	e := r.rows[row]
	switch {
	case e.raw != nil:
		return Ref{Data: e.raw}, nil
	case e.url < 0:
		return Ref{}, notExist
	}
	ref := Ref{URL: r.urls[e.url], Offset: e.off, Length: e.size}
	if e.off == 0 && e.size == 0 {
		ref.Length = -1
	} else if e.off < 0 || e.size < 0 || e.size > 1<<62 || e.off > (1<<62)-e.size {
		return Ref{}, f.fail(ctx, key, ref.URL, fmt.Errorf("range offset %d size %d out of bounds", e.off, e.size))
	}
	return ref, nil
}

// loadRecord reads the record file name through hf, as one version of the
// set: a file read before is read pinned to the version read then (a
// record evicted and loaded again); a file read for the first time is
// kept only if .zmetadata is still the version the set was loaded from,
// asked after the file was read (one ranged GET of a byte). Either check failing is an error
// wrapping fetcher.ErrChanged: the set was regenerated under the mount.
func (p *parquetSet) loadRecord(ctx context.Context, hf fetcher.Fetcher, name string) (*record, error) {
	p.mu.Lock()
	pin, seen := p.recordIDs[name]
	p.mu.Unlock()
	obj, err := hf.Get(fetcher.WithVersion(ctx, name, pin), name, maxRecordFileBytes)
	if err != nil {
		return nil, err
	}
	if seen {
		if obj.ID.Known() && obj.ID != pin {
			return nil, fmt.Errorf("version %s, first read as %s: the set was rewritten after it was mounted: %w", obj.ID, pin, fetcher.ErrChanged)
		}
	} else if p.metaID.Known() {
		// One byte of it by GET, not a Stat: a server that serves GETs
		// but refuses HEAD (a presigned URL) or answers it with other
		// headers reads the set all the same.
		meta := p.dir + "/.zmetadata"
		_, now, err := hf.GetRange(fetcher.WithVersion(ctx, meta, p.metaID), meta, 0, 1)
		if err != nil {
			return nil, fmt.Errorf("checking that .zmetadata is the version mounted: %w", err)
		}
		if now.Known() && now != p.metaID {
			return nil, fmt.Errorf(".zmetadata is now version %s, mounted as %s: the set was rewritten after it was mounted: %w", now, p.metaID, fetcher.ErrChanged)
		}
	}
	rec, err := decodeRecordObject(obj, p.recordSize)
	if err == nil && !seen && obj.ID.Known() {
		p.mu.Lock()
		p.recordIDs[name] = obj.ID
		p.mu.Unlock()
	}
	return rec, err
}

// recordCache holds loaded records, least recently used first out, within
// a budget of bytes; it loads each record once however many ask at a time.
type recordCache struct {
	budget int64

	mu       sync.Mutex
	used     int64                    // GUARDED_BY(mu)
	lru      *list.List               // GUARDED_BY(mu): of *cached, most recent at the front
	byName   map[string]*list.Element // GUARDED_BY(mu)
	inflight map[string]*flight       // GUARDED_BY(mu)
}

type cached struct {
	name string
	r    *record
}

type flight struct {
	done chan struct{}
	r    *record
	err  error
}

func newRecordCache(budget int64) *recordCache {
	return &recordCache{budget: budget, lru: list.New(), byName: map[string]*list.Element{}, inflight: map[string]*flight{}}
}

// get returns the record name, loading it with load when it is not held.
// The load runs detached from ctx (bounded by recordLoadTimeout), so that
// a reader that leaves does not fail the others waiting on it; a failed
// load is not kept, and the next reader tries again.
func (c *recordCache) get(ctx context.Context, name string, load func(context.Context) (*record, error)) (*record, error) {
	c.mu.Lock()
	if e, ok := c.byName[name]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cached).r, nil
	}
	fl, ok := c.inflight[name]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		c.inflight[name] = fl
		go func() {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordLoadTimeout)
			defer cancel()
			fl.r, fl.err = load(lctx)
			c.mu.Lock()
			delete(c.inflight, name)
			if fl.err == nil {
				c.add(name, fl.r)
			}
			c.mu.Unlock()
			close(fl.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-fl.done:
		return fl.r, fl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// add keeps r, evicting the least recently used records beyond the budget
// (r itself stays, however large: its readers hold it anyway).
func (c *recordCache) add(name string, r *record) {
	c.byName[name] = c.lru.PushFront(&cached{name: name, r: r})
	c.used += r.bytes
	for c.used > c.budget && c.lru.Len() > 1 {
		e := c.lru.Back()
		old := e.Value.(*cached)
		c.lru.Remove(e)
		delete(c.byName, old.name)
		c.used -= old.r.bytes
	}
}
