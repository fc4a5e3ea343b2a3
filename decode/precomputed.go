package decode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"path"
	"strconv"
	"strings"

	"github.com/volfs/volfs/decode/codec"
)

func init() {
	RegisterFormat(Format{Name: "precomputed", Meta: "info", Parse: func(dir string, meta []byte) (*Volume, error) {
		if !looksPrecomputed(meta) {
			return nil, nil // an "info" file of something else
		}
		return ParsePrecomputed(dir, meta)
	}})
}

// looksPrecomputed reports whether an info file is meant as precomputed
// volume metadata (it has "scales" or the "@type"), as opposed to some other
// file that happens to be called info.
func looksPrecomputed(info []byte) bool {
	return bytes.Contains(info, []byte(`"scales"`)) || bytes.Contains(info, []byte("neuroglancer_multiscale_volume"))
}

// precomputedTypes are the data_type values of the precomputed spec.
var precomputedTypes = map[string]DType{
	"uint8": {Size: 1, Kind: 'u'}, "int8": {Size: 1, Kind: 'i'},
	"uint16": {Size: 2, Kind: 'u'}, "int16": {Size: 2, Kind: 'i'},
	"uint32": {Size: 4, Kind: 'u'}, "int32": {Size: 4, Kind: 'i'},
	"uint64": {Size: 8, Kind: 'u'}, "float32": {Size: 4, Kind: 'f'},
}

// ParsePrecomputed parses and validates the Neuroglancer precomputed "info"
// file of the layer in directory dir (a source-relative key, "" for the
// root). Any problem is a *MetadataError naming the field and scale. A
// scale whose encoding or sharding volfs does not implement is not an
// error: it is listed in Volume.Skipped and left out of the rewritten info,
// unless every scale is, which is an error wrapping ErrUnsupported.
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
	dtype, ok := precomputedTypes[dtypeName]
	dtype.Name = dtypeName
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
	var served []map[string]json.RawMessage
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
		if err == nil {
			a.DType = dtype
			a.Channels = int(channels)
			a.Key = path.Join(dir, key)
			f, err = a.checkGrid([3]string{"size", "chunk_sizes", "voxel_offset"})
		}
		if err == nil {
			f, err = a.setEncoding(s)
		}
		if errors.Is(err, ErrUnsupported) {
			v.Skipped = append(v.Skipped, Skipped{Name: key, Err: fail(where+": "+f, err)})
			continue
		}
		if err != nil {
			return nil, fail(where+": "+f, err)
		}
		a.setRecipe("precomputed", []map[string]json.RawMessage{top, s}, func(name string) bool { return !precomputedNotRecipe[name] })
		v.Arrays = append(v.Arrays, a)
		served = append(served, s)
	}
	if len(v.Arrays) == 0 {
		return nil, v.Skipped[0].Err
	}

	rewritten, err := rewritePrecomputed(top, served, v.Arrays)
	if err != nil {
		return nil, fail("", err)
	}
	v.Rewritten = rewritten
	return v, nil
}

// parseScale reads the geometry of one scale. On error it returns the name
// of the offending field.
func parseScale(s map[string]json.RawMessage, key string) (*Array, string, error) {
	a := &Array{Name: key, Clipped: true, FirstFastest: true, keys: keyTree{bbox: true, levels: []keyLevel{{lo: 0, hi: 3}}}}
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
	// chunk keys use; the rewritten info lists only it.
	a.Chunk = chunks[0]
	if raw, ok := s["resolution"]; ok {
		if err := json.Unmarshal(raw, &a.Resolution); err != nil || len(a.Resolution) != 3 {
			return nil, "resolution", fmt.Errorf("want 3 numbers, got %s", raw)
		}
	}
	return a, "", nil
}

