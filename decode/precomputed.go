package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// precomputedTypes are the data_type values of the precomputed spec.
var precomputedTypes = map[string]int{
	"uint8": 1, "int8": 1, "uint16": 2, "int16": 2,
	"uint32": 4, "int32": 4, "uint64": 8, "float32": 4,
}

// precomputedEncodings are the encodings of the spec; the ones mapped to
// false are refused as not implemented yet.
var precomputedEncodings = map[string]bool{
	"raw": true, "jpeg": false, "png": false, "compressed_segmentation": false,
	"compresso": false, "jxl": false,
}

// ParsePrecomputed parses and validates the Neuroglancer precomputed "info"
// file of the layer in directory dir (a source-relative key, "" for the
// root). Any problem is a *MetadataError naming the field and scale.
func ParsePrecomputed(dir string, info []byte) (*Volume, error) {
	file := path.Join(dir, "info")
	fail := func(field string, err error) error { return &MetadataError{File: file, Field: field, Err: err} }

	var top map[string]json.RawMessage
	if err := json.Unmarshal(info, &top); err != nil {
		return nil, fail("", fmt.Errorf("not a JSON object: %w", err))
	}
	if raw, ok := top["@type"]; ok {
		var t string
		if json.Unmarshal(raw, &t) != nil || t != "neuroglancer_multiscale_volume" {
			return nil, fail("@type", fmt.Errorf("want %q, got %s", "neuroglancer_multiscale_volume", raw))
		}
	}
	var dtypeName string
	if err := field(top, "data_type", &dtypeName); err != nil {
		return nil, fail("data_type", err)
	}
	size, ok := precomputedTypes[dtypeName]
	if !ok {
		return nil, fail("data_type", fmt.Errorf("%q is not a precomputed data type: %w", dtypeName, ErrUnsupported))
	}
	var channels int64
	if err := field(top, "num_channels", &channels); err != nil {
		return nil, fail("num_channels", err)
	}
	if channels < 1 || channels > 1<<20 {
		return nil, fail("num_channels", fmt.Errorf("must be between 1 and %d, got %d", 1<<20, channels))
	}
	var scales []map[string]json.RawMessage
	if err := field(top, "scales", &scales); err != nil {
		return nil, fail("scales", err)
	}
	if len(scales) == 0 {
		return nil, fail("scales", errors.New("no scales"))
	}

	v := &Volume{Format: "precomputed", Dir: dir, MetaName: "info", Original: info}
	seen := map[string]bool{}
	for i, s := range scales {
		where := fmt.Sprintf("scales[%d]", i)
		var key string
		if err := field(s, "key", &key); err != nil {
			return nil, fail(where+": key", err)
		}
		where = fmt.Sprintf("scales[%d] (key %q)", i, key)
		if err := checkScaleKey(key); err != nil {
			return nil, fail(where+": key", err)
		}
		if seen[key] {
			return nil, fail(where+": key", errors.New("used by two scales"))
		}
		seen[key] = true
		a, f, err := parseScale(s, key)
		if err != nil {
			return nil, fail(where+": "+f, err)
		}
		a.DType = DType{Name: dtypeName, Size: size}
		a.Channels = int(channels)
		if f, err := a.checkGrid([3]string{"size", "chunk_sizes", "voxel_offset"}); err != nil {
			return nil, fail(where+": "+f, err)
		}
		a.Key = path.Join(dir, key)
		v.Arrays = append(v.Arrays, a)
	}

	rewritten, err := rewritePrecomputed(top, scales)
	if err != nil {
		return nil, fail("", err)
	}
	v.Rewritten = rewritten
	return v, nil
}

// parseScale reads the geometry and encoding of one scale. On error it
// returns the name of the offending field.
func parseScale(s map[string]json.RawMessage, key string) (*Array, string, error) {
	a := &Array{Name: key, Clipped: true, keys: precomputedKeys{}}
	if err := vector(s, "size", &a.Shape); err != nil {
		return nil, "size", err
	}
	a.Offset = make([]int64, 3)
	if _, ok := s["voxel_offset"]; ok {
		if err := vector(s, "voxel_offset", &a.Offset); err != nil {
			return nil, "voxel_offset", err
		}
	}
	var chunks [][]int64
	if err := field(s, "chunk_sizes", &chunks); err != nil {
		return nil, "chunk_sizes", err
	}
	if len(chunks) == 0 || len(chunks[0]) != 3 {
		return nil, "chunk_sizes", fmt.Errorf("want a list of [x, y, z] sizes, got %s", s["chunk_sizes"])
	}
	// Like CloudVolume and neuroglancer, the first chunk size is the one the
	// chunk keys use.
	a.Chunk = chunks[0]
	if raw, ok := s["resolution"]; ok {
		if err := json.Unmarshal(raw, &a.Resolution); err != nil || len(a.Resolution) != 3 {
			return nil, "resolution", fmt.Errorf("want 3 numbers, got %s", raw)
		}
	}
	if _, ok := s["sharding"]; ok && string(s["sharding"]) != "null" {
		return nil, "sharding", fmt.Errorf("sharded scales are not implemented yet: %w", ErrUnsupported)
	}
	if err := field(s, "encoding", &a.Encoding); err != nil {
		return nil, "encoding", err
	}
	implemented, known := precomputedEncodings[a.Encoding]
	switch {
	case !known:
		return nil, "encoding", fmt.Errorf("%q is not a precomputed encoding: %w", a.Encoding, ErrUnsupported)
	case !implemented:
		return nil, "encoding", fmt.Errorf("%q is not implemented yet: %w", a.Encoding, ErrUnsupported)
	}
	a.decode = decodeRaw
	return a, "", nil
}

