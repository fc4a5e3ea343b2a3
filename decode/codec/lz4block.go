package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/volfs/volfs/internal/mem"
)

// N5's "lz4" (n5-java's Lz4Compression) is lz4-java's LZ4BlockOutputStream
// framing: blocks of at most 32 MiB decoded, each a 21-byte header, then
// its data; a block of zero bytes ends the stream. Header, integers
// little-endian:
//
//	0  "LZ4Block"  magic
//	8  token       method (0x10 stored, 0x20 LZ4) | log2(block size) - 10
//	9  clen        stored size of the data (int32)
//	13 dlen        decoded size (int32)
//	17 check       XXH32 of the decoded bytes, seed 0x9747b28c, top 4 bits cleared
func init() {
	registerCompressor("n5.lz4", decodeLZ4Block)
}

const (
	lz4BlockHeader = 21
	lz4BlockSeed   = 0x9747b28c
	lz4BlockRaw    = 0x10
	lz4BlockLZ4    = 0x20
	lz4BlockMax    = 1 << 25 // lz4-java's MAX_BLOCK_SIZE
)

var lz4BlockMagic = []byte("LZ4Block")

// decodeLZ4Block is the Func of lz4-java's block stream: every block is
// checked against its checksum, and the whole must end with the end block
// (bytes after it are ignored, as LZ4BlockInputStream ignores them).
func decodeLZ4Block(dst, src []byte, limit int) ([]byte, error) {
	bad := func(format string, args ...any) error {
		return corrupt("lz4 block stream", fmt.Errorf(format, args...))
	}
	out := dst[:0]
	for {
		if len(src) < lz4BlockHeader {
			return nil, bad("truncated block header")
		}
		if !bytes.Equal(src[:8], lz4BlockMagic) {
			return nil, bad("no LZ4Block magic")
		}
		method := src[8] & 0xf0
		clen := int64(int32(binary.LittleEndian.Uint32(src[9:])))
		dlen := int64(int32(binary.LittleEndian.Uint32(src[13:])))
		check := binary.LittleEndian.Uint32(src[17:])
		src = src[lz4BlockHeader:]
		if dlen < 0 || clen < 0 || dlen > lz4BlockMax || method == lz4BlockRaw && clen != dlen || method != lz4BlockRaw && method != lz4BlockLZ4 {
			return nil, bad("bad block header (method %#x, %d bytes stored, %d decoded)", method, clen, dlen)
		}
		if dlen == 0 {
			if clen != 0 {
				return nil, bad("empty block stores %d bytes", clen)
			}
			return out, nil
		}
		if clen > int64(len(src)) {
			return nil, bad("block of %d bytes, %d left", clen, len(src))
		}
		if int64(len(out))+dlen > int64(limit) {
			return nil, corrupt("lz4 block stream", errTooLong)
		}
		if cap(out) < limit && cap(out) < len(out)+int(dlen) {
			grown := mem.Make(limit)[:len(out)]
			copy(grown, out)
			out = grown
		}
		block := out[len(out) : len(out)+int(dlen)]
		if method == lz4BlockRaw {
			copy(block, src[:clen])
		} else if err := lz4DecodeExact(block, src[:clen]); err != nil {
			return nil, corrupt("lz4 block stream", err)
		}
		if got := xxh32(block, lz4BlockSeed) & 0x0fffffff; got != check {
			return nil, bad("block checksum %07x, stored %07x", got, check)
		}
		out = out[:len(out)+int(dlen)]
		src = src[clen:]
	}
}

const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 is the 32-bit xxHash of b with seed.
func xxh32(b []byte, seed uint32) uint32 {
	n := len(b)
	var h uint32
	if n >= 16 {
		v1 := seed + xxhPrime1 + xxhPrime2
		v2 := seed + xxhPrime2
		v3 := seed
		v4 := seed - xxhPrime1
		round := func(v, x uint32) uint32 { return bits.RotateLeft32(v+x*xxhPrime2, 13) * xxhPrime1 }
		for len(b) >= 16 {
			v1 = round(v1, binary.LittleEndian.Uint32(b))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = seed + xxhPrime5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
		b = b[4:]
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}
