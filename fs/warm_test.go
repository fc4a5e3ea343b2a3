package fs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
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

// cancelAfter is a source that ends a warm (cancel) as it answers the
// fetch of the chunk at key, with the chunk's bytes: the interrupt comes
// after the chunk was fetched, before the warm has reported it.
type cancelAfter struct {
	fetcher.Fetcher
	key    string
	cancel context.CancelFunc
}

func (f cancelAfter) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	o, err := f.Fetcher.Get(ctx, key, limit)
	if key == f.key {
		f.cancel()
	}
	return o, err
}

// TestWarmInterruptCounted: a chunk whose load completes as the warm is
// interrupted is kept, and reported as such: the results counted are the
// chunks the disk cache holds.
func TestWarmInterruptCounted(t *testing.T) {
	const key = "layer/s0/0-4_0-4_0-2"
	_, d, src := diskSource(t, map[string][]byte{"layer/info": []byte(testInfo), key: chunk0()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tree, err := New(context.Background(), cancelAfter{src, key, cancel}, Options{Disk: cache.NewDisk(d), CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	plan, err := tree.PlanWarm(context.Background(), []string{"layer/s0"}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []WarmResult
	err = plan.Run(ctx, 1, false, func(r WarmResult) { got = append(got, r) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	kept := 0
	for _, r := range got {
		if r.Status == WarmFetched && r.NotKept == nil {
			kept++
		}
	}
	t.Logf("reported %+v", got)
	if kept != 1 {
		t.Errorf("reported %d chunks kept, want 1: the chunk fetched as the warm was interrupted", kept)
	}
}
