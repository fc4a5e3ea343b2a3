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

// TestLooksLikeParquetSet: the look at a directory's .zmetadata takes a
// Parquet reference set's, whole or cut where its record_size has been
// read, and not a consolidated Zarr group's nor anything else.
func TestLooksLikeParquetSet(t *testing.T) {
	big := strings.Repeat("x", 20000)
	for _, c := range []struct {
		head  string
		whole bool
		want  bool
	}{
		{`{"metadata": {".zgroup": {"zarr_format": 2}}, "record_size": 100000}`, true, true},
		{` {"record_size": 3, "metadata": {}}`, true, true},
		{`{"metadata": {".zgroup": {"zarr_format": 2}}, "zarr_consolidated_format": 1}`, true, false},
		{`{"metadata": {".zattrs": {"record_size": 3}}, "zarr_consolidated_format": 1}`, true, false},
		{`{"metadata": {}, "record_size": 3`, true, false},
		{`{"record_size": 3}`, true, false},
		{`{"metadata": {"a/.zattrs": {"t": "` + big, false, false},
		{`{"record_size": 3, "metadata": {"a/.zattrs": {"t": "` + big, false, true},
		{`<html>"metadata" "record_size"</html>`, false, false},
		{``, true, false},
	} {
		if got := looksLikeParquetSet([]byte(c.head), c.whole); got != c.want {
			t.Errorf("%.60s (whole %v): %v, want %v", c.head, c.whole, got, c.want)
		}
	}
}
