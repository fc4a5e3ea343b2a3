package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The numcodecs filters: array-to-array transforms that run before the
// compressor when encoding. Each is decoded as numcodecs' own decode does,
// element for element, including its numpy casting rules; a combination
// whose result would depend on rules volfs does not reproduce (float16
// arithmetic, say) is ErrUnsupported, so that the array passes through
// rather than reading differently.
func init() {
	Register("shuffle", newShuffle)
	Register("delta", newDelta)
	Register("fixedscaleoffset", newFixedScaleOffset)
	Register("quantize", newQuantize)
	Register("astype", newAsType)
	Register("bitround", newBitRound)
	Register("categorize", func(cfg Config) (*Stage, error) {
		// numcodecs' Categorize decodes to strings only (dtype "U" or "O").
		return nil, fmt.Errorf("decodes to strings: %w", ErrUnsupported)
	})
}

// numpyNames are the numpy type names that zarr-python 3 configurations
// may hold instead of type strings; they are native, i.e. little-endian
// on every machine that writes them.
var numpyNames = map[string]string{
	"bool": "|b1", "int8": "|i1", "uint8": "|u1",
	"int16": "<i2", "int32": "<i4", "int64": "<i8",
	"uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
	"float16": "<f2", "float32": "<f4", "float64": "<f8",
}

// filterDType parses the element type parameter field of a filter: a numpy
// type string ("<i4", "|u1"), one without its byte order ("i4", native:
// little-endian), or a numpy name ("int32").
func filterDType(raw json.RawMessage, field string) (DType, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return DType{}, fmt.Errorf("%s: want a type string, got %s", field, raw)
	}
	if n, ok := numpyNames[s]; ok {
		s = n
	} else if len(s) >= 2 && strings.IndexByte("<>|=", s[0]) < 0 {
		s = "<" + s
		if s[2] == '1' && len(s) == 3 {
			s = "|" + s[1:]
		}
	} else if len(s) >= 2 && s[0] == '=' {
		s = "<" + s[1:]
	}
	d, err := ParseNumpyDType(s)
	if err != nil {
		return DType{}, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}

// filterParams unmarshals a filter's parameters, which it must have.
func filterParams(cfg Config) (map[string]json.RawMessage, error) {
	var p map[string]json.RawMessage
	if len(cfg.Params) == 0 || json.Unmarshal(cfg.Params, &p) != nil || p == nil {
		return nil, errors.New("want a configuration object with the filter's parameters")
	}
	return p, nil
}

// dtypePair reads a filter's parameters and in them its decoded type
// (field dec, required unless fromElem: zarr-python 3 leaves it out and
// takes the array's, cfg.Elem) and encoded type (field enc, defaulting to
// the decoded one).
func dtypePair(cfg Config, dec, enc string, fromElem bool) (p map[string]json.RawMessage, d, e DType, err error) {
	if p, err = filterParams(cfg); err != nil {
		return nil, d, e, err
	}
	raw, ok := p[dec]
	if !ok && fromElem && cfg.Elem.Size > 0 {
		raw, _ = json.Marshal(cfg.Elem.Name)
		ok = true
	}
	if !ok {
		return nil, d, e, fmt.Errorf("%s: missing", dec)
	}
	if d, err = filterDType(raw, dec); err != nil {
		return nil, d, e, err
	}
	e = d
	if raw, ok := p[enc]; ok && string(raw) != "null" {
		if e, err = filterDType(raw, enc); err != nil {
			return nil, d, e, err
		}
	}
	return p, d, e, nil
}

// elementwise returns the stage of a filter that decodes each element of
// type enc to one of type dec with conv.
func elementwise(name string, enc, dec DType, conv func(dst, src []byte)) *Stage {
	return &Stage{
		Name: name, Encoded: enc, Decoded: dec,
		InLimit: func(out int) int { return out / dec.Size * enc.Size },
		Decode: func(dst, src []byte, limit int) ([]byte, error) {
			n, err := elements(name, src, limit, enc, dec)
			if err != nil {
				return nil, err
			}
			out := growTo(dst, n*dec.Size)
			for i := range n {
				conv(out[i*dec.Size:(i+1)*dec.Size], src[i*enc.Size:(i+1)*enc.Size])
			}
			return out, nil
		},
	}
}

// elements returns the number of elements of type enc in src, which a
// filter decodes to as many of type dec, at most limit bytes of them. A
// src of a part element, or that would decode to more, is ErrCorrupt.
func elements(name string, src []byte, limit int, enc, dec DType) (int, error) {
	if len(src)%enc.Size != 0 {
		return 0, corrupt(name, fmt.Errorf("%d bytes is not a whole number of %s elements", len(src), enc.Name))
	}
	n := len(src) / enc.Size
	if n > limit/dec.Size {
		return 0, corrupt(name, errTooLong)
	}
	return n, nil
}

