package fuse

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/volfs/volfs/decode"
)

// hugeScales returns the arrays of a precomputed layer of n scales, each a
// grid of 2^62 one-voxel chunks: ranges of that size, reserved one after
// another with unchecked arithmetic, wrap past 2^64 at the fourth.
func hugeScales(t *testing.T, n int) []*decode.Array {
	t.Helper()
	var scales []string
	for i := range n {
		scales = append(scales, fmt.Sprintf(`{"key": "s%d", "size": [4611686018427387904, 1, 1], "resolution": [1, 1, 1], "chunk_sizes": [[1, 1, 1]], "encoding": "raw"}`, i))
	}
	info := `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1, "scales": [` + strings.Join(scales, ",") + `]}`
	vol, err := decode.ParsePrecomputed("", []byte(info))
	if err != nil {
		t.Fatal(err)
	}
	return vol.Arrays
}

// TestInoTable: numbers are unique across arrays whose ranges would wrap
// past 2^64, across chunk files and paths, and once the low space is used
// up; never 0, 1 or 2^64-1; and the table of paths stays bounded.
func TestInoTable(t *testing.T) {
	for _, tc := range []struct {
		name           string
		low, high, max uint64
		paths          int
	}{
		{"default limits", lowLimit, highLimit, maxRange, maxPaths},
		{"no ranges", lowLimit, highLimit, 0, maxPaths},
		{"small low space", 1 << 10, highLimit, 1 << 8, 64},
		{"high space near 2^64", 16, math.MaxUint64 - 1, 4, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newInoTableLimits(tc.low, tc.high, tc.max, tc.paths)
			arrays := append(hugeScales(t, 5), smallArrays(t)...)
			seen := map[uint64]string{}
			take := func(a *decode.Array, i int64, p string) {
				t.Helper()
				ino, err := m.number(a, i, p)
				if err != nil {
					t.Fatalf("of(%s): %v", p, err)
				}
				if ino == 0 || ino == 1 || ino == math.MaxUint64 {
					t.Errorf("of(%s): got reserved number %d", p, ino)
				}
				if prev, ok := seen[ino]; ok && prev != p {
					t.Errorf("of(%s): got %d, already the number of %s", p, ino, prev)
				}
				seen[ino] = p
			}
			for round := range 2 {
				for ai, a := range arrays {
					for _, i := range []int64{0, 1, a.NumChunks() - 1} {
						take(a, i, fmt.Sprintf("a%d/%d", ai, i))
					}
				}
				for i := range 200 {
					take(nil, 0, fmt.Sprintf("dir/%d/%d", round, i))
				}
			}
			if m.paths.Len() > tc.paths {
				t.Errorf("paths remembered: got %d, want at most %d", m.paths.Len(), tc.paths)
			}
		})
	}
}

// TestInoTableUsedUp: once the high space is used up a lookup fails, and
// never hands out a number twice.
func TestInoTableUsedUp(t *testing.T) {
	m := newInoTableLimits(4, 6, 0, 8)
	var got []uint64
	for i := range 4 {
		ino, err := m.number(nil, 0, fmt.Sprint(i))
		if err != nil {
			break
		}
		got = append(got, ino)
	}
	if want := []uint64{2, 3, 4, 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("numbers: got %v, want %v", got, want)
	}
	if _, err := m.number(nil, 0, "one more"); !errors.Is(err, errInoSpace) {
		t.Errorf("past the space: got %v, want %v", err, errInoSpace)
	}
}

// smallArrays returns an ordinary array, to mix with huge ones.
func smallArrays(t *testing.T) []*decode.Array {
	t.Helper()
	vol, err := decode.ParsePrecomputed("", []byte(testInfo))
	if err != nil {
		t.Fatal(err)
	}
	return vol.Arrays
}
