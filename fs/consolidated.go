package fs

import (
	"encoding/json"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/volfs/volfs/fetcher"
)

// A source that cannot list its directories (an HTTP server without
// indexes) shows of a directory only what its metadata names. A Zarr v2
// group's consolidated ".zmetadata" names every metadata file of the
// hierarchy below it (".zgroup", ".zattrs", "raw/.zarray",
// "labels/cells/.zarray"), which is the listing that a reader of the group
// needs: consolidatedNames keeps, for each directory below such a group,
// the entries those names imply, and a sourceDir whose source cannot list
// it lists them instead. Names the metadata does not hold are still looked
// up in the source, as without a listing.

// consolidatedNames maps a directory's key to the entries that
// consolidated metadata names in it. Safe for concurrent use.
type consolidatedNames struct {
	mu   sync.Mutex
	dirs map[string][]fetcher.Entry // GUARDED_BY(mu)
}

// add records the entries that the consolidated metadata meta, the
// ".zmetadata" of the directory root, names in root and below it; it
// reports whether meta named any.
func (c *consolidatedNames) add(root string, meta []byte) bool {
	var top struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if json.Unmarshal(meta, &top) != nil || len(top.Metadata) == 0 {
		return false
	}
	named := map[string]map[string]bool{} // dir -> name -> is a directory
	for k := range top.Metadata {
		parts := strings.Split(k, "/")
		if slices.Contains(parts, "") || slices.Contains(parts, ".") || slices.Contains(parts, "..") {
			continue // not a key of this hierarchy
		}
		for i, name := range parts {
			dir := path.Join(append([]string{root}, parts[:i]...)...)
			if dir == "." {
				dir = ""
			}
			if named[dir] == nil {
				named[dir] = map[string]bool{}
			}
			named[dir][name] = named[dir][name] || i < len(parts)-1
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs == nil {
		c.dirs = make(map[string][]fetcher.Entry)
	}
	for dir, names := range named {
		entries := make([]fetcher.Entry, 0, len(names))
		for _, name := range slices.Sorted(maps.Keys(names)) {
			size := int64(-1) // unknown until looked up
			if names[name] {
				size = 0
			}
			entries = append(entries, fetcher.Entry{Name: name, IsDir: names[name], Size: size})
		}
		c.dirs[dir] = entries
	}
	return true
}

// entries returns the entries named in the directory key, if any.
func (c *consolidatedNames) entries(key string) ([]fetcher.Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.dirs[key]
	return e, ok
}
