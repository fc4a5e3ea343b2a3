package decode

import (
	"fmt"
	"testing"
)

// TestRecipe: an array's recipe changes with every metadata member that
// decides how its chunks decode, and not with the members kept for people
// or with whitespace.
func TestRecipe(t *testing.T) {
	recipe := func(t *testing.T, parse func(string, []byte) (*Volume, error), meta string, i int) string {
		t.Helper()
		v, err := parse("a", []byte(meta))
		if err != nil {
			t.Fatal(err)
		}
		if r := v.Arrays[i].Recipe(); len(r) != 2*recipeLen {
			t.Fatalf("recipe %q: want %d hex digits", r, 2*recipeLen)
		}
		return v.Arrays[i].Recipe()
	}
	const z2 = `{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "|u1", "compressor": {"id": "zlib", "level": 1}, "fill_value": 0, "order": "C", "filters": %s}`
	const z3 = `{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
	  "chunk_key_encoding": {"name": "default"}, "fill_value": %s, "codecs": [{"name": "bytes"}], "attributes": %s}`
	const n5 = `{"dimensions": [4], "blockSize": [4], "dataType": "uint16", "compression": {"type": "%s"}, "pixelResolution": %s}`
	const pc = `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1, "mesh": %q,
	  "scales": [{"key": "s0", "size": [64, 64, 64], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[64, 64, 64]], "encoding": %q},
	             {"key": "s1", "size": [32, 32, 32], "voxel_offset": [0, 0, 0], "resolution": [2, 2, 2], "chunk_sizes": [[32, 32, 32]], "encoding": "raw"}]}`
	for _, c := range []struct {
		name  string
		parse func(string, []byte) (*Volume, error)
		a, b  string
		i     int
		same  bool
	}{
		{"zarr2 filter removed", ParseZarr2, fmt.Sprintf(z2, `[{"id": "delta", "dtype": "|u1"}]`), fmt.Sprintf(z2, `null`), 0, false},
		{"zarr2 delta dtype", ParseZarr2, fmt.Sprintf(z2, `[{"id": "delta", "dtype": "|u1"}]`), fmt.Sprintf(z2, `[{"id": "delta", "dtype": "|i1"}]`), 0, false},
		{"zarr2 whitespace", ParseZarr2, fmt.Sprintf(z2, `null`), fmt.Sprintf(z2, `  null `), 0, true},
		{"zarr3 fill", ParseZarr3, fmt.Sprintf(z3, `0`, `{}`), fmt.Sprintf(z3, `7`, `{}`), 0, false},
		{"zarr3 attributes", ParseZarr3, fmt.Sprintf(z3, `0`, `{}`), fmt.Sprintf(z3, `0`, `{"note": "edited"}`), 0, true},
		{"n5 compression", ParseN5, fmt.Sprintf(n5, "raw", `[1, 1]`), fmt.Sprintf(n5, "gzip", `[1, 1]`), 0, false},
		{"n5 user attribute", ParseN5, fmt.Sprintf(n5, "raw", `[1, 1]`), fmt.Sprintf(n5, "raw", `[2, 2]`), 0, true},
		{"precomputed encoding", ParsePrecomputed, fmt.Sprintf(pc, "mesh", "raw"), fmt.Sprintf(pc, "mesh", "jpeg"), 0, false},
		{"precomputed other scale", ParsePrecomputed, fmt.Sprintf(pc, "mesh", "raw"), fmt.Sprintf(pc, "mesh", "jpeg"), 1, true},
		{"precomputed mesh", ParsePrecomputed, fmt.Sprintf(pc, "mesh", "raw"), fmt.Sprintf(pc, "meshes", "raw"), 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := recipe(t, c.parse, c.a, c.i), recipe(t, c.parse, c.b, c.i)
			if (a == b) != c.same {
				t.Errorf("recipes %s and %s: equal %t, want %t", a, b, a == b, c.same)
			}
		})
	}
}

// TestAppended: a later version of an array's metadata that only grew it
// (an append) decodes every chunk of the old grid as the old one does;
// one that decodes a chunk another way, shrank it, or moved a chunk's
// object or extent does not.
func TestAppended(t *testing.T) {
	const z2 = `{"zarr_format": 2, "shape": [%d, 6], "chunks": [4, 6], "dtype": %q, "compressor": %s, "fill_value": 0, "order": "C", "filters": null}`
	const z3 = `{"zarr_format": 3, "node_type": "array", "shape": [%d], "data_type": "uint8", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
	  "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}], "attributes": {"n": %d}}`
	const n5 = `{"dimensions": [6, %d], "blockSize": [6, 4], "dataType": "uint16", "compression": {"type": "raw"}}`
	const pc = `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
	  "scales": [{"key": "s0", "size": [64, 64, %d], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[64, 64, 16]], "encoding": "raw"%s}]}`
	const sharded = `, "sharding": {"@type": "neuroglancer_uint64_sharded_v1", "preshift_bits": 0, "hash": "identity", "minishard_bits": 0, "shard_bits": 0, "minishard_index_encoding": "raw", "data_encoding": "raw"}`
	zlib := `{"id": "zlib", "level": 1}`
	for _, c := range []struct {
		name   string
		parse  func(string, []byte) (*Volume, error)
		old    string
		cur    string
		append bool
	}{
		{"zarr2 unchanged", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 10, "<u2", zlib), true},
		{"zarr2 resized", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 17, "<u2", zlib), true},
		{"zarr2 shrunk", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 8, "<u2", zlib), false},
		{"zarr2 byte order", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 10, ">u2", zlib), false},
		{"zarr2 byte order and resized", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 12, ">u2", zlib), false},
		{"zarr2 compressor", ParseZarr2, fmt.Sprintf(z2, 10, "<u2", zlib), fmt.Sprintf(z2, 10, "<u2", `null`), false},
		{"zarr3 resized, attributes edited", ParseZarr3, fmt.Sprintf(z3, 6, 1), fmt.Sprintf(z3, 9, 2), true},
		{"n5 grown at an aligned edge", ParseN5, fmt.Sprintf(n5, 8), fmt.Sprintf(n5, 12), true},
		{"n5 grown at a clipped edge", ParseN5, fmt.Sprintf(n5, 6), fmt.Sprintf(n5, 12), false},
		{"precomputed sections added", ParsePrecomputed, fmt.Sprintf(pc, 32, ""), fmt.Sprintf(pc, 48, ""), true},
		{"precomputed grown at a clipped edge", ParsePrecomputed, fmt.Sprintf(pc, 40, ""), fmt.Sprintf(pc, 48, ""), false},
		{"precomputed sharded, grid grown", ParsePrecomputed, fmt.Sprintf(pc, 32, sharded), fmt.Sprintf(pc, 48, sharded), false},
		{"precomputed sharded unchanged", ParsePrecomputed, fmt.Sprintf(pc, 32, sharded), fmt.Sprintf(pc, 32, sharded), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			parse := func(meta string) *Array {
				t.Helper()
				v, err := c.parse("a", []byte(meta))
				if err != nil {
					t.Fatal(err)
				}
				return v.Arrays[0]
			}
			old, cur := parse(c.old), parse(c.cur)
			if got := Appended(old, cur); got != c.append {
				t.Errorf("Appended: got %t, want %t", got, c.append)
			}
		})
	}
}
