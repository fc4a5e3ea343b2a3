package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const goodInfo = `{
  "@type": "neuroglancer_multiscale_volume",
  "data_type": "uint16", "num_channels": 2, "type": "image",
  "mesh": "mesh",
  "scales": [
    {"key": "s0", "size": [70, 45, 9], "voxel_offset": [-13, 5, -3],
     "resolution": [4, 4, 40], "chunk_sizes": [[32, 16, 4]], "encoding": "raw"},
    {"key": "s1", "size": [35, 23, 9], "voxel_offset": [-7, 2, -3],
     "resolution": [8, 8, 40], "chunk_sizes": [[16, 16, 4]], "encoding": "raw"}
  ]
}`

// withScale0 returns goodInfo with scale 0's member set to value (raw
// JSON), or removed when value is "".
func withScale0(member, value string) string {
	var top map[string]any
	if err := json.Unmarshal([]byte(goodInfo), &top); err != nil {
		panic(err)
	}
	s := top["scales"].([]any)[0].(map[string]any)
	if value == "" {
		delete(s, member)
	} else {
		s[member] = json.RawMessage(value)
	}
	b, _ := json.Marshal(top)
	return string(b)
}

// withTop returns goodInfo with the top-level member set or removed.
func withTop(member, value string) string {
	var top map[string]any
	if err := json.Unmarshal([]byte(goodInfo), &top); err != nil {
		panic(err)
	}
	if value == "" {
		delete(top, member)
	} else {
		top[member] = json.RawMessage(value)
	}
	b, _ := json.Marshal(top)
	return string(b)
}

func TestParsePrecomputedRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, info, field string
	}{
		{"not json", `{"scales": [`, ""},
		{"wrong @type", withTop("@type", `"neuroglancer_skeletons"`), "@type"},
		{"no data_type", withTop("data_type", ""), "data_type"},
		{"bad data_type", withTop("data_type", `"complex64"`), "data_type"},
		{"float64 not in spec", withTop("data_type", `"float64"`), "data_type"},
		{"zero channels", withTop("num_channels", `0`), "num_channels"},
		{"fractional channels", withTop("num_channels", `1.5`), "num_channels"},
		{"no scales", withTop("scales", `[]`), "scales"},
		{"scales not a list", withTop("scales", `{}`), "scales"},
		{"no key", withScale0("key", ""), `scales[0]: key`},
		{"key leaves", withScale0("key", `"../elsewhere"`), `scales[0] (key "../elsewhere"): key`},
		{"key dotdot", withScale0("key", `".."`), `scales[0] (key ".."): key`},
		{"key absolute", withScale0("key", `"/etc"`), `scales[0] (key "/etc"): key`},
		{"key nested", withScale0("key", `"a/b"`), `scales[0] (key "a/b"): key`},
		{"key is the metadata", withScale0("key", `"info"`), `scales[0] (key "info"): key`},
		{"key is the original metadata", withScale0("key", `"info.orig"`), `scales[0] (key "info.orig"): key`},
		{"last chunk end overflows", withScale0("size", `[9223372036854775807, 1, 1]`), `scales[0] (key "s0"): chunk_sizes`},
		{"duplicate key", withScale0("key", `"s1"`), `scales[1] (key "s1"): key`},
		{"key info", withScale0("key", `"info"`), `scales[0] (key "info"): key`},
		{"key info.orig", withScale0("key", `"info.orig"`), `scales[0] (key "info.orig"): key`},
		{"zero size", withScale0("size", `[0, 45, 9]`), `scales[0] (key "s0"): size`},
		{"negative size", withScale0("size", `[70, -1, 9]`), `scales[0] (key "s0"): size`},
		{"two-axis size", withScale0("size", `[70, 45]`), `scales[0] (key "s0"): size`},
		{"size not ints", withScale0("size", `[70.5, 45, 9]`), `scales[0] (key "s0"): size`},
		{"zero chunk", withScale0("chunk_sizes", `[[32, 0, 4]]`), `scales[0] (key "s0"): chunk_sizes`},
		{"empty chunk list", withScale0("chunk_sizes", `[]`), `scales[0] (key "s0"): chunk_sizes`},
		{"flat chunk list", withScale0("chunk_sizes", `[32, 16, 4]`), `scales[0] (key "s0"): chunk_sizes`},
		{"huge chunk", withScale0("chunk_sizes", `[[65536, 65536, 65536]]`), `scales[0] (key "s0"): chunk_sizes`},
		{"size product overflows", withScale0("size", `[4294967296, 4294967296, 4294967296]`), `scales[0] (key "s0"): size`},
		{"offset overflows", withScale0("voxel_offset", `[9223372036854775807, 0, 0]`), `scales[0] (key "s0"): voxel_offset`},
		// The grid's last key would end at 2^63: the chunks overhang the
		// volume's int64 extent.
		{"grid end overflows", `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1, "type": "image",
			"scales": [{"key": "s0", "size": [9223372036854775807, 1, 1], "resolution": [1, 1, 1],
			"chunk_sizes": [[2147483648, 1, 1]], "encoding": "raw"}]}`, `scales[0] (key "s0"): chunk_sizes`},
		{"grid end overflows with offset", `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1, "type": "image",
			"scales": [{"key": "s0", "size": [100, 1, 1], "voxel_offset": [9223372036854775700, 0, 0], "resolution": [1, 1, 1],
			"chunk_sizes": [[64, 1, 1]], "encoding": "raw"}]}`, `scales[0] (key "s0"): chunk_sizes`},
		{"offset not ints", withScale0("voxel_offset", `["a", 0, 0]`), `scales[0] (key "s0"): voxel_offset`},
		{"no encoding", withScale0("encoding", ""), `scales[0] (key "s0"): encoding`},
		{"bad resolution", withScale0("resolution", `[1, 2]`), `scales[0] (key "s0"): resolution`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParsePrecomputed("layer", []byte(tc.info))
			if err == nil {
				t.Fatalf("got volume %v, want an error naming %q", v, tc.field)
			}
			var me *MetadataError
			if !errors.As(err, &me) {
				t.Fatalf("got %T %v, want *MetadataError", err, err)
			}
			if me.Field != tc.field {
				t.Errorf("got field %q, want %q (error: %v)", me.Field, tc.field, err)
			}
			if !strings.HasPrefix(err.Error(), "decode: layer/info: ") {
				t.Errorf("got %q, want it to name the file layer/info", err)
			}
		})
	}
}

