package disk

import (
	"bytes"
	"fmt"
	"testing"
)

// TestGetUpTo: an entry of any size up to the bound is returned whole, put
// stored or compressed, with its identity checked; one past the bound is a
// miss.
func TestGetUpTo(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	tests := []struct {
		size       int
		compressed bool
		bound      int64
		hit        bool
	}{
		{0, false, 0, true},
		{100, false, 100, true},
		{100, false, 1000, true},
		{100, false, 99, false},
		{10, true, 64, true}, // a tiny zstd frame states no size
		{5000, true, 5000, true},
		{5000, true, 1 << 20, true},
		{5000, true, 4999, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d_%v_%d", tc.size, tc.compressed, tc.bound), func(t *testing.T) {
			key := fmt.Sprint("k", tc.size, tc.compressed, tc.bound)
			data := bytes.Repeat([]byte("meta"), tc.size/4+1)[:tc.size]
			put := c.Put
			if tc.compressed {
				put = c.PutCompressed
			}
			if err := put(key, []byte("id1"), data); err != nil {
				t.Fatal(err)
			}
			var ident string
			got, ok := c.GetUpTo(key, tc.bound, func(id []byte) error { ident = string(id); return nil })
			if ok != tc.hit || ok && (!bytes.Equal(got, data) || ident != "id1") {
				t.Errorf("GetUpTo(%d) of %d bytes: %d bytes, %v, identity %q; want hit %v", tc.bound, tc.size, len(got), ok, ident, tc.hit)
			}
		})
	}
	if _, ok := c.GetUpTo("never put", 100, anyIdent); ok {
		t.Error("a key never put: got a hit")
	}
}
