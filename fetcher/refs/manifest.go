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
	"fmt"
	"sort"
	"strings"
	"sync"
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
type Manifest struct {
	refs map[string]Ref
	urls map[string]string // interned target URLs: a million refs to one file hold one string

	dirsOnce sync.Once
	dirs     map[string][]string // dir key ("" root) → sorted child names (GUARDED_BY dirsOnce)
}

// NewManifest returns an empty manifest.
func NewManifest() *Manifest {
	return &Manifest{refs: map[string]Ref{}, urls: map[string]string{}}
}

// Add sets key's reference. A key must be a clean relative key (no leading
// "/", no "." or ".." elements, no empty elements); a ranged reference
// needs Offset >= 0 and, unless whole-object, Length >= 0 with
// Offset+Length not overflowing.
func (m *Manifest) Add(key string, r Ref) error {
	if !cleanKey(key) {
		return fmt.Errorf("refs: key %q is not a clean relative key", key)
	}
	if r.URL != "" {
		if r.Offset < 0 || r.Length >= 0 && r.Offset > (1<<62)-r.Length || r.Length > 1<<62 {
			return fmt.Errorf("refs: key %q: range offset %d length %d out of bounds", key, r.Offset, r.Length)
		}
		if u, ok := m.urls[r.URL]; ok {
			r.URL = u
		} else {
			m.urls[r.URL] = r.URL
		}
	}
	m.refs[key] = r
	return nil
}

// Len returns the number of keys.
func (m *Manifest) Len() int { return len(m.refs) }

// Lookup returns key's reference.
func (m *Manifest) Lookup(key string) (Ref, bool) {
	r, ok := m.refs[key]
	return r, ok
}

// URLs returns the distinct target URLs, sorted.
func (m *Manifest) URLs() []string {
	out := make([]string, 0, len(m.urls))
	for u := range m.urls {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// children returns the sorted names under directory key dir ("" for the
// root) and whether dir is a directory. The index is built on first use.
func (m *Manifest) children(dir string) ([]string, bool) {
	m.dirsOnce.Do(func() {
		seen := map[string]map[string]struct{}{"": {}}
		for k := range m.refs {
			parent := ""
			for {
				i := strings.IndexByte(k[len(parent):], '/')
				var name string
				if i < 0 {
					name = k[len(parent):]
				} else {
					name = k[len(parent) : len(parent)+i]
				}
				if seen[strings.TrimSuffix(parent, "/")] == nil {
					seen[strings.TrimSuffix(parent, "/")] = map[string]struct{}{}
				}
				seen[strings.TrimSuffix(parent, "/")][name] = struct{}{}
				if i < 0 {
					break
				}
				parent = k[:len(parent)+i+1]
			}
		}
		m.dirs = make(map[string][]string, len(seen))
		for d, names := range seen {
			l := make([]string, 0, len(names))
			for n := range names {
				l = append(l, n)
			}
			sort.Strings(l)
			m.dirs[d] = l
		}
	})
	l, ok := m.dirs[dir]
	return l, ok
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
