package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errBlosclz is what every malformed blosclz stream reports.
var errBlosclz = errors.New("bad blosclz stream")

// blosclzFarDistance is where 16-bit match distances start (FastLZ's
// MAX_L2_DISTANCE, blosclz's MAX_DISTANCE).
const blosclzFarDistance = 8191

// blosclzDecompress decodes one blosclz stream (blosc's own LZ77 codec, the
// FastLZ level 2 format) into dst, which must be exactly the decoded size,
// and returns how many bytes it wrote. It never writes outside dst and
// never reads outside src.
//
// The stream is a sequence of instructions, each starting with a control
// byte (the first one's top 3 bits are a level marker and ignored):
//
//   - ctrl < 32: a literal run of ctrl+1 bytes, which follow.
//   - otherwise a match: length (ctrl>>5)+2, plus the sum of extension
//     bytes that follow while they are 255 when ctrl>>5 == 7 (the last,
//     smaller one included); then one byte c of distance: the match starts
//     (ctrl&31)<<8 + c + 1 bytes back, except that c == 255 with
//     ctrl&31 == 31 announces a 16-bit big-endian distance d that follows,
//     starting d + 8192 bytes back. Matches may overlap their output.
func blosclzDecompress(dst, src []byte) (int, error) {
	if len(src) == 0 {
		return 0, errBlosclz
	}
	ip, op := 1, 0
	ctrl := int(src[0] & 31)
	for {
		if ctrl < 32 {
			n := ctrl + 1
			if op+n > len(dst) || ip+n > len(src) {
				return op, errBlosclz
			}
			if n <= 16 && ip+16 <= len(src) && op+16 <= len(dst) {
				// Short literal runs dominate: two word moves (that may
				// write past the run, into output not yet written) beat a
				// call to memmove.
				binary.LittleEndian.PutUint64(dst[op:], binary.LittleEndian.Uint64(src[ip:]))
				binary.LittleEndian.PutUint64(dst[op+8:], binary.LittleEndian.Uint64(src[ip+8:]))
			} else {
				copy(dst[op:op+n], src[ip:ip+n])
			}
			op += n
			ip += n
			if ip >= len(src) {
				return op, nil
			}
			ctrl = int(src[ip])
			ip++
			continue
		}
		n := (ctrl >> 5) - 1
		ofs := (ctrl & 31) << 8
		if n == 6 {
			for {
				if ip >= len(src) {
					return op, errBlosclz
				}
				code := src[ip]
				ip++
				n += int(code)
				if code != 255 {
					break
				}
			}
		}
		if ip >= len(src) {
			return op, errBlosclz
		}
		code := int(src[ip])
		ip++
		dist := ofs + code + 1
		if code == 255 && ofs == 31<<8 {
			if ip+2 > len(src) {
				return op, errBlosclz
			}
			dist = int(src[ip])<<8 | int(src[ip+1]) + blosclzFarDistance + 1
			ip += 2
		}
		n += 3
		if dist > op || n > len(dst)-op {
			return op, errBlosclz
		}
		matchCopy(dst, op, dist, n)
		op += n
		if ip >= len(src) {
			return op, nil
		}
		ctrl = int(src[ip])
		ip++
	}
}

// matchCopy copies n bytes to dst[op:] from dist bytes back, where the
// two may overlap (a run when dist < n). It may write up to 7 bytes past
// op+n, which the output overwrites later.
func matchCopy(dst []byte, op, dist, n int) {
	end := op + n
	if end+8 > len(dst) {
		for i := op; i < end; i++ {
			dst[i] = dst[i-dist]
		}
		return
	}
	if dist < 8 {
		// Copy byte by byte until the repeated pattern, grown to k bytes
		// (a multiple of dist), can be read 8 bytes at a time.
		k := dist * ((8 + dist - 1) / dist)
		m := min(n, k-dist)
		for i := op; i < op+m; i++ {
			dst[i] = dst[i-dist]
		}
		op += m
		dist = k
	}
	for ; op < end; op += 8 {
		binary.LittleEndian.PutUint64(dst[op:], binary.LittleEndian.Uint64(dst[op-dist:]))
	}
}

// blosclzDecode is blosclzDecompress for a blosc split stream of exactly
// len(dst) bytes.
func blosclzDecode(dst, src []byte) error {
	n, err := blosclzDecompress(dst, src)
	if err == nil && n != len(dst) {
		err = fmt.Errorf("blosclz stream decodes to %d bytes, want %d", n, len(dst))
	}
	return err
}
