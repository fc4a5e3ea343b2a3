package decode

import (
	"context"
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
		_, err := NewStage(c.name, CodecConfig{Params: []byte(c.params), Elem: DType{Name: "<f8", Kind: 'f', Size: 8}})
		if err == nil {
			t.Errorf("%s: accepted, want an error", c.params)
			continue
		}
		if got := errors.Is(err, ErrUnsupported); got != c.unsupported || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (unsupported %v), want %q (unsupported %v)", c.params, err, got, c.want, c.unsupported)
		}
	}
}

// TestWideningFilterLoads loads a chunk whose astype filter stores each
// uint8 element as a float64, uncompressed: 8 MiB stored for 1 MiB decoded,
// more than the 2x (plus 1 MiB) of compressed data, in Zarr v2 and v3.
func TestWideningFilterLoads(t *testing.T) {
	const n = 1 << 20
	stored := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(stored[8*i:], math.Float64bits(float64(i%251)))
	}
	for _, tc := range []struct {
		name, key string
		parse     func(dir string, meta []byte) (*Volume, error)
		meta      string
	}{
		{"zarr2", "a/0", ParseZarr2, `{"zarr_format": 2, "shape": [1048576], "chunks": [1048576], "dtype": "|u1", "compressor": null,
			"fill_value": 0, "order": "C", "filters": [{"id": "astype", "decode_dtype": "|u1", "encode_dtype": "<f8"}]}`},
		{"zarr3", "a/c/0", ParseZarr3, `{"zarr_format": 3, "node_type": "array", "shape": [1048576], "data_type": "uint8",
			"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1048576]}}, "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
			"codecs": [{"name": "numcodecs.astype", "configuration": {"decode_dtype": "|u1", "encode_dtype": "<f8"}}, {"name": "bytes", "configuration": {"endian": "little"}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.parse("a", []byte(tc.meta))
			if err != nil {
				t.Fatal(err)
			}
			a := v.Arrays[0]
			got, err := a.Load(context.Background(), newMemSource(map[string][]byte{tc.key: stored}), []int64{0})
			if err != nil {
				t.Fatalf("got %v, want the chunk (stored limit %d)", err, a.StoredLimit([]int64{0}))
			}
			for i, b := range got {
				if b != byte(i%251) {
					t.Fatalf("element %d: got %d, want %d", i, b, i%251)
				}
			}
		})
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
		s, err := NewStage(numcodecID(c.params), CodecConfig{Params: []byte(c.params)})
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

// TestParseOME reads NGFF 0.4 and 0.5 multiscales and refuses malformed
// ones by field.
func TestParseOME(t *testing.T) {
	v04 := `{"multiscales": [{"version": "0.4", "axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
		"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.5]}]}],
		"coordinateTransformations": [{"type": "scale", "scale": [1, 2, 2]}]}]}`
	img, err := ParseOME("img", ".zattrs", []byte(v04))
	if err != nil || img == nil || img.Version != "0.4" || len(img.Levels) != 1 || img.Levels[0].Scale[1] != 1 {
		t.Fatalf("v0.4: %+v, %v", img, err)
	}
	a := &Array{Shape: []int64{2, 10, 10}}
	if !img.Apply(a, 0) || a.Resolution[1] != 1000 || a.Resolution[0] != 1 || a.Axes[0].Type != "channel" {
		t.Errorf("Apply: resolution %v, axes %v", a.Resolution, a.Axes)
	}
	v05 := `{"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [{"axes": [{"name": "y"}, {"name": "x"}], "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [3, 3]}]}]}]}}}`
	if img, err := ParseOME("", "zarr.json", []byte(v05)); err != nil || img == nil || img.Version != "0.5" || img.Levels[0].Path != "s0" {
		t.Errorf("v0.5: %+v, %v", img, err)
	}
	if img, err := ParseOME("", ".zattrs", []byte(`{"answer": 42}`)); img != nil || err != nil {
		t.Errorf("no multiscales: %+v, %v", img, err)
	}
	for _, bad := range []string{
		`{"multiscales": [{"axes": [{"name": "x"}], "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 2]}]}]}]}`,
		`{"multiscales": [{"axes": [{"name": "x"}], "datasets": [{"path": "../up"}]}]}`,
		`{"multiscales": [{"axes": [], "datasets": []}]}`,
		`{"multiscales": {}}`,
	} {
		if _, err := ParseOME("", ".zattrs", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
