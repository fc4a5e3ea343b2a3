package codec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrCorrupt marks a chunk whose stored bytes do not decode to what the
// metadata promises: a bad header, a truncated stream, a wrong size. Every
// decoder's refusal of its input wraps it; package decode re-exports it
// for the formats.
var ErrCorrupt = errors.New("decode: corrupt chunk")

// ErrUnsupported marks metadata that is valid but names something volfs does
// not implement (an encoding, codec or data type).
var ErrUnsupported = errors.New("decode: unsupported")

// MaxChunkBytes bounds the decoded size of one chunk: a chunk is decoded
// into memory whole, so metadata promising more is refused rather than
// trusted, and no decoder is asked for more.
const MaxChunkBytes = 1 << 31

// DType is an element type.
type DType struct {
	Name string // the metadata's own spelling, e.g. "uint16" or "<i2"
	Size int    // bytes per element
	// Kind is 'b' (bool), 'i' (signed), 'u' (unsigned) or 'f' (float).
	Kind byte
	// BigEndian reports the byte order of elements in the decoded layout.
	BigEndian bool
}

// ParseNumpyDType parses a NumPy type string such as "<i2", ">f8", "|u1",
// "|b1". Strings, objects, datetimes, complex and structured types are
// refused by name.
func ParseNumpyDType(s string) (DType, error) {
	if len(s) < 3 {
		return DType{}, fmt.Errorf("%q is not a NumPy type string volfs reads: %w", s, ErrUnsupported)
	}
	size, err := strconv.Atoi(s[2:])
	d := DType{Name: s, Kind: s[1], Size: size, BigEndian: s[0] == '>'}
	ok := err == nil && (s[0] == '<' || s[0] == '>' || s[0] == '|')
	switch d.Kind {
	case 'b':
		ok = ok && size == 1
	case 'i', 'u':
		ok = ok && (size == 1 || size == 2 || size == 4 || size == 8)
	case 'f':
		ok = ok && (size == 2 || size == 4 || size == 8)
	default:
		return DType{}, fmt.Errorf("%q: %w", s, ErrUnsupported)
	}
	if !ok || s[0] == '|' && size != 1 {
		return DType{}, fmt.Errorf("%q is not a NumPy type string volfs reads: %w", s, ErrUnsupported)
	}
	return d, nil
}

// Float16Bits converts f to IEEE 754 half precision, rounding to nearest
// even; NaN stays NaN and out-of-range values become infinities.
func Float16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f: // overflow or infinity
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		half := uint16(mant >> shift)
		rem := mant & (1<<shift - 1)
		if rem > 1<<(shift-1) || rem == 1<<(shift-1) && half&1 == 1 {
			half++
		}
		return sign | half
	}
	half := sign | uint16(exp)<<10 | uint16(mant>>13)
	if rem := mant & 0x1fff; rem > 0x1000 || rem == 0x1000 && half&1 == 1 {
		half++ // may carry into the exponent, which is still right
	}
	return half
}
