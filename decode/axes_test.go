package decode

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMaxAxes: an array of more than MaxAxes axes is refused, naming the
// shape field, in every format with a free number of axes; MaxAxes axes
// are read.
func TestMaxAxes(t *testing.T) {
	ones := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	for _, tc := range []struct {
		name, field string
		meta        func(n int) string
		parse       func(dir string, meta []byte) (*Volume, error)
	}{
		{"zarr2", "shape", func(n int) string {
			return fmt.Sprintf(`{"zarr_format": 2, "shape": %s, "chunks": %s, "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, ones(n), ones(n))
		}, ParseZarr2},
		{"zarr3", "shape", func(n int) string {
			return fmt.Sprintf(`{"zarr_format": 3, "node_type": "array", "shape": %s, "data_type": "uint8",
 "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": %s}},
 "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}]}`, ones(n), ones(n))
		}, ParseZarr3},
		{"n5", "dimensions", func(n int) string {
			return fmt.Sprintf(`{"dimensions": %s, "blockSize": %s, "dataType": "uint8", "compression": {"type": "raw"}}`, ones(n), ones(n))
		}, ParseN5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.parse("a", []byte(tc.meta(MaxAxes))); err != nil {
				t.Errorf("%d axes: %v, want them read", MaxAxes, err)
			}
			for _, n := range []int{MaxAxes + 1, 40000} {
				_, err := tc.parse("a", []byte(tc.meta(n)))
				var me *MetadataError
				if !errors.As(err, &me) || me.Field != tc.field || !errors.Is(err, ErrUnsupported) ||
					!strings.Contains(err.Error(), fmt.Sprintf("%d axes", n)) {
					t.Errorf("%d axes: %v, want an unsupported %s naming %d axes", n, err, tc.field, n)
				}
			}
		})
	}
}
