package codec

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// CompressedSegmentation decodes a neuroglancer compressed_segmentation
// chunk (neuroglancer's sliceview/compressed_segmentation/README.md, in the
// multi-channel form that the precomputed format stores) and appends the raw
// layout to dst[:0]: little-endian elements of elemSize bytes (4 for uint32,
// 8 for uint64), x fastest, then y, z and channel, extent[0] x extent[1] x
// extent[2] voxels per channel. block is the compression block size in
// voxels (x, y, z), from the scale's compressed_segmentation_block_size.
//
// The stored chunk begins with one uint32 per channel: the offset of that
// channel's data in 32-bit words from the start of the chunk. A channel's
// data begins with one 64-bit header per block (x fastest): a 24-bit lookup
// table offset, an 8-bit number of bits per encoded value (0, 1, 2, 4, 8,
// 16 or 32) and a 32-bit offset of the encoded values, both offsets in
// words from the start of the channel's data. Blocks may share lookup
// tables; edge blocks are partial, their values still laid out with the
// full block's strides.
//
// Every offset and table index is checked against the input: input that
// does not describe a complete chunk is an error wrapping ErrCorrupt, never
// a panic. The output is allocated once, at exactly the size extent,
// channels and elemSize give, whatever the input claims.
func CompressedSegmentation(dst, src []byte, extent [3]int64, channels, elemSize int, block [3]int64) ([]byte, error) {
	if elemSize != 4 && elemSize != 8 {
		return nil, fmt.Errorf("compressed_segmentation: %d-byte elements: %w", elemSize, ErrUnsupported)
	}
	voxels, ok := checkedVolume(extent)
	if !ok || channels < 1 || voxels > MaxChunkBytes/int64(channels*elemSize) {
		return nil, fmt.Errorf("%w: compressed_segmentation: chunk of %v voxels x %d channels is out of range", ErrCorrupt, extent, channels)
	}
	for _, b := range block {
		if b < 1 || b > 1<<31 {
			return nil, fmt.Errorf("%w: compressed_segmentation: block size %v out of range", ErrCorrupt, block)
		}
	}
	if len(src)%4 != 0 {
		return nil, fmt.Errorf("%w: compressed_segmentation: %d bytes is not a whole number of 32-bit words", ErrCorrupt, len(src))
	}
	size := int(voxels) * channels * elemSize
	out := dst[:0]
	if cap(out) < size {
		out = make([]byte, size)
	}
	out = out[:size]

	words := uint64(len(src) / 4)
	if uint64(channels) > words {
		return nil, fmt.Errorf("%w: compressed_segmentation: %d words cannot hold %d channel offsets", ErrCorrupt, words, channels)
	}
	plane := int(voxels) * elemSize
	for c := range channels {
		off := uint64(binary.LittleEndian.Uint32(src[4*c:]))
		if off < uint64(channels) || off >= words {
			return nil, fmt.Errorf("%w: compressed_segmentation: channel %d at word %d, outside %d..%d", ErrCorrupt, c, off, channels, words)
		}
		ch := csegChannel{src: src[4*off:], extent: extent, block: block, elemSize: elemSize}
		if err := ch.decode(out[c*plane : (c+1)*plane]); err != nil {
			return nil, fmt.Errorf("%w: compressed_segmentation: channel %d: %v", ErrCorrupt, c, err)
		}
	}
	return out, nil
}

