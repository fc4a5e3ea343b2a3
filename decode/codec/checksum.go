package codec

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
)

// The 32-bit checksums of numcodecs and Zarr v3: the data with a 4-byte
// little-endian checksum of it before ("start") or after ("end"). numcodecs
// puts crc32 and adler32 at the start, fletcher32 and crc32c at the end;
// numcodecs 0.14 and later let a configuration say "location". A mismatch
// is ErrCorrupt, so a damaged chunk reads as EIO.
func init() {
	registerChecksum("crc32", "start", crc32.ChecksumIEEE)
	registerChecksum("adler32", "start", adler32.Checksum)
	registerChecksum("fletcher32", "end", fletcher32)
	registerChecksum("crc32c", "end", func(b []byte) uint32 { return crc32.Checksum(b, castagnoli) })
}

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// registerChecksum registers the checksum codec name, stored at location
// unless its configuration says otherwise.
func registerChecksum(name, location string, sum func([]byte) uint32) {
	Register(name, func(cfg Config) (*Stage, error) {
		var p struct{ Location *string }
		if err := cfg.unmarshal(&p); err != nil {
			return nil, err
		}
		at := location
		if p.Location != nil {
			at = *p.Location
		}
		if at != "start" && at != "end" {
			return nil, fmt.Errorf("location %q: want \"start\" or \"end\"", at)
		}
		return &Stage{
			Decode:  checksumDecoder(name, at == "end", sum),
			Name:    name,
			Encoded: cfg.Elem, Decoded: cfg.Elem,
			InLimit: func(out int) int { return out + 4 },
		}, nil
	})
}

// checksumDecoder returns the Func of a checksum stored after the data
// (atEnd) or before it.
func checksumDecoder(name string, atEnd bool, sum func([]byte) uint32) Func {
	return func(dst, src []byte, limit int) ([]byte, error) {
		if len(src) < 4 {
			return nil, corrupt(name, io.ErrUnexpectedEOF)
		}
		data, stored := src[4:], src[:4]
		if atEnd {
			data, stored = src[:len(src)-4], src[len(src)-4:]
		}
		if len(data) > limit {
			return nil, corrupt(name, errTooLong)
		}
		if got, want := sum(data), binary.LittleEndian.Uint32(stored); got != want {
			return nil, corrupt(name, fmt.Errorf("checksum %08x, stored %08x", got, want))
		}
		return append(dst[:0], data...), nil
	}
}

// fletcher32 is HDF5's Fletcher-32 (H5_checksum_fletcher32, which numcodecs
// ports): sums of big-endian 16-bit words, a last odd byte as the high
// byte of a word, folded every 360 words so that they never overflow.
func fletcher32(b []byte) uint32 {
	var sum1, sum2 uint32
	words := len(b) / 2
	for words > 0 {
		n := min(words, 360)
		words -= n
		for range n {
			sum1 += uint32(b[0])<<8 | uint32(b[1])
			sum2 += sum1
			b = b[2:]
		}
		sum1 = sum1&0xffff + sum1>>16
		sum2 = sum2&0xffff + sum2>>16
	}
	if len(b) == 1 {
		sum1 += uint32(b[0]) << 8
		sum2 += sum1
		sum1 = sum1&0xffff + sum1>>16
		sum2 = sum2&0xffff + sum2>>16
	}
	sum1 = sum1&0xffff + sum1>>16
	sum2 = sum2&0xffff + sum2>>16
	return sum2<<16 | sum1
}