// TestParsePrecomputedSkips: a scale volfs cannot decode is left out of the
// volume and of the rewritten info, named with its field, and the other
// scales are served; a layer of only such scales is refused.
func TestParsePrecomputedSkips(t *testing.T) {
	for _, tc := range []struct{ name, info, field string }{
		{"unknown encoding", withScale0("encoding", `"webp"`), `scales[0] (key "s0"): encoding`},
		{"compresso", withScale0("encoding", `"compresso"`), `scales[0] (key "s0"): encoding`},
		{"unknown sharding", withScale0("sharding", `{"@type": "neuroglancer_uint64_sharded_v2"}`), `scales[0] (key "s0"): sharding.@type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParsePrecomputed("layer", []byte(tc.info))
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Arrays) != 1 || v.Arrays[0].Name != "s1" {
				t.Fatalf("got arrays %v, want only s1", v.Arrays)
			}
			var me *MetadataError
			if len(v.Skipped) != 1 || v.Skipped[0].Name != "s0" || !errors.As(v.Skipped[0].Err, &me) || me.Field != tc.field || !errors.Is(me, ErrUnsupported) {
				t.Fatalf("got skipped %v, want s0 with field %q", v.Skipped, tc.field)
			}
			again, err := ParsePrecomputed("layer", v.Rewritten)
			if err != nil || len(again.Arrays) != 1 || again.Arrays[0].Name != "s1" || len(again.Skipped) != 0 {
				t.Fatalf("rewritten info: %v %v, want exactly scale s1", again, err)
			}
		})
	}
	bad := strings.ReplaceAll(goodInfo, `"raw"`, `"compresso"`)
	if _, err := ParsePrecomputed("layer", []byte(bad)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("every scale unsupported: got %v, want ErrUnsupported", err)
	}
}

// TestImageEncodingTypes: jpeg and png are refused by name for the data
// types and channel counts the spec does not give them (jpeg: uint8, 1 or 3
// channels; png: uint8 or uint16, 1 to 4), rather than decoded by a guess.
func TestImageEncodingTypes(t *testing.T) {
	for _, tc := range []struct {
		encoding, dtype string
		channels        int
		ok              bool
	}{
		{"jpeg", "uint8", 1, true}, {"jpeg", "uint8", 3, true},
		{"jpeg", "uint8", 2, false}, {"jpeg", "uint16", 1, false}, {"jpeg", "int8", 1, false},
		{"png", "uint8", 4, true}, {"png", "uint16", 1, true}, {"png", "uint16", 3, true},
		{"png", "uint8", 5, false}, {"png", "int16", 1, false}, {"png", "int8", 1, false}, {"png", "uint32", 1, false},
	} {
		info := strings.NewReplacer(`"uint16"`, `"`+tc.dtype+`"`, `"num_channels": 2`, fmt.Sprintf(`"num_channels": %d`, tc.channels),
			`"raw"`, `"`+tc.encoding+`"`).Replace(goodInfo)
		v, err := ParsePrecomputed("layer", []byte(info))
		switch {
		case tc.ok && (err != nil || len(v.Arrays) != 2):
			t.Errorf("%s of %d %s channels: %v, want both scales", tc.encoding, tc.channels, tc.dtype, err)
		case !tc.ok && !errors.Is(err, ErrUnsupported):
			t.Errorf("%s of %d %s channels: got %v, want ErrUnsupported", tc.encoding, tc.channels, tc.dtype, err)
		case !tc.ok && !strings.Contains(err.Error(), tc.encoding+" of"):
			t.Errorf("%s of %d %s channels: %q does not name the encoding", tc.encoding, tc.channels, tc.dtype, err)
		}
	}
}

// TestRewriteChunkSizes: the rewritten info lists exactly the chunk size
// the mount serves, since neuroglancer opens one source per entry.
func TestRewriteChunkSizes(t *testing.T) {
	v, err := ParsePrecomputed("", []byte(withScale0("chunk_sizes", `[[32, 16, 4], [64, 64, 1]]`)))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Scales []struct {
			ChunkSizes [][]int64 `json:"chunk_sizes"`
		}
	}
	if err := json.Unmarshal(v.Rewritten, &got); err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got.Scales[0].ChunkSizes); s != "[[32 16 4]]" {
		t.Errorf("got chunk_sizes %s, want [[32 16 4]]", s)
	}
}

func TestParsePrecomputedGeometry(t *testing.T) {
	v, err := ParsePrecomputed("", []byte(goodInfo))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(v.Arrays), 2; got != want {
		t.Fatalf("got %d arrays, want %d", got, want)
	}
	a := v.Arrays[0]
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"key", a.Key, "s0"},
		{"grid", fmt.Sprint(a.Grid), "[3 3 3]"},
		{"chunks", a.NumChunks(), int64(27)},
		{"first name", a.ChunkName([]int64{0, 0, 0}), "-13-19_5-21_-3-1"},
		{"clipped name", a.ChunkName([]int64{2, 2, 2}), "51-57_37-50_5-6"},
		{"first size", a.ChunkSize([]int64{0, 0, 0}), int64(32 * 16 * 4 * 2 * 2)},
		{"clipped size", a.ChunkSize([]int64{2, 2, 2}), int64(6 * 13 * 1 * 2 * 2)},
		{"chunk key", a.ChunkKey([]int64{1, 0, 0}), "s0/19-51_5-21_-3-1"},
		{"coords of 13", fmt.Sprint(a.Coords(13)), "[1 1 1]"},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestChunkNamesRoundTrip(t *testing.T) {
	v, err := ParsePrecomputed("", []byte(goodInfo))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range v.Arrays {
		seen := map[string]bool{}
		for i := range a.NumChunks() {
			c := a.Coords(i)
			name := a.ChunkName(c)
			if seen[name] {
				t.Fatalf("%s: name %s twice", a.Name, name)
			}
			seen[name] = true
			got, ok := a.ParseChunkName(name)
			if !ok || fmt.Sprint(got) != fmt.Sprint(c) {
				t.Errorf("%s: parse %q: got %v %v, want %v", a.Name, name, got, ok, c)
			}
		}
	}
}

func TestParseChunkNameRefusals(t *testing.T) {
	v, err := ParsePrecomputed("", []byte(goodInfo))
	if err != nil {
		t.Fatal(err)
	}
	a := v.Arrays[0]
	for _, name := range []string{
		"", "info", "-13-19_5-21", "-13-19_5-21_-3-1_0-1",
		"-13-20_5-21_-3-1",    // wrong upper bound
		"-12-20_5-21_-3-1",    // not chunk-aligned
		"-45--13_5-21_-3-1",   // before the offset
		"83-115_5-21_-3-1",    // past the grid
		"51-64_37-50_5-6",     // edge not clipped
		"-13-19_05-21_-3-1",   // leading zero
		"-13-19_+5-21_-3-1",   // plus sign
		"-13-19_5-21_-3-1.gz", // the stored gzip object is not a chunk file
		"x-19_5-21_-3-1",
		"-_5-21_-3-1",
	} {
		if c, ok := a.ParseChunkName(name); ok {
			t.Errorf("ParseChunkName(%q) = %v, want refusal", name, c)
		}
	}
}

func TestRewritePrecomputed(t *testing.T) {
	info := withScale0("compressed_segmentation_block_size", `[8, 8, 8]`)
	v, err := ParsePrecomputed("", []byte(info))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v.Original, []byte(info)) {
		t.Errorf("Original differs from the stored info")
	}
	var got map[string]any
	if err := json.Unmarshal(v.Rewritten, &got); err != nil {
		t.Fatalf("rewritten info is not JSON: %v", err)
	}
	if got["mesh"] != "mesh" || got["data_type"] != "uint16" {
		t.Errorf("rewritten info lost top-level members: %v", got)
	}
	for i, s := range got["scales"].([]any) {
		s := s.(map[string]any)
		if s["encoding"] != "raw" {
			t.Errorf("scale %d: got encoding %v, want raw", i, s["encoding"])
		}
		for _, gone := range []string{"sharding", "compressed_segmentation_block_size"} {
			if _, ok := s[gone]; ok {
				t.Errorf("scale %d: %s still present", i, gone)
			}
		}
	}
	// The rewritten info describes the same grid.
	again, err := ParsePrecomputed("", v.Rewritten)
	if err != nil {
		t.Fatalf("rewritten info does not parse: %v", err)
	}
	if fmt.Sprint(again.Arrays[0].Grid, again.Arrays[1].Shape) != fmt.Sprint(v.Arrays[0].Grid, v.Arrays[1].Shape) {
		t.Errorf("rewritten info changed the geometry")
	}
}

// TestRawLayout checks Decode against a chunk laid out by hand from the spec:
// little-endian, x fastest, then y, then z, channel slowest.
func TestRawLayout(t *testing.T) {
	info := `{"data_type": "uint16", "num_channels": 2, "scales": [{"key": "k", "size": [3, 2, 2],
	  "voxel_offset": [0, 0, 0], "chunk_sizes": [[2, 2, 2]], "encoding": "raw"}]}`
	v, err := ParsePrecomputed("", []byte(info))
	if err != nil {
		t.Fatal(err)
	}
	a := v.Arrays[0]
	// The edge chunk at x=2 holds x in [2,3): 1 x 2 y x 2 z x 2 channels.
	c := []int64{1, 0, 0}
	if got, want := a.ChunkName(c), "2-3_0-2_0-2"; got != want {
		t.Fatalf("got name %s, want %s", got, want)
	}
	var stored []byte
	for ch := 0; ch < 2; ch++ {
		for z := 0; z < 2; z++ {
			for y := 0; y < 2; y++ {
				val := uint16(1000*ch + 10*z + y)
				stored = append(stored, byte(val), byte(val>>8)) // one x
			}
		}
	}
	out, err := a.Decode(stored, c)
	if err != nil || !bytes.Equal(out, stored) {
		t.Fatalf("Decode: got %v %v, want the stored bytes", out, err)
	}
	if _, err := a.Decode(stored[:len(stored)-1], c); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short chunk: got %v, want ErrCorrupt", err)
	}
	if _, err := a.Decode(append(stored, 0, 0), c); !errors.Is(err, ErrCorrupt) {
		t.Errorf("long chunk: got %v, want ErrCorrupt", err)
	}
}
