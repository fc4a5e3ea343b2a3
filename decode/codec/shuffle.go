package codec

import "encoding/binary"

// unshuffle undoes blosc's byte shuffle of one block: src holds byte 0 of
// every element, then byte 1 of every element, and so on; dst gets the
// elements back. The len(src) % typesize trailing bytes were never
// shuffled and are copied as they are (c-blosc's unshuffle_generic). dst
// and src have the same length and do not overlap.
func unshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	i := 0 // elements done by the word-at-a-time paths
	switch typesize {
	case 2:
		s0, s1, d := src[:n], src[n:2*n], dst[:2*n]
		for ; i+8 <= n; i += 8 {
			a, b := binary.LittleEndian.Uint64(s0[i:]), binary.LittleEndian.Uint64(s1[i:])
			o := d[2*i : 2*i+16]
			binary.LittleEndian.PutUint64(o, interleave2(uint32(a), uint32(b)))
			binary.LittleEndian.PutUint64(o[8:], interleave2(uint32(a>>32), uint32(b>>32)))
		}
	case 4:
		s0, s1, s2, s3, d := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n], dst[:4*n]
		for ; i+8 <= n; i += 8 {
			a, b := binary.LittleEndian.Uint64(s0[i:]), binary.LittleEndian.Uint64(s1[i:])
			c, e := binary.LittleEndian.Uint64(s2[i:]), binary.LittleEndian.Uint64(s3[i:])
			o := d[4*i : 4*i+32]
			lo, hi := interleave4(uint32(a), uint32(b), uint32(c), uint32(e))
			binary.LittleEndian.PutUint64(o, lo)
			binary.LittleEndian.PutUint64(o[8:], hi)
			lo, hi = interleave4(uint32(a>>32), uint32(b>>32), uint32(c>>32), uint32(e>>32))
			binary.LittleEndian.PutUint64(o[16:], lo)
			binary.LittleEndian.PutUint64(o[24:], hi)
		}
	}
	for j := range typesize {
		s := src[j*n : (j+1)*n]
		for k := i; k < n; k++ {
			dst[k*typesize+j] = s[k]
		}
	}
	copy(dst[n*typesize:], src[n*typesize:])
}

// spread8 moves byte k of v to byte 2k of the result.
func spread8(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	return (x | x<<8) & 0x00ff00ff00ff00ff
}

// spread16 moves the 16-bit half k of v to bytes 4k, 4k+1 of the result.
func spread16(v uint32) uint64 {
	x := uint64(v)
	return (x | x<<16) & 0x0000ffff0000ffff
}

// interleave2 returns a0 b0 a1 b1 a2 b2 a3 b3, where ak is byte k of a.
func interleave2(a, b uint32) uint64 {
	return spread8(a) | spread8(b)<<8
}

// interleave4 returns a0 b0 c0 d0 a1 b1 c1 d1 (lo) and the same for bytes
// 2 and 3 (hi).
func interleave4(a, b, c, d uint32) (lo, hi uint64) {
	ab, cd := interleave2(a, b), interleave2(c, d)
	lo = spread16(uint32(ab)) | spread16(uint32(cd))<<16
	hi = spread16(uint32(ab>>32)) | spread16(uint32(cd>>32))<<16
	return lo, hi
}

// bitunshuffle undoes the bitshuffle filter (the bitshuffle library that
// c-blosc embeds) on one block, using src as scratch. The shuffled block is
// 8*typesize rows of n/8 bytes, n = len(src)/typesize: row 8*j+k holds bit
// k of byte j of every element, element i at bit i%8 of byte i/8. As in
// c-blosc 1.x, only a whole number of elements that is a multiple of 8 is
// shuffled: when n is not, the block is stored as it is; the
// len(src) % typesize trailing bytes are never shuffled.
//
// Each plane of 8 rows is turned into plane j of the byte shuffle (byte j
// of every element) in dst; for typesize > 1, unshuffle then interleaves
// the planes into src, which is copied back.
func bitunshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	for j := range typesize {
		bitPlane(dst[j*n:(j+1)*n], src[j*n:(j+1)*n])
	}
	if typesize > 1 {
		unshuffle(src[:n*typesize], dst[:n*typesize], typesize)
		copy(dst, src[:n*typesize])
	}
	copy(dst[n*typesize:], src[n*typesize:])
}

// bitPlane turns 8 rows of len(in)/8 bytes, row k holding bit k of every
// byte, back into the bytes.
func bitPlane(out, in []byte) {
	row := len(in) / 8
	r0, r1, r2, r3 := in[:row], in[row:2*row], in[2*row:3*row], in[3*row:4*row]
	r4, r5, r6, r7 := in[4*row:5*row], in[5*row:6*row], in[6*row:7*row], in[7*row:8*row]
	out = out[:8*row]
	for g := range r0 {
		x := uint64(r0[g]) | uint64(r1[g])<<8 | uint64(r2[g])<<16 | uint64(r3[g])<<24 |
			uint64(r4[g])<<32 | uint64(r5[g])<<40 | uint64(r6[g])<<48 | uint64(r7[g])<<56
		binary.LittleEndian.PutUint64(out[8*g:], transpose8x8(x))
	}
}

// transpose8x8 transposes the 8x8 bit matrix whose row r is byte r of x
// (bit c of that byte being column c): bit 8r+c moves to bit 8c+r.
func transpose8x8(x uint64) uint64 {
	t := (x ^ (x >> 7)) & 0x00AA00AA00AA00AA
	x ^= t ^ (t << 7)
	t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCC
	x ^= t ^ (t << 14)
	t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0
	x ^= t ^ (t << 28)
	return x
}
