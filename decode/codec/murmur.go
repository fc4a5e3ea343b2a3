package codec

import (
	"encoding/binary"
	"math/bits"
)

// Murmur3X86_128 is Austin Appleby's MurmurHash3_x86_128 of key with
// seed: four 32-bit lanes, the variant neuroglancer's sharded format names
// "murmurhash3_x86_128" (not MurmurHash3_x64_128, which most Go packages
// implement and which gives other values). It returns the 16-byte digest
// read as two little-endian uint64 words: lo holds lanes h1 (low half) and
// h2, hi holds h3 and h4.
func Murmur3X86_128(key []byte, seed uint32) (lo, hi uint64) {
	const (
		c1 = 0x239b961b
		c2 = 0xab0e9789
		c3 = 0x38b34ae5
		c4 = 0xa1e38b93
	)
	h1, h2, h3, h4 := seed, seed, seed, seed
	n := len(key)
	body := key[:n/16*16]
	for ; len(body) >= 16; body = body[16:] {
		k1 := binary.LittleEndian.Uint32(body[0:])
		k2 := binary.LittleEndian.Uint32(body[4:])
		k3 := binary.LittleEndian.Uint32(body[8:])
		k4 := binary.LittleEndian.Uint32(body[12:])

		h1 ^= bits.RotateLeft32(k1*c1, 15) * c2
		h1 = (bits.RotateLeft32(h1, 19)+h2)*5 + 0x561ccd1b
		h2 ^= bits.RotateLeft32(k2*c2, 16) * c3
		h2 = (bits.RotateLeft32(h2, 17)+h3)*5 + 0x0bcaa747
		h3 ^= bits.RotateLeft32(k3*c3, 17) * c4
		h3 = (bits.RotateLeft32(h3, 15)+h4)*5 + 0x96cd1c35
		h4 ^= bits.RotateLeft32(k4*c4, 18) * c1
		h4 = (bits.RotateLeft32(h4, 13)+h1)*5 + 0x32ac3b17
	}

	// The tail: up to 15 bytes, read little-endian into four lanes, each lane
	// mixed only if some of its bytes are present.
	tail := key[n/16*16:]
	var k [4]uint32
	for i, b := range tail {
		k[i/4] |= uint32(b) << (8 * (i % 4))
	}
	if len(tail) > 12 {
		h4 ^= bits.RotateLeft32(k[3]*c4, 18) * c1
	}
	if len(tail) > 8 {
		h3 ^= bits.RotateLeft32(k[2]*c3, 17) * c4
	}
	if len(tail) > 4 {
		h2 ^= bits.RotateLeft32(k[1]*c2, 16) * c3
	}
	if len(tail) > 0 {
		h1 ^= bits.RotateLeft32(k[0]*c1, 15) * c2
	}

	l := uint32(n)
	h1, h2, h3, h4 = h1^l, h2^l, h3^l, h4^l
	h1 += h2 + h3 + h4
	h2 += h1
	h3 += h1
	h4 += h1
	h1, h2, h3, h4 = fmix32(h1), fmix32(h2), fmix32(h3), fmix32(h4)
	h1 += h2 + h3 + h4
	h2 += h1
	h3 += h1
	h4 += h1
	return uint64(h2)<<32 | uint64(h1), uint64(h4)<<32 | uint64(h3)
}

// fmix32 is MurmurHash3's finalisation mix: it makes every input bit
// affect every output bit.
func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
