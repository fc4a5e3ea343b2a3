package decode

import "testing"

// TestXLast: zarr names its axes slowest first in either storage order,
// so its last axis is x; precomputed and N5 name x first.
func TestXLast(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func(string, []byte) (*Volume, error)
		meta  string
		want  bool
	}{
		{"zarr2 C", ParseZarr2, `{"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<u2", "order": "C", "compressor": null, "fill_value": 0, "filters": null}`, true},
		{"zarr2 F", ParseZarr2, `{"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<u2", "order": "F", "compressor": null, "fill_value": 0, "filters": null}`, true},
		{"zarr3", ParseZarr3, `{"zarr_format": 3, "node_type": "array", "shape": [2, 3], "data_type": "uint16",
			"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}},
			"chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}`, true},
		{"n5", ParseN5, `{"dimensions": [3, 2], "blockSize": [3, 2], "dataType": "uint16", "compression": {"type": "raw"}}`, false},
		{"precomputed", ParsePrecomputed, `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1, "type": "image",
			"scales": [{"key": "s0", "size": [3, 2, 1], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[3, 2, 1]], "encoding": "raw"}]}`, false},
	} {
		vol, err := tc.parse("a", []byte(tc.meta))
		if err != nil || vol == nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := vol.Arrays[0].XLast; got != tc.want {
			t.Errorf("%s: XLast %v, want %v", tc.name, got, tc.want)
		}
	}
}
