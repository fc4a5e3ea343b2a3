package decode

import (
	"strconv"
	"strings"
)

// keyTree names chunks. A chunk key is a sequence of path elements, one per
// level; a level is a literal followed by the grid coordinates of a run of
// axes joined by sep:
//
//	zarr v2, "." separator:   "1.0.3"            one level, axes 0-2
//	zarr v2, "/" separator:   "1/0/3"            three levels, one axis each
//	zarr v3 default, "/":     "c/1/0/3"          a literal level "c", then one per axis
//	zarr v3 default, ".":     "c.1.0.3"          one level: literal "c." then axes 0-2
//	N5:                       "1/0/3"            one level per axis
//	precomputed:              "0-64_64-128_0-7"  one level, the chunk's bounding box
//
// Levels cover the axes in order, so the directories of a nested key tree
// fix a prefix of the coordinates: the directory "1/0" of a zarr "/" array
// holds the chunks (1, 0, *).
type keyTree struct {
	levels []keyLevel
	sep    string
	// bbox names the single level by the chunk's voxel bounding box
	// (precomputed) instead of its coordinates.
	bbox bool
}

// keyLevel is one path element of a key: lit, then the coordinates of axes
// [lo, hi) joined by the tree's separator.
type keyLevel struct {
	lit    string
	lo, hi int
}

// separatorKeys returns the key tree of a format that joins coordinates with
// sep, after the path elements of prefix ("c" for zarr v3's default
// encoding). With "/" every axis is a directory level.
func separatorKeys(prefix string, sep string, ndim int) keyTree {
	t := keyTree{sep: sep}
	if sep == "/" {
		if prefix != "" {
			t.levels = append(t.levels, keyLevel{lit: prefix})
		}
		for d := range ndim {
			t.levels = append(t.levels, keyLevel{lo: d, hi: d + 1})
		}
		return t
	}
	lit := ""
	if prefix != "" {
		lit = prefix + sep
	}
	t.levels = []keyLevel{{lit: lit, lo: 0, hi: ndim}}
	return t
}

func (t keyTree) name(a *Array, c []int64) string {
	var b []byte
	for i, l := range t.levels {
		if i > 0 {
			b = append(b, '/')
		}
		b = t.appendElem(b, a, l, c)
	}
	return string(b)
}

func (t keyTree) appendElem(b []byte, a *Array, l keyLevel, c []int64) []byte {
	if t.bbox {
		return appendBBox(b, a, c)
	}
	b = append(b, l.lit...)
	for d := l.lo; d < l.hi; d++ {
		if d > l.lo {
			b = append(b, t.sep...)
		}
		b = strconv.AppendInt(b, c[d], 10)
	}
	return b
}

func (t keyTree) parse(a *Array, name string) ([]int64, bool) {
	elems := strings.Split(name, "/")
	if len(elems) != len(t.levels) {
		return nil, false
	}
	c := make([]int64, len(a.Grid))
	for i, e := range elems {
		if !t.parseElem(a, t.levels[i], e, c) {
			return nil, false
		}
	}
	return c, true
}

// parseElem parses the path element e of level l into c[l.lo:l.hi],
// accepting only the canonical spelling.
func (t keyTree) parseElem(a *Array, l keyLevel, e string, c []int64) bool {
	if t.bbox {
		got, ok := parseBBox(a, e)
		copy(c, got)
		return ok
	}
	rest, ok := strings.CutPrefix(e, l.lit)
	if !ok {
		return false
	}
	if l.hi == l.lo {
		return rest == ""
	}
	for d := l.lo; d < l.hi; d++ {
		part := rest
		if d < l.hi-1 {
			var found bool
			if part, rest, found = strings.Cut(rest, t.sep); !found {
				return false
			}
		}
		v, ok := parseCoord(part, a.Grid[d])
		if !ok {
			return false
		}
		c[d] = v
	}
	return true
}

// parseCoord parses a grid coordinate below limit written canonically:
// decimal digits, no sign, no leading zero.
func parseCoord(s string, limit int64) (int64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v >= limit {
		return 0, false
	}
	return v, true
}

// KeyDir is a directory of an array's key tree: the array's own directory
// (KeyRoot) or one named by the leading path elements of chunk keys. Its
// zero value is not valid; get one from KeyRoot or KeyLookup.
type KeyDir struct {
	depth  int     // levels named so far
	coords []int64 // the coordinates those levels fix
}

// KeyRoot returns the array's own directory in its key tree.
func (a *Array) KeyRoot() KeyDir { return KeyDir{} }

// KeyLen returns the number of entries of the key directory d.
func (a *Array) KeyLen(d KeyDir) int64 {
	l := a.keys.levels[d.depth]
	n := int64(1)
	for ax := l.lo; ax < l.hi; ax++ {
		n *= a.Grid[ax]
	}
	return n
}

// KeyEntry returns the name of the i-th entry of d, 0 <= i < KeyLen(d),
// and whether it is a directory (otherwise a chunk). Entries are generated,
// not stored: a grid of a million chunks costs nothing to list.
func (a *Array) KeyEntry(d KeyDir, i int64) (name string, isDir bool) {
	l := a.keys.levels[d.depth]
	// Scratch on the stack for the usual ranks and names: a listing of
	// 100 million entries calls this once per entry.
	var cb [8]int64
	var nb [64]byte
	c := cb[:0]
	if len(a.Grid) > len(cb) {
		c = make([]int64, len(a.Grid))
	}
	c = c[:len(a.Grid)]
	copy(c, d.coords)
	if a.keys.bbox {
		// Precomputed lists chunks first axis fastest, as Coords counts.
		copy(c, a.Coords(i))
	} else {
		for ax := l.hi - 1; ax >= l.lo; ax-- { // last axis fastest: "0.0", "0.1", ...
			c[ax] = i % a.Grid[ax]
			i /= a.Grid[ax]
		}
	}
	return string(a.keys.appendElem(nb[:0], a, l, c)), d.depth < len(a.keys.levels)-1
}

// KeyLookup resolves the entry name of d: a directory (dir), or the chunk
// at chunk; ok is false when name is neither.
func (a *Array) KeyLookup(d KeyDir, name string) (dir KeyDir, chunk []int64, ok bool) {
	c := make([]int64, len(a.Grid))
	copy(c, d.coords)
	l := a.keys.levels[d.depth]
	if !a.keys.parseElem(a, l, name, c) {
		return KeyDir{}, nil, false
	}
	if d.depth == len(a.keys.levels)-1 {
		return KeyDir{}, c, true
	}
	return KeyDir{depth: d.depth + 1, coords: c[:l.hi]}, nil, true
}

// KeyDirs returns the directories of the key tree that lead to the chunk at
// c, as paths below the array directory (for "c/1/0/3": "c", "c/1",
// "c/1/0"); empty when keys are one path element.
func (a *Array) KeyDirs(c []int64) []string {
	name := a.ChunkName(c)
	var dirs []string
	for i := range len(name) {
		if name[i] == '/' {
			dirs = append(dirs, name[:i])
		}
	}
	return dirs
}
