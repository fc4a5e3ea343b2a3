package decode

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// TestCompressedSegmentationLargerThanRaw: a chunk of 1x1x1 blocks with one
// table per block (as the spec allows) stores 12 bytes for each 4-byte
// voxel, more than the stored-size bound of other encodings (twice the
// decoded size plus 1 MiB); a compressed_segmentation scale's bound admits
// it. The chunk is laid out here word by word from the spec.
func TestCompressedSegmentationLargerThanRaw(t *testing.T) {
	const n = 64
	info := `{"data_type": "uint32", "num_channels": 1, "scales": [{"key": "s0", "size": [64, 64, 64],
		"chunk_sizes": [[64, 64, 64]], "encoding": "compressed_segmentation",
		"compressed_segmentation_block_size": [1, 1, 1]}]}`
	v, err := ParsePrecomputed("", []byte(info))
	if err != nil {
		t.Fatal(err)
	}
	a := v.Arrays[0]
	const blocks = n * n * n
	le := binary.LittleEndian
	stored := make([]byte, 0, 4*(1+3*blocks))
	stored = le.AppendUint32(stored, 1) // channel 0's data starts at word 1
	want := make([]byte, 0, 4*blocks)
	for b := range uint32(blocks) {
		// Table at word 2*blocks+b of the channel, 0-bit values, values at 0.
		stored = le.AppendUint32(le.AppendUint32(stored, 2*blocks+b), 0)
	}
	for b := range uint32(blocks) {
		stored = le.AppendUint32(stored, b*2654435761)
		want = le.AppendUint32(want, b*2654435761)
	}
	c := []int64{0, 0, 0}
	if int64(len(stored)) <= 2*a.ChunkSize(c)+1<<20 {
		t.Fatalf("stored chunk of %d bytes fits the general bound; the test needs more", len(stored))
	}
	got, err := a.Load(context.Background(), newMemSource(map[string][]byte{"s0/0-64_0-64_0-64": stored}), c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("decoded chunk differs from the values laid out")
	}
	// However large the blocks, the bound stays within 4 times the decoded
	// size plus 1 MiB, and does not overflow.
	for _, block := range []string{"[1, 1, 1]", "[1048576, 1048576, 1048576]"} {
		v, err := ParsePrecomputed("", []byte(strings.Replace(info, "[1, 1, 1]", block, 1)))
		if err != nil {
			t.Fatal(err)
		}
		a := v.Arrays[0]
		if limit := a.StoredLimit(c); limit < 2*a.ChunkSize(c) || limit > 4*a.ChunkSize(c)+1<<20 {
			t.Errorf("blocks of %s: stored-size bound %d, want between 2 and 4 times the decoded %d plus 1 MiB", block, limit, a.ChunkSize(c))
		}
	}
}
