// Package refs serves a reference set — a manifest that maps keys to inline
// bytes or to byte ranges of other objects — as a fetcher.Fetcher, so that
// a kerchunk / fsspec ReferenceFileSystem JSON describing a Zarr v2
// hierarchy over HDF5, NetCDF4 or TIFF files mounts as a Zarr source.
//
// A Manifest is the format-neutral part: key → inline bytes, or key →
// (url, offset, length). ParseKerchunk reads the JSON form (versions 0 and
// 1) into one; other virtual formats may build one the same way. A Fetcher
// serves a Manifest, reading each ranged reference through the fetcher of
// the root its URL resolves under (see Resolver), so every target on one
// host shares that fetcher's pooled sessions; concurrent reads of
// neighbouring ranges of one remote target coalesce into one request
// (coalesce.go).
//
// # Identity
//
// The identity of a key served from a target (fetcher.Identity) is the
// target's own identity (ETag, generation, size and times) with the
// target's name and the byte range, so that every tier entry made from it
// is checked against the target file itself; a read pinned to that
// identity (fetcher.WithVersion) reaches the target pinned to the
// target's version (If-Match, ifGenerationMatch).
//
// LoadParquet serves the Parquet form (a directory of .zmetadata and
// per-array record files, see parquet.go): its metadata keys are the
// manifest, and a chunk key is looked up in its record file, loaded on
// first use into a cache bounded in bytes. A record file that cannot be
// read is an error for its keys, as a refused target is; one that does not
// exist holds no keys.
//
// # Errors
//
// A key the manifest does not hold is fetcher.ErrNotExist (a Zarr chunk
// that reads as the fill value). A key it holds whose target is refused,
// missing, or shorter than the reference says is an error wrapping none of
// the fetcher sentinels but ErrPermission for a refused target: the set
// says the chunk exists, so it must never read as fill. Each such failure
// is logged once per key with the key and the URL.
package refs

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/volfs/volfs/fetcher"
)

// Ref is one entry of a Manifest: inline bytes (URL == "") or Length bytes
// of the object at URL from Offset. Length < 0 means the whole object.
type Ref struct {
	Data   []byte
	URL    string
	Offset int64
	Length int64
}

// Manifest maps keys to references. Build it with Add, then only read it;
// reads are safe for concurrent use.
//
// It is packed for sets of millions of references: every key's bytes sit
// in one arena, each entry is 32 bytes (its range, where its key is, and
// the index of its URL in a table of distinct URLs), inline bytes sit in a
// second arena, and an open-addressed table of entry numbers finds a key.
// A million ranged references to one file hold about 56 MB (docs/PERFORMANCE.md).
type Manifest struct {
	seed   maphash.Seed
	keys   []byte   // every entry's key, one after another
	ents   []entry  // the entries, in the order they were added
	slots  []uint32 // open addressing: entry number + 1, 0 for empty; a power of two long
	urls   []string // distinct target URLs
	urlIdx map[string]uint32
	data   []byte // inline bytes

	dirsOnce sync.Once
	order    []uint32 // entry numbers sorted by key (GUARDED_BY dirsOnce)
}

type entry struct {
	off, n int64  // the range; for inline bytes, where they sit in data
	key    uint32 // where the key starts in keys
	url    uint32 // the URL's index in urls + 1; 0 for inline bytes
	klen   uint16
}

// NewManifest returns an empty manifest.
func NewManifest() *Manifest {
	return &Manifest{seed: maphash.MakeSeed(), urlIdx: map[string]uint32{}, slots: make([]uint32, 16)}
}

// Add sets key's reference. A key must be a clean relative key (no leading
// "/", no "." or ".." elements, no empty elements); a ranged reference
// needs Offset >= 0 and, unless whole-object, Length >= 0 with
// Offset+Length not overflowing. Keys and inline bytes together are
// bounded by 4 GiB.
func (m *Manifest) Add(key string, r Ref) error {
	if !cleanKey(key) {
		return fmt.Errorf("refs: key %q is not a clean relative key", key)
	}
	e := entry{off: r.Offset, n: r.Length}
	if r.URL != "" {
		if r.Offset < 0 || r.Length >= 0 && r.Offset > (1<<62)-r.Length || r.Length > 1<<62 {
			return fmt.Errorf("refs: key %q: range offset %d length %d out of bounds", key, r.Offset, r.Length)
		}
		i, ok := m.urlIdx[r.URL]
		if !ok {
			i = uint32(len(m.urls))
			m.urls = append(m.urls, r.URL)
			m.urlIdx[r.URL] = i
		}
		e.url = i + 1
	} else {
		e.off, e.n = int64(len(m.data)), int64(len(r.Data))
		m.data = append(m.data, r.Data...)
	}
	if len(m.keys)+len(key) > math.MaxUint32 || len(m.data) > math.MaxUint32 {
		return fmt.Errorf("refs: key %q: the set's keys or inline bytes pass 4 GiB", key)
	}
	if s, found := m.slot(key); found {
		old := m.ents[m.slots[s]-1]
		e.key, e.klen = old.key, old.klen
		m.ents[m.slots[s]-1] = e
		return nil
	}
	e.key, e.klen = uint32(len(m.keys)), uint16(len(key))
	m.keys = append(m.keys, key...)
	m.ents = append(m.ents, e)
	if 2*len(m.ents) > len(m.slots) {
		m.rehash()
	} else {
		s, _ := m.slot(key)
		m.slots[s] = uint32(len(m.ents))
	}
	return nil
}