// checkedVolume returns the product of the extent, and false when an axis
// is not positive or the product overflows.
func checkedVolume(extent [3]int64) (int64, bool) {
	n := uint64(1)
	for _, e := range extent {
		if e < 1 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(e))
		if hi != 0 || lo > 1<<62 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// csegChannel is one channel's compressed data, from its block headers to
// the end of the chunk.
type csegChannel struct {
	src      []byte
	extent   [3]int64
	block    [3]int64
	elemSize int
}

// decode writes the channel's voxels into out, which holds exactly one
// channel of the raw layout. Its errors are bare descriptions; the caller
// wraps them.
func (ch *csegChannel) decode(out []byte) error {
	ex, ey, ez := ch.extent[0], ch.extent[1], ch.extent[2]
	bx, by, bz := ch.block[0], ch.block[1], ch.block[2]
	gx, gy, gz := (ex+bx-1)/bx, (ey+by-1)/by, (ez+bz-1)/bz
	words := uint64(len(ch.src) / 4)
	// The grid has at most one block per voxel, so this cannot overflow.
	if blocks := uint64(gx * gy * gz); 2*blocks > words {
		return fmt.Errorf("%d blocks need %d header words, have %d", blocks, 2*blocks, words)
	}
	tableWords := uint64(ch.elemSize / 4)
	es := int64(ch.elemSize)
	b := 0
	for z0 := int64(0); z0 < ez; z0 += bz {
		for y0 := int64(0); y0 < ey; y0 += by {
			for x0 := int64(0); x0 < ex; x0 += bx {
				h := ch.src[8*b:]
				b++
				table := uint64(binary.LittleEndian.Uint32(h)) & 0xffffff
				nbits := uint64(h[3])
				values := uint64(binary.LittleEndian.Uint32(h[4:]))
				switch nbits {
				case 0, 1, 2, 4, 8, 16, 32:
				default:
					return fmt.Errorf("block %d: %d bits per value", b-1, nbits)
				}
				if table >= words {
					return fmt.Errorf("block %d: lookup table at word %d, past the end (%d)", b-1, table, words)
				}
				entries := (words - table) / tableWords
				if entries == 0 {
					return fmt.Errorf("block %d: empty lookup table at word %d", b-1, table)
				}
				ax, ay, az := min(bx, ex-x0), min(by, ey-y0), min(bz, ez-z0)
				// The last value the partial block reads sits at the full
				// block's strides; it must lie inside the input.
				last, ok := mulAdd(uint64(bx), uint64(by)*uint64(az-1)+uint64(ay-1), uint64(ax-1))
				if !ok {
					return fmt.Errorf("block %d: block size %v overflows", b-1, ch.block)
				}
				if nbits > 0 {
					endBit, ok := mulAdd(nbits, last+1, 0)
					if !ok || values > words || (endBit+31)/32 > words-values {
						return fmt.Errorf("block %d: %d-bit values at word %d run past the end (%d)", b-1, nbits, values, words)
					}
				}
				tab := ch.src[4*table:]
				vals := ch.src[4*min(values, words):]
				mask := uint64(1)<<nbits - 1
				for z := range az {
					for y := range ay {
						o := (((z0+z)*ey+y0+y)*ex + x0) * es
						row := out[o : o+ax*es]
						idx := uint64(bx) * (uint64(y) + uint64(by)*uint64(z))
						if nbits == 0 {
							v := tab[:es]
							for x := int64(0); x < ax*es; x += es {
								copy(row[x:], v)
							}
							continue
						}
						for x := range ax {
							bit := nbits * (idx + uint64(x))
							w := binary.LittleEndian.Uint32(vals[4*(bit/32):])
							v := uint64(w>>(bit%32)) & mask
							if v >= entries {
								return fmt.Errorf("block %d: value %d past the lookup table's %d entries", b-1, v, entries)
							}
							// Element copies without a call to copy: the
							// table is little-endian like the output.
							if es == 4 {
								binary.LittleEndian.PutUint32(row[4*x:], binary.LittleEndian.Uint32(tab[4*v:]))
							} else {
								binary.LittleEndian.PutUint64(row[8*x:], binary.LittleEndian.Uint64(tab[8*v:]))
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// mulAdd returns a*b+c, and false when it overflows 62 bits (far beyond
// any offset into an input that fits in memory).
func mulAdd(a, b, c uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 || lo > 1<<62 || c > 1<<62 {
		return 0, false
	}
	return lo + c, true
}
