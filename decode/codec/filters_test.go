package codec

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestNewStageRefusals checks that codec configurations volfs cannot
// decode exactly are refused: a missing or wrong parameter by name, a
// combination it does not implement as ErrUnsupported.
func TestNewStageRefusals(t *testing.T) {
	for _, c := range []struct {
		name, params string
		unsupported  bool
		want         string
	}{
		{"delta", `{"id": "delta"}`, false, "dtype: missing"},
		{"delta", `{"id": "delta", "dtype": "<f2"}`, true, "float16"},
		{"delta", `{"id": "delta", "dtype": "<i4", "astype": "<f4"}`, true, "delta"},
		{"delta", `{"id": "delta", "dtype": "<u8", "astype": "<i8"}`, true, "float64"},
		{"fixedscaleoffset", `{"id": "fixedscaleoffset", "dtype": "<f8", "astype": "|u1", "offset": 0}`, false, "scale"},
		{"fixedscaleoffset", `{"id": "fixedscaleoffset", "dtype": "<f2", "astype": "|u1", "offset": 0, "scale": 1}`, true, "float16"},
		{"quantize", `{"id": "quantize", "digits": 2, "dtype": "<i4"}`, false, "floating point"},
		{"astype", `{"id": "astype", "encode_dtype": "<f8", "decode_dtype": "<f2"}`, true, "rounds twice"},
		{"astype", `{"id": "astype", "encode_dtype": "<U4", "decode_dtype": "<f4"}`, true, "U4"},
		{"bitround", `{"id": "bitround"}`, false, "keepbits"},
		{"categorize", `{"id": "categorize", "labels": ["a"], "dtype": "|O", "astype": "|u1"}`, true, "strings"},
		{"crc32", `{"id": "crc32", "location": "middle"}`, false, "location"},
		{"lzma", `{"id": "lzma", "format": 3}`, false, "without filters"},
		{"lzma", `{"id": "lzma", "format": 3, "filters": [{"id": 4}, {"id": 33}]}`, true, "0x4"},
		{"lzma", `{"id": "lzma", "format": 1, "filters": [{"id": 4}, {"id": 33}]}`, true, "0x4"},
		{"lzma", `{"id": "lzma", "format": 7}`, false, "format 7"},
		{"zfpy", `{"id": "zfpy"}`, true, "zfpy"},
	} {
		_, err := NewStage(c.name, Config{Params: []byte(c.params), Elem: DType{Name: "<f8", Kind: 'f', Size: 8}})
		if err == nil {
			t.Errorf("%s: accepted, want an error", c.params)
			continue
		}
		if got := errors.Is(err, ErrUnsupported); got != c.unsupported || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (unsupported %v), want %q (unsupported %v)", c.params, err, got, c.want, c.unsupported)
		}
	}
}

// TestFilterCasts checks element casts against numpy's results, worked
// out by hand: wrapping integers, truncating floats, float16 both ways.
func TestFilterCasts(t *testing.T) {
	f64 := func(v ...float64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b
	}
	for _, c := range []struct {
		params   string
		src, out []byte
	}{
		// numpy: np.array([300, -1], "<i4").astype("u1") -> [44, 255]
		{`{"id": "astype", "encode_dtype": "<i4", "decode_dtype": "|u1"}`, []byte{44, 1, 0, 0, 0xff, 0xff, 0xff, 0xff}, []byte{44, 255}},
		// np.array([-2.7, 2.7]).astype("<i2") -> [-2, 2]
		{`{"id": "astype", "encode_dtype": "<f8", "decode_dtype": "<i2"}`, f64(-2.7, 2.7), []byte{0xfe, 0xff, 2, 0}},
		// float16 0x3c00 is 1.0, 0xc000 is -2.0
		{`{"id": "astype", "encode_dtype": "<f2", "decode_dtype": "<f8"}`, []byte{0, 0x3c, 0, 0xc0}, f64(1, -2)},
		// cumsum of int8 [100, 100, 100] into int16: [100, 200, 300]
		{`{"id": "delta", "dtype": "<i2", "astype": "|i1"}`, []byte{100, 100, 100}, []byte{100, 0, 200, 0, 0x2c, 1}},
		// (x / 10) + 1000 for uint8 [0, 5]
		{`{"id": "fixedscaleoffset", "dtype": "<f8", "astype": "|u1", "scale": 10, "offset": 1000}`, []byte{0, 5}, f64(1000, 1000.5)},
	} {
		s, err := NewStage(numcodecID(c.params), Config{Params: []byte(c.params)})
		if err != nil {
			t.Errorf("%s: %v", c.params, err)
			continue
		}
		got, err := s.Decode(nil, c.src, len(c.out))
		if err != nil || string(got) != string(c.out) {
			t.Errorf("%s: got %v, %v, want %v", c.params, got, err, c.out)
		}
		if _, err := s.Decode(nil, c.src, len(c.out)-1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: a limit one byte short gives %v, want ErrCorrupt", c.params, err)
		}
	}
}

// numcodecID returns the "id" of a numcodecs configuration.
func numcodecID(params string) string {
	_, rest, _ := strings.Cut(params, `"id": "`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
