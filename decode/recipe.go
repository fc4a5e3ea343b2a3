package decode

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// The recipe of an array
//
// An array's recipe is everything that decides how the stored bytes of
// its chunks become decoded bytes: the format, the array's metadata
// members that the format reads (codec chain and each codec's
// configuration, filters, dtype and byte order, storage order, chunk
// shape, fill value, sharding at every level, a precomputed scale's
// encoding and compressed_segmentation block size, ...) and what the
// parser derived from them (decoded layout, fill, chunk geometry).
// Array.Recipe is a hash of it, computed once at parse time. A decoded
// value kept beyond one load (a memory, disk or shared tier entry, a memo
// made from the metadata, a warm record) is named with it, so that an
// edit of the metadata between or during mounts makes every value decoded
// under the old metadata unreachable instead of served: values are never
// invalidated, their names simply stop matching.
//
// The hash errs on the side of change: a member that cannot affect the
// bytes but sits in the same JSON object (a scale's resolution, say) is
// part of it, and so is the spelling of a nested object (key order,
// numbers written differently). Such an edit costs a fetch, never a wrong
// answer. Members the format keeps for people (zarr v3 "attributes",
// N5's user attributes) are left out.

// recipeLen is the length in bytes of a recipe hash before hex encoding:
// 128 bits, so that no two recipes a cache could meet collide.
const recipeLen = 16

// Recipe returns the array's recipe fingerprint (see "The recipe of an
// array"): 32 hex digits, equal for two arrays exactly when (up to a hash
// collision) their metadata decodes stored bytes the same way. It never
// contains "/" or NUL, so a caller may join it to a key with either.
func (a *Array) Recipe() string { return a.recipe }

// setRecipe computes a.recipe from the format name, the metadata members
// docs that describe the array (each a JSON object, members named by
// keep, or all when keep is nil), and the fields of a the parser derived;
// and a.decoding the same way without the array's shape (the format's
// shapeMembers and Array.Shape). Call it once a is complete.
func (a *Array) setRecipe(format string, docs []map[string]json.RawMessage, keep func(name string) bool) {
	a.recipe = a.recipeHash(format, docs, keep, "")
	a.decoding = a.recipeHash(format, docs, keep, shapeMembers[format])
}

// shapeMembers names, by format, the metadata member that holds the
// array's shape: what an append (zarr-python's resize, sections added to
// a precomputed scale) rewrites, and nothing else.
var shapeMembers = map[string]string{"zarr2": "shape", "zarr3": "shape", "n5": "dimensions", "precomputed": "size"}

// recipeHash is the hash of setRecipe; with shape set, the member of that
// name and Array.Shape are left out of it.
func (a *Array) recipeHash(format string, docs []map[string]json.RawMessage, keep func(name string) bool, shape string) string {
	h := sha256.New()
	str := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	str("volfs recipe 1")
	if shape != "" {
		str("less the shape")
	}
	str(format)
	for _, d := range docs {
		for _, name := range slices.Sorted(maps.Keys(d)) {
			if keep != nil && !keep(name) || shape != "" && name == shape {
				continue
			}
			str(name)
			b, err := json.Marshal(d[name]) // compacts: whitespace is not part of it
			if err != nil {
				b = d[name]
			}
			str(string(b))
		}
		str("") // ends the object
	}
	dims := a.Shape
	if shape != "" {
		dims = nil
	}
	str(fmt.Sprintf("%s|%+v|%d|%v|%v|%v|%t|%t|%t|%q|%x|%d|%d|%t|%t",
		a.Key, a.DType, a.Channels, dims, a.Offset, a.Chunk, a.Clipped, a.FirstFastest, a.XLast,
		a.Encoding, a.Fill, a.storedExtra, a.widen, a.header != nil, a.load != nil))
	return hex.EncodeToString(h.Sum(nil)[:recipeLen])
}

// Appended reports whether cur, parsed from a later version of the
// metadata that old was parsed from, reads every chunk of old's grid from
// the same object as old does and decodes it the same way, so that a tree
// serving old may go on serving it over the source that cur describes:
// what an append (zarr-python's resize, sections added to a scale)
// leaves. That holds when their recipes are equal but for the shape, no
// axis is shorter (a shrink deletes chunks, which would read as the fill
// value: bytes of neither version), no axis grew whose old edge chunk is
// stored clipped to the old extent (precomputed, N5: that chunk is
// rewritten at another size, or, in precomputed, under another key), and
// the grid is unchanged where a chunk's place in its shard depends on it
// (precomputed's compressed Morton code).
func Appended(old, cur *Array) bool {
	if old.decoding != cur.decoding || len(old.Shape) != len(cur.Shape) || len(old.Chunk) != len(cur.Chunk) {
		return false
	}
	for d := range old.Shape {
		switch {
		case cur.Shape[d] < old.Shape[d]:
			return false
		case cur.Shape[d] > old.Shape[d] && old.Clipped && old.Shape[d]%old.Chunk[d] != 0:
			return false
		}
	}
	return !old.gridPlaced || slices.Equal(old.Grid, cur.Grid)
}
