package fs

import (
	"bytes"
	"context"
	"fmt"
	"testing"
)

// viewLayer returns the files of a raw uint8 precomputed layer of 256 x
// 256 x 128 voxels in chunks of 64 x 64 x 16 (128 chunks of 64 KiB; its
// volume.raw is 8 read-ahead blocks), and the bytes of its volume.raw.
func viewLayer() (map[string][]byte, []byte) {
	const nx, ny, nz, cx, cy, cz = 256, 256, 128, 64, 64, 16
	vol := make([]byte, nx*ny*nz) // x fastest: the bytes of volume.raw
	for i := range vol {
		vol[i] = byte(i*7 + i/nx/3)
	}
	files := map[string][]byte{"layer/info": fmt.Appendf(nil, `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
		"scales": [{"key": "s0", "size": [%d, %d, %d], "resolution": [4, 4, 40], "chunk_sizes": [[%d, %d, %d]], "encoding": "raw"}]}`,
		nx, ny, nz, cx, cy, cz)}
	for z0 := 0; z0 < nz; z0 += cz {
		for y0 := 0; y0 < ny; y0 += cy {
			for x0 := 0; x0 < nx; x0 += cx {
				var chunk []byte
				for z := z0; z < z0+cz; z++ {
					for y := y0; y < y0+cy; y++ {
						chunk = append(chunk, vol[(z*ny+y)*nx+x0:(z*ny+y)*nx+x0+cx]...)
					}
				}
				files[fmt.Sprintf("layer/s0/%d-%d_%d-%d_%d-%d", x0, x0+cx, y0, y0+cy, z0, z0+cz)] = chunk
			}
		}
	}
	return files, vol
}

// TestViewReadAheadTracker: a view file's reader reads ahead under the
// tree's tracker machinery: its prefetches are charged to the global
// --read-ahead budget (never above it) and counted in its metrics, all
// read by a sequential reader, and cancelled with their budget returned
// when the reader jumps back.
func TestViewReadAheadTracker(t *testing.T) {
	files, vol := viewLayer()
	for _, tc := range []struct {
		name      string
		readAhead int64
		order     []int64 // blocks read, in order
		wantUsed  bool    // every prefetch is read
		wantJump  bool    // a cancel, with its budget returned
	}{
		{"sequential", 64 << 20, []int64{0, 1, 2, 3, 4, 5, 6, 7}, true, false},
		{"sequential, budget of one block", 1 << 20, []int64{0, 1, 2, 3, 4, 5, 6, 7}, true, false},
		{"jump back", 64 << 20, []int64{0, 1, 2, 3, 0}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, _ := newTree(t, files, Options{ReadAhead: tc.readAhead})
			defer tree.Close()
			n, err := tree.Resolve(context.Background(), "layer/s0/volume.raw")
			if err != nil {
				t.Fatal(err)
			}
			f := n.(File)
			buf := make([]byte, viewBlock)
			for _, b := range tc.order {
				k, err := f.ReadAt(context.Background(), buf, b*viewBlock)
				if err != nil || !bytes.Equal(buf[:k], vol[b*viewBlock:b*viewBlock+int64(k)]) {
					t.Fatalf("volume.raw block %d: %d bytes, %v; want the volume's %d", b, k, err, viewBlock)
				}
				if s := tree.budget.Stats(); s.Bytes > s.Max {
					t.Fatalf("after block %d the read-ahead holds %d bytes, over the budget of %d", b, s.Bytes, s.Max)
				}
			}
			s := tree.budget.Stats()
			t.Logf("budget: %+v", s)
			if s.Issued == 0 {
				t.Errorf("read-ahead positions issued for volume.raw: got 0, want some")
			}
			if tc.wantUsed && (s.Used != s.Issued || s.Bytes != 0) {
				t.Errorf("a sequential read used %d of %d positions and holds %d bytes, want all and 0", s.Used, s.Issued, s.Bytes)
			}
			if tc.wantJump && (s.Cancels == 0 || s.Wasted == 0 || s.Bytes != 0) {
				t.Errorf("a jump back: %d cancels, %d wasted, %d bytes held; want a cancel, waste, and 0 bytes held", s.Cancels, s.Wasted, s.Bytes)
			}
			st := tree.StoreStats()
			if st.PrefetchIssued == 0 {
				t.Errorf("chunks prefetched for volume.raw: got 0, want some")
			}
			// The chunks prefetched are the ones the reads then need (in
			// the array's metadata order, not the view's).
			if tc.wantUsed && st.PrefetchUsed != st.PrefetchIssued {
				t.Errorf("chunks prefetched for a sequential read: %d used of %d, want all", st.PrefetchUsed, st.PrefetchIssued)
			}
		})
	}
}

// TestViewReadAheadHostile: on geometries of a chunk per byte (a column
// of 2^40 one-sample chunks, a row of 2^23), a reader that steps through
// volume.raw block by block has its read-ahead list at most
// viewAheadChunks chunks for each block before and each block prefetched:
// its work follows the blocks read, never the chunks under a block (a
// million) or the file's (2^40).
func TestViewReadAheadHostile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape string
	}{
		{"2^40 rows", "[1, 1099511627776, 1]"},
		{"2^23 columns", "[1, 1, 8388608]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{"a/.zarray": fmt.Appendf(nil, `{"zarr_format": 2, "shape": %s, "chunks": [1, 1, 1], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, tc.shape)}
			tree, _ := newTree(t, files, Options{ReadAhead: 64 << 20, CacheBytes: 16 << 20})
			defer tree.Close()
			n, err := tree.Resolve(context.Background(), "a/volume.raw")
			if err != nil {
				t.Fatal(err)
			}
			f := n.(*viewFile)
			const blocks = 6
			buf := make([]byte, 16)
			for b := range int64(blocks) {
				k, err := f.ReadAt(context.Background(), buf, b*viewBlock+viewBlock-int64(len(buf)))
				if err != nil || !bytes.Equal(buf[:k], make([]byte, len(buf))) {
					t.Fatalf("block %d: %d bytes, %v; want %d zeros", b, k, err, len(buf))
				}
			}
			s := tree.budget.Stats()
			listed := f.sequence().listed.Load()
			t.Logf("budget %+v; chunks listed %d", s, listed)
			if s.Issued == 0 {
				t.Fatalf("read-ahead positions issued: got 0, want some")
			}
			if limit := 2 * s.Issued * viewAheadChunks; listed > limit {
				t.Errorf("read-ahead listed %d chunks for %d positions, want at most %d", listed, s.Issued, limit)
			}
		})
	}
}