// Widening returns decode.Array.widen for a chunk whose filters leave elements of
// type stored for the compressor and decode them to type decoded.
func Widening(stored, decoded DType) int64 {
	if stored.Size <= decoded.Size || decoded.Size == 0 {
		return 0
	}
	return int64((stored.Size + decoded.Size - 1) / decoded.Size)
}

// growTo returns dst resized to n bytes, reallocated when it holds less.
func growTo(dst []byte, n int) []byte {
	if cap(dst) < n {
		return make([]byte, n)
	}
	return dst[:n]
}

// newShuffle configures numcodecs' "shuffle": byte k of every element
// stored together, for k = 0 .. elementsize-1 (numcodecs' default
// elementsize is 4; zarr-python 3 writes the array's).
func newShuffle(cfg Config) (*Stage, error) {
	size := 4
	var p struct{ Elementsize *int }
	if err := cfg.unmarshal(&p); err != nil {
		return nil, err
	}
	if p.Elementsize != nil {
		size = *p.Elementsize
	} else if cfg.Elem.Size > 0 && cfg.Params != nil && !strings.Contains(string(cfg.Params), `"id"`) {
		size = cfg.Elem.Size // a Zarr v3 configuration without it: the element size
	}
	if size < 0 || size > 1<<16 {
		return nil, fmt.Errorf("elementsize %d", size)
	}
	name := fmt.Sprintf("shuffle(%d)", size)
	return &Stage{
		Name: name, Encoded: cfg.Elem, Decoded: cfg.Elem,
		InLimit: func(out int) int { return out },
		Decode: func(dst, src []byte, limit int) ([]byte, error) {
			if len(src) > limit {
				return nil, corrupt(name, errTooLong)
			}
			if size <= 1 {
				return append(dst[:0], src...), nil
			}
			if len(src)%size != 0 {
				return nil, corrupt(name, fmt.Errorf("%d bytes is not a whole number of %d-byte elements", len(src), size))
			}
			out := growTo(dst, len(src))
			count := len(src) / size
			for k := range size {
				plane := src[k*count : (k+1)*count]
				for i, b := range plane {
					out[i*size+k] = b
				}
			}
			return out, nil
		},
	}, nil
}

// newBitRound configures numcodecs' "bitround", which rounds mantissas
// when encoding; its decode returns the bytes as they are.
func newBitRound(cfg Config) (*Stage, error) {
	var p struct{ Keepbits *int }
	if err := cfg.unmarshal(&p); err != nil {
		return nil, err
	}
	if p.Keepbits == nil || *p.Keepbits < 0 {
		return nil, errors.New("keepbits: want a number of bits, zero or more")
	}
	return &Stage{
		Name: fmt.Sprintf("bitround(%d)", *p.Keepbits), Encoded: cfg.Elem, Decoded: cfg.Elem,
		InLimit: func(out int) int { return out },
		Decode: func(dst, src []byte, limit int) ([]byte, error) {
			if len(src) > limit {
				return nil, corrupt("bitround", errTooLong)
			}
			return append(dst[:0], src...), nil
		},
	}, nil
}

// newAsType configures numcodecs' "astype": elements stored as
// encode_dtype, decoded by numpy's astype to decode_dtype.
func newAsType(cfg Config) (*Stage, error) {
	_, dec, enc, err := dtypePair(cfg, "decode_dtype", "encode_dtype", true)
	if err != nil {
		return nil, err
	}
	conv, err := converter(enc, dec)
	if err != nil {
		return nil, err
	}
	return elementwise(fmt.Sprintf("astype(%s -> %s)", enc.Name, dec.Name), enc, dec, conv), nil
}

// newQuantize configures numcodecs' "quantize", which rounds when encoding
// and stores astype; its decode is numpy's astype back to dtype.
func newQuantize(cfg Config) (*Stage, error) {
	_, dec, enc, err := dtypePair(cfg, "dtype", "astype", false)
	if err != nil {
		return nil, err
	}
	if dec.Kind != 'f' || enc.Kind != 'f' {
		return nil, errors.New("dtype and astype must be floating point")
	}
	conv, err := converter(enc, dec)
	if err != nil {
		return nil, err
	}
	return elementwise(fmt.Sprintf("quantize(%s -> %s)", enc.Name, dec.Name), enc, dec, conv), nil
}