// checkScaleKey refuses scale keys that are not one clean path element, so
// that no key can leave the layer (or the source) and every scale is one
// directory of the mount.
func checkScaleKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty")
	case key == "." || key == ".." || strings.HasPrefix(key, "../") || strings.HasPrefix(key, "/"):
		return fmt.Errorf("%q leaves the layer directory", key)
	case strings.ContainsAny(key, "/\\\x00"):
		return fmt.Errorf("%q is not a single path element: %w", key, ErrUnsupported)
	case key == "info" || key == "info.orig":
		// The layer's directory shows its metadata under these names.
		return fmt.Errorf("%q is the name of the layer's metadata", key)
	}
	return nil
}

// rewritePrecomputed returns the info for the same layer stored
// uncompressed: every scale raw, unsharded. Fields volfs does not know are
// kept, so that the mount's info is still the layer's info.
func rewritePrecomputed(top map[string]json.RawMessage, scales []map[string]json.RawMessage) ([]byte, error) {
	out := make([]map[string]json.RawMessage, len(scales))
	for i, s := range scales {
		c := make(map[string]json.RawMessage, len(s))
		for k, v := range s {
			switch k {
			case "sharding", "compressed_segmentation_block_size", "jpeg_quality", "png_level", "jxl_quality":
			default:
				c[k] = v
			}
		}
		c["encoding"] = json.RawMessage(`"raw"`)
		out[i] = c
	}
	t := make(map[string]any, len(top))
	for k, v := range top {
		t[k] = v
	}
	t["scales"] = out
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// field unmarshals the required member name of obj into dst.
func field(obj map[string]json.RawMessage, name string, dst any) error {
	raw, ok := obj[name]
	if !ok {
		return errors.New("missing")
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("cannot use %s: %w", raw, err)
	}
	return nil
}

// vector unmarshals the required member name of obj, a list of three
// integers, into dst.
func vector(obj map[string]json.RawMessage, name string, dst *[]int64) error {
	if err := field(obj, name, dst); err != nil {
		return err
	}
	if len(*dst) != 3 {
		return fmt.Errorf("want 3 integers [x, y, z], got %s", obj[name])
	}
	return nil
}

// precomputedKeys names chunks as precomputed does: the voxel bounding box
// "x0-x1_y0-y1_z0-z1" in absolute coordinates (voxel_offset included),
// clipped at the volume's upper edge.
type precomputedKeys struct{}

func (precomputedKeys) name(a *Array, c []int64) string {
	b := make([]byte, 0, 64)
	for d := range c {
		if d > 0 {
			b = append(b, '_')
		}
		lo := a.Offset[d] + c[d]*a.Chunk[d]
		hi := a.Offset[d] + min((c[d]+1)*a.Chunk[d], a.Shape[d])
		b = strconv.AppendInt(b, lo, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, hi, 10)
	}
	return string(b)
}

func (k precomputedKeys) parse(a *Array, name string) ([]int64, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != len(a.Shape) {
		return nil, false
	}
	c := make([]int64, len(parts))
	for d, p := range parts {
		// The lower bound may be negative, so the separating '-' is the
		// first one after the first character.
		i := strings.IndexByte(p[min(1, len(p)):], '-') + 1
		if i <= 0 {
			return nil, false
		}
		lo, err := strconv.ParseInt(p[:i], 10, 64)
		if err != nil {
			return nil, false
		}
		rel := lo - a.Offset[d]
		if rel < 0 || rel%a.Chunk[d] != 0 || rel/a.Chunk[d] >= a.Grid[d] {
			return nil, false
		}
		c[d] = rel / a.Chunk[d]
	}
	// Only the canonical spelling names the chunk: this rejects wrong upper
	// bounds, leading zeros and "+" signs in one comparison.
	if k.name(a, c) != name {
		return nil, false
	}
	return c, true
}

// decodeRaw checks a raw chunk: stored bytes are the decoded bytes.
func decodeRaw(stored []byte, size int) ([]byte, error) {
	if len(stored) != size {
		return nil, fmt.Errorf("%w: raw chunk has %d bytes, want %d", ErrCorrupt, len(stored), size)
	}
	return stored, nil
}
