package codec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestShuffleDefinitions checks the word-at-a-time unshuffles against the
// definitions, element by element and bit by bit, for every typesize up
// to 9 and lengths that leave partial words, odd element counts and
// trailing bytes. (Agreement with c-blosc itself is TestNumcodecs' and
// TestBloscCompat's job.)
func TestShuffleDefinitions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for typesize := 1; typesize <= 9; typesize++ {
		for _, size := range []int{0, 1, 7, 8, 15, 16, 63, 64, 65, 127, 128, 129, 1000, 1024, 4099} {
			src := make([]byte, size)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			n := size / typesize
			// Byte shuffle: byte j of element i is at j*n + i.
			want := bytes.Clone(src)
			for i := range n {
				for j := range typesize {
					want[i*typesize+j] = src[j*n+i]
				}
			}
			got := make([]byte, size)
			unshuffle(got, src, typesize)
			if !bytes.Equal(got, want) {
				t.Errorf("unshuffle typesize %d, %d bytes: got %x, want %x", typesize, size, got, want)
			}
			// Bitshuffle: bit k of byte j of element i is bit i%8 of
			// byte (8j+k)*n/8 + i/8; blocks of n%8 != 0 elements are
			// stored as they are.
			want = bytes.Clone(src)
			if n%8 == 0 {
				for i := range n {
					for j := range typesize {
						var b byte
						for k := range 8 {
							b |= (src[(8*j+k)*(n/8)+i/8] >> (i % 8) & 1) << k
						}
						want[i*typesize+j] = b
					}
				}
			}
			scratch := bytes.Clone(src)
			bitunshuffle(got, scratch, typesize)
			if !bytes.Equal(got, want) {
				t.Errorf("bitunshuffle typesize %d, %d bytes: got %x, want %x", typesize, size, got, want)
			}
		}
	}
}
