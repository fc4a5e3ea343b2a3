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