// newFixedScaleOffset configures numcodecs' "fixedscaleoffset": stored
// elements x of astype decode to x / scale + offset, computed as numpy
// does (in float64 for integer astype, in astype's precision for float
// astype: numpy does not widen for a Python scalar), then cast to dtype.
func newFixedScaleOffset(cfg Config) (*Stage, error) {
	p, dec, enc, err := dtypePair(cfg, "dtype", "astype", true)
	if err != nil {
		return nil, err
	}
	var scale, offset float64
	for _, f := range []struct {
		name string
		v    *float64
	}{{"scale", &scale}, {"offset", &offset}} {
		raw, ok := p[f.name]
		if !ok || json.Unmarshal(raw, f.v) != nil {
			return nil, fmt.Errorf("%s: want a number, got %s", f.name, raw)
		}
	}
	if enc.Kind == 'f' && enc.Size == 2 || dec.Kind == 'f' && dec.Size == 2 || enc.Kind == 'b' || dec.Kind == 'b' {
		return nil, fmt.Errorf("%s -> %s (float16 arithmetic, bool): %w", enc.Name, dec.Name, ErrUnsupported)
	}
	store, err := storer(dec)
	if err != nil {
		return nil, err
	}
	load := loader(enc)
	var calc func(src []byte) value
	if enc.Kind == 'f' && enc.Size == 4 {
		s32, o32 := float32(scale), float32(offset)
		calc = func(src []byte) value { return value{kind: 'f', f: float64(float32(load(src).f)/s32 + o32)} }
	} else {
		calc = func(src []byte) value { return value{kind: 'f', f: load(src).float()/scale + offset} }
	}
	name := fmt.Sprintf("fixedscaleoffset(%s -> %s, scale %g, offset %g)", enc.Name, dec.Name, scale, offset)
	return elementwise(name, enc, dec, func(dst, src []byte) { store(dst, calc(src)) }), nil
}

// newDelta configures numcodecs' "delta": the first element, then the
// differences, stored as astype; decoding is numpy's cumsum into an array
// of dtype, which accumulates in the common type of the two (wrapping for
// integers) and casts each sum to dtype.
func newDelta(cfg Config) (*Stage, error) {
	_, dec, enc, err := dtypePair(cfg, "dtype", "astype", false)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("delta(%s -> %s)", enc.Name, dec.Name)
	load := loader(enc)
	store, err := storer(dec)
	if err != nil {
		return nil, err
	}
	var step func(acc *value, x value)
	switch {
	case enc.Kind != 'f' && dec.Kind != 'f' && enc.Kind != 'b' && dec.Kind != 'b':
		if enc.Size == 8 && dec.Size == 8 && enc.Kind != dec.Kind {
			return nil, fmt.Errorf("%s: numpy sums int64 and uint64 as float64: %w", name, ErrUnsupported)
		}
		// Integer sums wrap modulo 2^64, and the cast to dtype keeps
		// the low bits: the same as numpy's sum in any wider type.
		step = func(acc *value, x value) { acc.kind, acc.u = 'u', acc.u+x.u }
	case enc.Kind == 'f' && dec.Kind == 'f' || enc.Kind != 'f' && enc.Kind != 'b' && dec.Kind == 'f':
		if enc.Size == 2 && enc.Kind == 'f' || dec.Size == 2 {
			return nil, fmt.Errorf("%s (float16 arithmetic): %w", name, ErrUnsupported)
		}
		// numpy's common type: float32 when both fit it (float32 with
		// float32, or with an integer of at most 16 bits), else float64.
		single := dec.Size == 4 && (enc.Kind == 'f' && enc.Size == 4 || enc.Kind != 'f' && enc.Size <= 2)
		if single {
			step = func(acc *value, x value) {
				acc.kind, acc.f = 'f', float64(float32(acc.f)+float32(x.float()))
			}
		} else {
			step = func(acc *value, x value) { acc.kind, acc.f = 'f', acc.f+x.float() }
		}
	default:
		return nil, fmt.Errorf("%s: %w", name, ErrUnsupported)
	}
	return &Stage{
		Name: name, Encoded: enc, Decoded: dec,
		InLimit: func(out int) int { return out / dec.Size * enc.Size },
		Decode: func(dst, src []byte, limit int) ([]byte, error) {
			n, err := elements(name, src, limit, enc, dec)
			if err != nil {
				return nil, err
			}
			out := growTo(dst, n*dec.Size)
			var acc value
			for i := range n {
				step(&acc, load(src[i*enc.Size:]))
				store(out[i*dec.Size:(i+1)*dec.Size], acc)
			}
			return out, nil
		},
	}, nil
}

// value is one element on its way between types: an integer (kind 'i'
// or 'u', its bits in u, sign-extended for 'i'), a bool ('b', u is 0 or
// 1) or a float ('f').
type value struct {
	kind byte
	u    uint64
	f    float64
}

