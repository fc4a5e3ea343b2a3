package decode

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
)

// TestWideningFilterLoads loads a chunk whose astype filter stores each
// uint8 element as a float64, uncompressed: 8 MiB stored for 1 MiB decoded,
// more than the 2x (plus 1 MiB) of compressed data, in Zarr v2 and v3.
func TestWideningFilterLoads(t *testing.T) {
	const n = 1 << 20
	stored := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(stored[8*i:], math.Float64bits(float64(i%251)))
	}
	for _, tc := range []struct {
		name, key string
		parse     func(dir string, meta []byte) (*Volume, error)
		meta      string
	}{
		{"zarr2", "a/0", ParseZarr2, `{"zarr_format": 2, "shape": [1048576], "chunks": [1048576], "dtype": "|u1", "compressor": null,
			"fill_value": 0, "order": "C", "filters": [{"id": "astype", "decode_dtype": "|u1", "encode_dtype": "<f8"}]}`},
		{"zarr3", "a/c/0", ParseZarr3, `{"zarr_format": 3, "node_type": "array", "shape": [1048576], "data_type": "uint8",
			"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1048576]}}, "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
			"codecs": [{"name": "numcodecs.astype", "configuration": {"decode_dtype": "|u1", "encode_dtype": "<f8"}}, {"name": "bytes", "configuration": {"endian": "little"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.parse("a", []byte(tc.meta))
			if err != nil {
				t.Fatal(err)
			}
			a := v.Arrays[0]
			got, err := a.Load(context.Background(), newMemSource(map[string][]byte{tc.key: stored}), []int64{0})
			if err != nil {
				t.Fatalf("got %v, want the chunk (stored limit %d)", err, a.StoredLimit([]int64{0}))
			}
			for i, b := range got {
				if b != byte(i%251) {
					t.Fatalf("element %d: got %d, want %d", i, b, i%251)
				}
			}
		})
	}
}

// TestParseOME reads NGFF 0.4 and 0.5 multiscales and refuses malformed
// ones by field.
func TestParseOME(t *testing.T) {
	v04 := `{"multiscales": [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
		"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.5]}]}],
		"coordinateTransformations": [{"type": "scale", "scale": [1, 2, 2]}]}]}`
	img, err := ParseOME("img", ".zattrs", []byte(v04))
	if err != nil || img == nil || img.Version != "0.4" || len(img.Levels) != 1 || img.Levels[0].Scale[1] != 1 {
		t.Fatalf("v0.4: %+v, %v", img, err)
	}
	a := &Array{Shape: []int64{2, 10, 10}}
	if !img.Apply(a, 0) || a.Resolution[1] != 1000 || a.Resolution[0] != 1 || a.Axes[0].Type != "channel" {
		t.Errorf("Apply: resolution %v, axes %v", a.Resolution, a.Axes)
	}
	v05 := `{"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [{"axes": [{"name": "y"}, {"name": "x"}], "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [3, 3]}]}]}]}}}`
	if img, err := ParseOME("", "zarr.json", []byte(v05)); err != nil || img == nil || img.Version != "0.5" || img.Levels[0].Path != "s0" {
		t.Errorf("v0.5: %+v, %v", img, err)
	}
	if img, err := ParseOME("", ".zattrs", []byte(`{"answer": 42}`)); img != nil || err != nil {
		t.Errorf("no multiscales: %+v, %v", img, err)
	}
	for _, bad := range []string{
		`{"multiscales": [{"axes": [{"name": "x"}], "datasets": [{"path": "../up"}]}]}`,
		`{"multiscales": [{"axes": [], "datasets": []}]}`,
		`{"multiscales": {}}`,
	} {
		if _, err := ParseOME("", ".zattrs", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