// precomputedDecoders are the encodings of the spec that volfs decodes,
// each set up from its scale's members; the others are refused by name.
var precomputedDecoders = map[string]func(a *Array, s map[string]json.RawMessage) (string, error){
	"raw": func(a *Array, _ map[string]json.RawMessage) (string, error) {
		a.decode = decodeRaw
		a.verbatim = true
		return "", nil
	},
	"jpeg": func(a *Array, _ map[string]json.RawMessage) (string, error) {
		if a.DType.Name != "uint8" || a.Channels != 1 && a.Channels != 3 {
			return "encoding", fmt.Errorf("jpeg of %d %s channels: %w", a.Channels, a.DType.Name, ErrUnsupported)
		}
		a.decode = func(dst, stored []byte, c []int64, _ int) ([]byte, error) {
			return codec.JPEG(dst, stored, extent3(a.Extent(c)), a.Channels)
		}
		return "", nil
	},
	"png": func(a *Array, _ map[string]json.RawMessage) (string, error) {
		if a.DType.Name != "uint8" && a.DType.Name != "uint16" || a.Channels > 4 {
			return "encoding", fmt.Errorf("png of %d %s channels: %w", a.Channels, a.DType.Name, ErrUnsupported)
		}
		a.decode = func(dst, stored []byte, c []int64, _ int) ([]byte, error) {
			return codec.PNG(dst, stored, extent3(a.Extent(c)), a.Channels, a.DType.Size)
		}
		return "", nil
	},
	"compressed_segmentation": func(a *Array, s map[string]json.RawMessage) (string, error) {
		if a.DType.Name != "uint32" && a.DType.Name != "uint64" {
			return "encoding", fmt.Errorf("compressed_segmentation of %s: %w", a.DType.Name, ErrUnsupported)
		}
		var block []int64
		if err := vector(s, "compressed_segmentation_block_size", &block); err != nil {
			return "compressed_segmentation_block_size", err
		}
		for _, b := range block {
			if b <= 0 || b > 1<<20 {
				return "compressed_segmentation_block_size", fmt.Errorf("want positive sizes up to %d, got %v", 1<<20, block)
			}
		}
		a.decode = func(dst, stored []byte, c []int64, _ int) ([]byte, error) {
			return codec.CompressedSegmentation(dst, stored, extent3(a.Extent(c)), a.Channels, a.DType.Size, [3]int64(block))
		}
		// Small blocks can store more than twice the decoded size (1x1x1
		// uint32 blocks with unshared tables take 12 bytes a voxel): let
		// the stored-size bound cover what the format allows, up to twice
		// more.
		full := a.ChunkSize(make([]int64, 3))
		a.storedExtra = min(max(csegStoredBound(a.Chunk, block, a.Channels, a.DType.Size)-(1<<20), 0), 2*full)
		a.Describe = append(a.Describe, [2]string{"block", fmt.Sprint(block)})
		return "", nil
	},
}

// csegStoredBound bounds the stored size of a compressed_segmentation chunk
// of the given extent: per channel, an offset word, then per block a header
// of 8 bytes, values of at most as many bits as the block's voxels can need
// (as many distinct values as voxels, no more than the chunk's) for every
// voxel of the full block, and a table of at most that many elements. The
// bound grows with the extent, so the full chunk's bounds its edge chunks.
// It saturates at math.MaxInt64.
func csegStoredBound(extent, block []int64, channels, elemSize int) int64 {
	const most = math.MaxInt64
	mul := func(a, b int64) int64 {
		if hi, lo := bits.Mul64(uint64(a), uint64(b)); hi != 0 || lo > most {
			return most
		}
		return a * b
	}
	add := func(a, b int64) int64 { return min(a, most-b) + b }
	blocks, blockVoxels, voxels := int64(1), int64(1), int64(1)
	for d := range extent {
		blocks = mul(blocks, (extent[d]+block[d]-1)/block[d])
		blockVoxels = mul(blockVoxels, block[d])
		voxels = mul(voxels, extent[d])
	}
	distinct := min(blockVoxels, voxels)
	width := int64(0)
	for _, w := range []int64{0, 1, 2, 4, 8, 16, 32} {
		width = w
		if w == 32 || distinct <= 1<<w {
			break
		}
	}
	values := mul(add(mul(blockVoxels, width), 31)/32, 4)
	perBlock := add(add(8, values), mul(distinct, int64(elemSize)))
	return mul(int64(channels), add(4, mul(blocks, perBlock)))
}

