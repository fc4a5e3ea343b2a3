package refs

import (
	"strings"
	"testing"
)

// TestLooksLikeSetStrict: the sniff of an object whose name says nothing
// takes version 1 and version 0 sets, however their first member is
// long, and nothing a directory source's URL may answer with.
func TestLooksLikeSetStrict(t *testing.T) {
	big := strings.Repeat("x", 20000)
	for _, c := range []struct {
		head string
		want bool
	}{
		{`{"version": 1, "refs": {}}`, true},
		{` {"refs": {".zgroup": "{}"}}`, true},
		{`{"templates": {"a": "b.h5"}, "gen": [], "refs": {"x": ["{{a}}", 0, 1]}}`, true},
		{`{".zgroup": "{\"zarr_format\": 2}", "a/0": ["b", 0, 1]}`, true},
		{`{"a/.zarray": "` + big + `"}`, true},
		{`{".zattrs": "{}"`, true},
		{`{"version": "0.4", "multiscales": []}`, false},
		{`{"version": 2}`, false},
		{`{"zarr_format": 2}`, false},
		{`{"metadata": {".zgroup": {"zarr_format": 2}}, "zarr_consolidated_format": 1}`, false},
		{`{"zarr_format": 3, "node_type": "group"}`, false},
		{`{"@type": "neuroglancer_multiscale_volume", "scales": []}`, false},
		{`{"files": [".zarray"], "version": 1}`, false},
		{`{".zarray": {"zarr_format": 2}}`, false},
		{`{"refs": [1]}`, false},
		{`<html><body><a href=".zarray">.zarray</a></body></html>`, false},
		{`[{"version": 1}]`, false},
		{``, false},
		{`{"templates": {"a": "` + big + `"}, "version": 1}`, false},
	} {
		head := c.head
		if len(head) > sniffStrictBytes {
			head = head[:sniffStrictBytes]
		}
		if got := looksLikeSetStrict([]byte(head)); got != c.want {
			t.Errorf("%.60s: %v, want %v", c.head, got, c.want)
		}
	}
}
