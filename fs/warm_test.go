package fs

import (
	"fmt"
	"slices"
	"testing"

	"github.com/volfs/volfs/decode"
)

// TestChunkBox: a box of voxels becomes the chunk index ranges that meet
// it, x first whichever end of the axes x is, with the array's voxel
// offset taken off and the grid's bounds kept.
func TestChunkBox(t *testing.T) {
	pre := &decode.Array{Key: "s0", Shape: []int64{100, 64, 10}, Offset: []int64{50, 0, 0}, Chunk: []int64{32, 32, 4}, Grid: []int64{4, 2, 3}}
	zarr := &decode.Array{Key: "a", Shape: []int64{10, 64, 100}, Offset: []int64{0, 0, 0}, Chunk: []int64{4, 32, 32}, Grid: []int64{3, 2, 4}, XLast: true}
	tests := []struct {
		name string
		a    *decode.Array
		bbox []Range
		want string
		bad  bool
	}{
		{"one chunk", pre, []Range{{50, 82}}, "[[0 1] [0 2] [0 3]]", false},
		{"offset and straddling", pre, []Range{{81, 83}, {31, 33}, {8, 9}}, "[[0 2] [0 2] [2 3]]", false},
		{"before the offset", pre, []Range{{0, 10}}, "[[0 0] [0 2] [0 3]]", false},
		{"past the end", pre, []Range{{1000, 2000}}, "[[4 4] [0 2] [0 3]]", false},
		{"x last", zarr, []Range{{0, 32}, {32, 64}, {4, 8}}, "[[1 2] [1 2] [0 1]]", false},
		{"too many ranges", &decode.Array{Key: "b", Shape: []int64{4}, Offset: []int64{0}, Chunk: []int64{2}, Grid: []int64{2}}, []Range{{0, 1}, {0, 1}}, "", true},
		{"empty range", pre, []Range{{5, 5}}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chunkBox(tc.a, tc.bbox)
			if tc.bad {
				if err == nil {
					t.Errorf("chunkBox = %v, want an error", got)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != tc.want {
				t.Errorf("chunkBox = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestGridChunks: every chunk of a box once, the last axis fastest; an
// empty box none.
func TestGridChunks(t *testing.T) {
	a := &decode.Array{Grid: []int64{3, 2}}
	var got [][]int64
	gridChunks(a, [][2]int64{{1, 3}, {0, 2}}, func(_ *decode.Array, c []int64) bool {
		got = append(got, c)
		return true
	})
	want := [][]int64{{1, 0}, {1, 1}, {2, 0}, {2, 1}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got %v, want %v", got, want)
	}
	n := 0
	gridChunks(a, [][2]int64{{1, 1}, {0, 2}}, func(*decode.Array, []int64) bool { n++; return true })
	if n != 0 {
		t.Errorf("empty box: %d chunks, want 0", n)
	}
}