// extent3 returns a precomputed chunk extent as an array.
func extent3(e []int64) [3]int64 { return [3]int64{e[0], e[1], e[2]} }

// precomputedEncodings are the encodings of the spec.
var precomputedEncodings = map[string]bool{
	"raw": true, "jpeg": true, "png": true, "compressed_segmentation": true,
	"compresso": true, "jxl": true,
}

// setEncoding sets the decoder of a scale from its encoding and sharding.
func (a *Array) setEncoding(s map[string]json.RawMessage) (string, error) {
	if err := field(s, "encoding", &a.Encoding); err != nil {
		return "encoding", err
	}
	setup, ok := precomputedDecoders[a.Encoding]
	switch {
	case !precomputedEncodings[a.Encoding]:
		return "encoding", fmt.Errorf("%q is not a precomputed encoding: %w", a.Encoding, ErrUnsupported)
	case !ok:
		return "encoding", fmt.Errorf("%q is not implemented: %w", a.Encoding, ErrUnsupported)
	}
	if f, err := setup(a, s); err != nil {
		return f, err
	}
	if raw := s["sharding"]; ShardingGiven(raw) {
		spec, f, err := parseSharding(raw)
		if err != nil {
			return f, err
		}
		if compressedMortonBits(a.Grid) > 64 {
			return "sharding", fmt.Errorf("a grid of %v chunks needs more than 64 bits of chunk id", a.Grid)
		}
		a.load = func(ctx context.Context, src Source, c []int64, limit int64) ([]byte, error) {
			return spec.readChunk(ctx, src, a.Key, compressedMortonCode(c, a.Grid), limit)
		}
		a.gridPlaced = true
		a.Describe = append(a.Describe, [2]string{"sharding", spec.String()})
	}
	return "", nil
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
// uncompressed: the scales served, each raw, unsharded, with the one chunk
// size its keys use. Fields volfs does not know are kept, so that the
// mount's info is still the layer's info.
func rewritePrecomputed(top map[string]json.RawMessage, scales []map[string]json.RawMessage, arrays []*Array) ([]byte, error) {
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
		chunk, _ := json.Marshal([][]int64{arrays[i].Chunk})
		c["chunk_sizes"] = chunk
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
	enc.SetEscapeHTML(false)
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

// appendBBox appends the precomputed name of the chunk at c: its voxel
// bounding box "x0-x1_y0-y1_z0-z1" in absolute coordinates (voxel_offset
// included), clipped at the volume's upper edge.
func appendBBox(b []byte, a *Array, c []int64) []byte {
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
	return b
}

// parseBBox parses a precomputed chunk name, accepting only the canonical
// spelling of a chunk of the grid.
func parseBBox(a *Array, name string) ([]int64, bool) {
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
	if string(appendBBox(nil, a, c)) != name {
		return nil, false
	}
	return c, true
}

// decodeRaw checks a raw chunk: stored bytes are the decoded bytes.
func decodeRaw(_, stored []byte, _ []int64, size int) ([]byte, error) {
	if len(stored) != size {
		return nil, fmt.Errorf("%w: raw chunk has %d bytes, want %d", ErrCorrupt, len(stored), size)
	}
	return stored, nil
}

// precomputedNotRecipe are the members of an info file that do not decide
// how a scale's chunks decode (the scales, each hashed with its own
// array, and references to other layers' data).
var precomputedNotRecipe = map[string]bool{"scales": true, "mesh": true, "skeletons": true, "segment_properties": true}