// keyOf returns entry i's key bytes.
func (m *Manifest) keyOf(i uint32) []byte {
	e := &m.ents[i]
	return m.keys[e.key : e.key+uint32(e.klen) : e.key+uint32(e.klen)]
}

// slot returns the slot of key, or the empty slot where it would go.
func (m *Manifest) slot(key string) (int, bool) {
	mask := uint64(len(m.slots) - 1)
	for h := maphash.String(m.seed, key) & mask; ; h = (h + 1) & mask {
		v := m.slots[h]
		if v == 0 {
			return int(h), false
		}
		if string(m.keyOf(v-1)) == key {
			return int(h), true
		}
	}
}

func (m *Manifest) rehash() {
	m.slots = make([]uint32, 2*len(m.slots))
	mask := uint64(len(m.slots) - 1)
	for i := range m.ents {
		h := maphash.Bytes(m.seed, m.keyOf(uint32(i))) & mask
		for m.slots[h] != 0 {
			h = (h + 1) & mask
		}
		m.slots[h] = uint32(i + 1)
	}
}

// Len returns the number of keys.
func (m *Manifest) Len() int { return len(m.ents) }

// Lookup returns key's reference. Its Data must not be modified.
func (m *Manifest) Lookup(key string) (Ref, bool) {
	s, ok := m.slot(key)
	if !ok {
		return Ref{}, false
	}
	return m.ref(m.slots[s] - 1), true
}

func (m *Manifest) ref(i uint32) Ref {
	e := m.ents[i]
	if e.url == 0 {
		return Ref{Data: m.data[e.off : e.off+e.n : e.off+e.n]}
	}
	return Ref{URL: m.urls[e.url-1], Offset: e.off, Length: e.n}
}

// URLs returns the distinct target URLs, sorted.
func (m *Manifest) URLs() []string {
	out := slices.Clone(m.urls)
	slices.Sort(out)
	return slices.Compact(out)
}

// expandURLs replaces each target URL u with expand(u) where u holds a
// template ("{{"), and names a key that uses it when expand fails.
func (m *Manifest) expandURLs(expand func(string) (string, error)) error {
	for i, u := range m.urls {
		if !strings.Contains(u, "{{") {
			continue
		}
		x, err := expand(u)
		if err != nil {
			for j, e := range m.ents {
				if e.url == uint32(i+1) {
					return fmt.Errorf("refs: key %q: %w", m.keyOf(uint32(j)), err)
				}
			}
			return fmt.Errorf("refs: url %q: %w", u, err)
		}
		m.urls[i] = x
	}
	return nil
}

// entries returns the names under directory key dir ("" for the root),
// sorted, as a listing says them (the size of a key's bytes), and whether
// dir is a directory. A name that is both a key and a directory is the
// directory. The sorted order of the keys is made on first use (4 bytes
// a key); each call walks only dir's own names, skipping the keys below
// each subdirectory by binary search, and the names share one string.
func (m *Manifest) entries(dir string) ([]fetcher.Entry, bool) {
	m.dirsOnce.Do(func() {
		m.order = make([]uint32, len(m.ents))
		for i := range m.order {
			m.order[i] = uint32(i)
		}
		slices.SortFunc(m.order, func(a, b uint32) int { return bytes.Compare(m.keyOf(a), m.keyOf(b)) })
	})
	var prefix []byte
	if dir != "" {
		prefix = []byte(dir + "/")
	}
	n := len(m.order)
	from := func(lo int, p []byte) int {
		return lo + sort.Search(n-lo, func(i int) bool { return bytes.Compare(m.keyOf(m.order[lo+i]), p) >= 0 })
	}
	i := from(0, prefix)
	if dir != "" && (i == n || !bytes.HasPrefix(m.keyOf(m.order[i]), prefix)) {
		return nil, false
	}
	type found struct {
		end  int   // where the name ends in names
		size int64 // -1 for a directory
	}
	var names []byte
	var fs []found
	for i < n {
		k := m.keyOf(m.order[i])
		if !bytes.HasPrefix(k, prefix) {
			break
		}
		rest := k[len(prefix):]
		j := bytes.IndexByte(rest, '/')
		if j < 0 {
			names = append(names, rest...)
			r := m.ref(m.order[i])
			size := r.Length
			if r.URL == "" {
				size = int64(len(r.Data))
			}
			fs = append(fs, found{len(names), size})
			i++
			continue
		}
		names = append(names, rest[:j]...)
		fs = append(fs, found{len(names), -1})
		// Past every key below this subdirectory: '0' follows '/'.
		i = from(i, append(append(slices.Clip(prefix), rest[:j]...), '0'))
	}
	all := string(names)
	out := make([]fetcher.Entry, len(fs))
	start := 0
	for i, f := range fs {
		out[i] = fetcher.Entry{Name: all[start:f.end], IsDir: f.size < 0, Size: f.size}
		start = f.end
	}
	// Keys come in byte order, which puts "a.b" before the directory "a".
	slices.SortStableFunc(out, func(a, b fetcher.Entry) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if a.IsDir != b.IsDir {
			if a.IsDir {
				return -1
			}
			return 1
		}
		return 0
	})
	out = slices.CompactFunc(out, func(a, b fetcher.Entry) bool { return a.Name == b.Name })
	return out, true
}

func cleanKey(key string) bool {
	if key == "" || len(key) > 4096 {
		return false
	}
	for _, e := range strings.Split(key, "/") {
		if e == "" || e == "." || e == ".." || strings.ContainsRune(e, 0) {
			return false
		}
	}
	return true
}