// float returns v as a float64, as numpy casts it.
func (v value) float() float64 {
	switch v.kind {
	case 'f':
		return v.f
	case 'i':
		return float64(int64(v.u))
	}
	return float64(v.u)
}

// order returns the byte order of d's elements.
func (d DType) order() binary.ByteOrder {
	if d.BigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// bits returns the bits of the element of type d at the start of b.
func (d DType) bits(b []byte) uint64 {
	switch d.Size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(d.order().Uint16(b))
	case 4:
		return uint64(d.order().Uint32(b))
	}
	return d.order().Uint64(b)
}

// PutBits writes the low 8*d.Size bits of bits as one element of type d
// at the start of b.
func (d DType) PutBits(b []byte, bits uint64) {
	switch d.Size {
	case 1:
		b[0] = byte(bits)
	case 2:
		d.order().PutUint16(b, uint16(bits))
	case 4:
		d.order().PutUint32(b, uint32(bits))
	case 8:
		d.order().PutUint64(b, bits)
	}
}

// loader returns the function that reads one element of type d.
func loader(d DType) func(b []byte) value {
	bits := d.bits
	switch d.Kind {
	case 'f':
		switch d.Size {
		case 2:
			return func(b []byte) value { return value{kind: 'f', f: halfToFloat(uint16(bits(b)))} }
		case 4:
			return func(b []byte) value {
				return value{kind: 'f', f: float64(math.Float32frombits(uint32(bits(b))))}
			}
		}
		return func(b []byte) value { return value{kind: 'f', f: math.Float64frombits(bits(b))} }
	case 'i':
		shift := 64 - 8*d.Size
		return func(b []byte) value { return value{kind: 'i', u: uint64(int64(bits(b)<<shift) >> shift)} }
	case 'b':
		return func(b []byte) value {
			if bits(b) != 0 {
				return value{kind: 'b', u: 1}
			}
			return value{kind: 'b'}
		}
	}
	return func(b []byte) value { return value{kind: 'u', u: bits(b)} }
}

// storer returns the function that writes v as one element of type d, as
// numpy's astype casts: integers keep their low bits, floats truncate
// toward zero into integers and round to nearest into narrower floats,
// anything non-zero is true. Casts that would round twice (float64 to
// float16) are refused.
func storer(d DType) (func(b []byte, v value), error) {
	put := d.PutBits
	switch d.Kind {
	case 'f':
		switch d.Size {
		case 2:
			// Exact only from float32 and narrower values, which callers
			// ensure (converter refuses the others).
			return func(b []byte, v value) { put(b, uint64(Float16Bits(float32(v.float())))) }, nil
		case 4:
			return func(b []byte, v value) {
				var f float32
				switch v.kind {
				case 'i':
					f = float32(int64(v.u))
				case 'u', 'b':
					f = float32(v.u)
				default:
					f = float32(v.f)
				}
				put(b, uint64(math.Float32bits(f)))
			}, nil
		}
		return func(b []byte, v value) { put(b, math.Float64bits(v.float())) }, nil
	case 'b':
		return func(b []byte, v value) {
			var bit uint64
			if v.kind == 'f' && v.f != 0 || v.kind != 'f' && v.u != 0 {
				bit = 1
			}
			put(b, bit)
		}, nil
	case 'i', 'u':
		unsigned := d.Kind == 'u'
		return func(b []byte, v value) {
			if v.kind != 'f' {
				put(b, v.u)
				return
			}
			switch {
			case math.IsNaN(v.f) || math.IsInf(v.f, 0):
				put(b, 1<<63) // what x86's conversion gives numpy
			case unsigned && d.Size == 8 && v.f >= 1<<63:
				put(b, uint64(v.f))
			default:
				put(b, uint64(int64(v.f)))
			}
		}, nil
	}
	return nil, fmt.Errorf("type %s: %w", d.Name, ErrUnsupported)
}

// converter returns the cast of one element of type from to type to, as
// numpy's astype does.
func converter(from, to DType) (func(dst, src []byte), error) {
	if to.Kind == 'f' && to.Size == 2 && !(from.Kind == 'f' && from.Size <= 4 || from.Kind != 'f' && from.Size <= 2) {
		return nil, fmt.Errorf("cast %s -> %s (rounds twice in volfs): %w", from.Name, to.Name, ErrUnsupported)
	}
	load := loader(from)
	store, err := storer(to)
	if err != nil {
		return nil, err
	}
	return func(dst, src []byte) { store(dst, load(src)) }, nil
}

// halfToFloat returns the value of the IEEE 754 half-precision bits h.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24)
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+mant, exp-25)
}
