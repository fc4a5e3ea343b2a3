package decode

import "encoding/binary"

// unshuffle undoes blosc's byte shuffle of one block: src holds byte 0 of
// every element, then byte 1 of every element, and so on; dst gets the
// elements back. The len(src) % typesize trailing bytes were never
// shuffled and are copied as they are (c-blosc's unshuffle_generic). dst
// and src have the same length and do not overlap.
func unshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	switch typesize {
	case 2:
		s0, s1 := src[:n], src[n:2*n]
		d := dst[:2*n]
		for i := range s0 {
			d[2*i] = s0[i]
			d[2*i+1] = s1[i]
		}
	case 4:
		s0, s1, s2, s3 := src[:n], src[n:2*n], src[2*n:3*n], src[3*n:4*n]
		d := dst[:4*n]
		for i := range s0 {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(s0[i])|uint32(s1[i])<<8|uint32(s2[i])<<16|uint32(s3[i])<<24)
		}
	default:
		for j := range typesize {
			s := src[j*n : (j+1)*n]
			for i, b := range s {
				dst[i*typesize+j] = b
			}
		}
	}
	copy(dst[n*typesize:], src[n*typesize:])
}

// bitunshuffle undoes the bitshuffle filter (the bitshuffle library that
// c-blosc embeds) on one block. The shuffled block is 8*typesize rows of
// n/8 bytes, n = len(src)/typesize: row 8*j+k holds bit k of byte j of
// every element, element i at bit i%8 of byte i/8. As in c-blosc 1.x, only
// a whole number of elements that is a multiple of 8 is shuffled: when n
// is not, the block is stored as it is; the len(src) % typesize trailing
// bytes are never shuffled.
func bitunshuffle(dst, src []byte, typesize int) {
	n := len(src) / typesize
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	row := n / 8
	for j := range typesize {
		for g := range row {
			// Gather the 8x8 bit matrix of elements 8g..8g+7, byte j:
			// byte k of x is row 8j+k, so bit 8k+e is bit k of element e.
			var x uint64
			for k := range 8 {
				x |= uint64(src[(8*j+k)*row+g]) << (8 * k)
			}
			x = transpose8x8(x)
			// Now byte e of x is byte j of element 8g+e.
			base := 8*g*typesize + j
			for e := range 8 {
				dst[base+e*typesize] = byte(x >> (8 * e))
			}
		}
	}
	copy(dst[n*typesize:], src[n*typesize:])
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
