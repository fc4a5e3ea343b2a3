package codec

import (
	"encoding/binary"
	"testing"
)

// TestMurmurhash3X86_128Tensorstore checks the hash of 8-byte
// little-endian keys against the vectors in tensorstore's
// kvstore/neuroglancer_uint64_sharded/murmurhash3_test.cc (computed there
// with the pymmh3 library): lanes h1 and h2, for seeds 0, 1 and 2.
func TestMurmurhash3X86_128Tensorstore(t *testing.T) {
	tests := []struct {
		key    uint64
		seed   uint32
		h1, h2 uint32
	}{
		{0, 0, 0xe028ae41, 0x4772b084},
		{0, 1, 0x5ad58a7e, 0x54337108},
		{0, 2, 0x64010da2, 0x62e8bc17},
		{1, 0, 0x16d4ce9a, 0xe8bd67d6},
		{1, 1, 0x4b7ab8c6, 0xeb555955},
		{1, 2, 0xeb2301be, 0x48e12494},
		{42, 0, 0x5119f47a, 0xc20b94f9},
		{42, 1, 0xd6b51bca, 0xa25ad86b},
		{42, 2, 0x2d83d9c7, 0x082115eb},
	}
	for _, tt := range tests {
		key := binary.LittleEndian.AppendUint64(nil, tt.key)
		lo, hi := Murmur3X86_128(key, tt.seed)
		want := uint64(tt.h2)<<32 | uint64(tt.h1)
		if lo != want {
			t.Errorf("murmurhash3_x86_128(%d, seed %d) low 64 bits = %#016x, want %#016x", tt.key, tt.seed, lo, want)
		}
		// With the upper key word zero, lanes h2, h3 and h4 end equal (the
		// tensorstore test lists all four).
		if wantHi := uint64(tt.h2)<<32 | uint64(tt.h2); hi != wantHi {
			t.Errorf("murmurhash3_x86_128(%d, seed %d) high 64 bits = %#016x, want %#016x", tt.key, tt.seed, hi, wantHi)
		}
	}
}

// TestMurmurhash3X86_128Verification runs SMHasher's verification test:
// hash the keys {}, {0}, {0, 1}, ..., {0..254} with seed 256-len, hash the
// concatenated digests with seed 0; the first four bytes of that digest,
// little-endian, are the published value 0xB3ECE62A for
// MurmurHash3_x86_128. It covers every tail length and multi-block keys.
func TestMurmurhash3X86_128Verification(t *testing.T) {
	key := make([]byte, 256)
	digests := make([]byte, 0, 16*256)
	for i := range 256 {
		key[i] = byte(i)
		lo, hi := Murmur3X86_128(key[:i], uint32(256-i))
		digests = binary.LittleEndian.AppendUint64(digests, lo)
		digests = binary.LittleEndian.AppendUint64(digests, hi)
	}
	lo, _ := Murmur3X86_128(digests, 0)
	if got := uint32(lo); got != 0xb3ece62a {
		t.Errorf("verification value = %#08x, want 0xb3ece62a", got)
	}
}
