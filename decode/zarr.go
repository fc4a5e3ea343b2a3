package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/volfs/volfs/decode/codec"
)

func init() {
	RegisterFormat(Format{Name: "zarr2", Meta: ".zarray", Parse: ParseZarr2})
	RegisterFormat(Format{Name: "zarr2", Meta: ".zmetadata", Parse: parseZarr2Consolidated})
}

// ParseZarr2 parses the ".zarray" of the Zarr v2 array in directory dir.
// The array is dir itself; its chunk files hold what zarr-python would
// store with no compressor and no filters, in the array's own order and
// byte order, so the rewritten .zarray differs only in "compressor" and
// "filters". Any problem is a *MetadataError naming the field; a
// compressor, filter or dtype volfs does not implement wraps
// ErrUnsupported.
func ParseZarr2(dir string, meta []byte) (*Volume, error) {
	file := path.Join(dir, ".zarray")
	fail := func(field string, err error) error { return &MetadataError{File: file, Field: field, Err: err} }
	var top map[string]json.RawMessage
	if err := json.Unmarshal(meta, &top); err != nil {
		return nil, fail("", fmt.Errorf("not a JSON object: %w", err))
	}
	var zf int
	if err := field(top, "zarr_format", &zf); err != nil || zf != 2 {
		return nil, fail("zarr_format", fmt.Errorf("want 2, got %s", top["zarr_format"]))
	}
	a := &Array{Key: dir, Channels: 1, XLast: true}
	if err := field(top, "shape", &a.Shape); err != nil {
		return nil, fail("shape", err)
	}
	if err := field(top, "chunks", &a.Chunk); err != nil {
		return nil, fail("chunks", err)
	}
	var dt string
	if err := field(top, "dtype", &dt); err != nil {
		return nil, fail("dtype", fmt.Errorf("%w (structured dtypes are not supported: %w)", err, ErrUnsupported))
	}
	var err error
	if a.DType, err = codec.ParseNumpyDType(dt); err != nil {
		return nil, fail("dtype", err)
	}
	order := "C"
	if raw, ok := top["order"]; ok {
		if json.Unmarshal(raw, &order) != nil || order != "C" && order != "F" {
			return nil, fail("order", fmt.Errorf("want \"C\" or \"F\", got %s", raw))
		}
	}
	a.FirstFastest = order == "F"
	sep := "."
	if raw, ok := top["dimension_separator"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &sep) != nil || sep != "." && sep != "/" {
			return nil, fail("dimension_separator", fmt.Errorf("want \".\" or \"/\", got %s", raw))
		}
	}
	if f, err := a.checkGrid([3]string{"shape", "chunks", "shape"}); err != nil {
		return nil, fail(f, err)
	}
	a.keys = separatorKeys("", sep, len(a.Shape))
	if a.Fill, err = parseFill(top["fill_value"], a.DType); err != nil {
		return nil, fail("fill_value", err)
	}

	// Decoding undoes the compressor, then the filters in reverse order.
	// Encoding ran the other way, from the array's elements: each filter
	// is configured with the element type it was given.
	var chain []*codec.Stage
	elem := a.DType
	if raw, ok := top["filters"]; ok && string(raw) != "null" {
		var filters []json.RawMessage
		if err := json.Unmarshal(raw, &filters); err != nil {
			return nil, fail("filters", fmt.Errorf("want a list, got %s", raw))
		}
		for i, f := range filters {
			s, err := numcodec(f, elem)
			if err != nil {
				return nil, fail(fmt.Sprintf("filters[%d]", i), err)
			}
			if s.Decoded.Size != elem.Size {
				// zarr-python views the filters' output as the array's
				// dtype, which fails on another element size.
				return nil, fail(fmt.Sprintf("filters[%d]", i), fmt.Errorf("%s decodes %d-byte elements, the stage after it takes %d-byte ones", s.Name, s.Decoded.Size, elem.Size))
			}
			chain, elem = append(chain, s), s.Encoded
		}
	}
	if raw, ok := top["compressor"]; ok && string(raw) != "null" {
		s, err := numcodec(raw, elem)
		if err != nil {
			return nil, fail("compressor", err)
		}
		chain = append(chain, s)
	}
	slices.Reverse(chain)
	a.widen = codec.Widening(elem, a.DType)
	a.Encoding = "raw"
	if len(chain) > 0 {
		names := make([]string, len(chain))
		for i, s := range chain {
			names[i] = s.Name
		}
		a.Encoding = strings.Join(names, " | ")
	}
	a.decode = chainDecoder(chain)
	a.verbatim = len(chain) == 0
	a.Describe = [][2]string{{"order", order}, {"separator", sep}, {"fill", fillString(top["fill_value"])}}

	rewritten, err := rewriteJSON(top, map[string]json.RawMessage{"compressor": json.RawMessage("null"), "filters": json.RawMessage("null")})
	if err != nil {
		return nil, fail("", err)
	}
	a.setRecipe("zarr2", []map[string]json.RawMessage{top}, nil)
	return &Volume{Format: "zarr2", Dir: dir, MetaName: ".zarray", Original: meta, Rewritten: rewritten, Arrays: []*Array{a}}, nil
}

// parseZarr2Consolidated rewrites a consolidated ".zmetadata" so that every
// ".zarray" it holds says what the mount serves: no compressor, no
// filters. It describes no arrays itself; each array's directory does.
func parseZarr2Consolidated(dir string, meta []byte) (*Volume, error) {
	file := path.Join(dir, ".zmetadata")
	var top map[string]json.RawMessage
	if err := json.Unmarshal(meta, &top); err != nil {
		return nil, &MetadataError{File: file, Err: fmt.Errorf("not a JSON object: %w", err)}
	}
	var entries map[string]json.RawMessage
	if err := field(top, "metadata", &entries); err != nil {
		return nil, &MetadataError{File: file, Field: "metadata", Err: err}
	}
	for k, v := range entries {
		if k != ".zarray" && !strings.HasSuffix(k, "/.zarray") {
			continue
		}
		var arr map[string]json.RawMessage
		if err := json.Unmarshal(v, &arr); err != nil {
			return nil, &MetadataError{File: file, Field: "metadata." + k, Err: err}
		}
		if _, err := ParseZarr2(path.Join(dir, path.Dir(k)), v); err != nil {
			continue // that array passes through undecoded: keep its entry as stored
		}
		r, err := rewriteJSON(arr, map[string]json.RawMessage{"compressor": json.RawMessage("null"), "filters": json.RawMessage("null")})
		if err != nil {
			return nil, &MetadataError{File: file, Field: "metadata." + k, Err: err}
		}
		entries[k] = r
	}
	em, err := marshalJSON(entries)
	if err != nil {
		return nil, err
	}
	rewritten, err := rewriteJSON(top, map[string]json.RawMessage{"metadata": em})
	if err != nil {
		return nil, err
	}
	return &Volume{Format: "zarr2", Dir: dir, MetaName: ".zmetadata", Original: meta, Rewritten: rewritten}, nil
}

// numcodec returns the stage of a numcodecs codec configuration
// ({"id": "blosc", ...}) applied to elements of type elem. Codecs are
// registered under their numcodecs ids.
func numcodec(raw json.RawMessage, elem DType) (*codec.Stage, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("want a codec object, got %s", raw)
	}
	var id string
	if err := field(cfg, "id", &id); err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	name, _ := codec.Name(codec.Numcodecs, id)
	return codec.NewStage(name, codec.Config{Params: raw, Elem: elem})
}

// chainDecoder returns a chunk decoder that applies chain in order. The
// last stage's output is bounded by the chunk's decoded size, and each
// stage's by what the stage after it may take, and at most by twice what
// it holds for a legitimate chunk, plus 1 MiB (chainCap): the slack of one
// compressor that expands its input a little, which does not compound
// along the chain, so that ten gzip filters cannot each double the bound
// before them (issue 29 item 10). Each stage decodes at most that much
// before it fails, and at most two stages' buffers are live at once.
func chainDecoder(chain []*codec.Stage) func(dst, stored []byte, c []int64, size int) ([]byte, error) {
	return func(dst, stored []byte, _ []int64, size int) ([]byte, error) {
		if len(chain) == 0 {
			return decodeRaw(dst, stored, nil, size)
		}
		var limits [8]int
		limit := limits[:0]
		if len(chain) > len(limits) {
			limit = make([]int, 0, len(chain))
		}
		limit = limit[:len(chain)]
		limit[len(chain)-1] = size
		exact := size // the legitimate output of stage i, compression aside
		for i := len(chain) - 2; i >= 0; i-- {
			next := chain[i+1]
			exact = chainExact(exact, next)
			limit[i] = min(next.InLimit(limit[i+1]), chainCap(exact))
		}
		b := stored
		for i, s := range chain {
			var out []byte
			if i == len(chain)-1 {
				out = dst
			}
			var err error
			if b, err = s.Decode(out, b, limit[i]); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
}

// chainExact returns the bytes of the input of s whose output is out
// bytes, compression aside: out scaled by the ratio of s's element sizes
// (an astype from float64 to uint8 takes 8 bytes for each it gives).
func chainExact(out int, s *codec.Stage) int {
	if s.Encoded.Size <= s.Decoded.Size || s.Decoded.Size == 0 {
		return out
	}
	return (out/s.Decoded.Size + 1) * s.Encoded.Size
}

// chainCap bounds a stage of a chain whose legitimate output is exact
// bytes: a compressor's slack once (codec's stored limit), a checksum's
// or a header's few bytes within the 1 MiB.
func chainCap(exact int) int { return 2*exact + 1<<20 }

// parseFill returns one element of the fill value raw (JSON) in d's byte
// order: null is zeros; numbers, "NaN", "Infinity", "-Infinity", hex
// strings "0x…" of the raw bits (Zarr v3) and booleans are accepted where
// the type allows them.
func parseFill(raw json.RawMessage, d DType) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	out := make([]byte, d.Size)
	put := func(bits uint64) { d.PutBits(out, bits) }
	var str string
	if json.Unmarshal(raw, &str) == nil {
		var f float64
		switch {
		case strings.HasPrefix(str, "0x") && d.Kind == 'f':
			bits, err := strconv.ParseUint(str[2:], 16, d.Size*8)
			if err != nil {
				return nil, fmt.Errorf("%q is not %d hex bits", str, d.Size*8)
			}
			put(bits)
			return out, nil
		case str == "NaN":
			f = math.NaN()
		case str == "Infinity":
			f = math.Inf(1)
		case str == "-Infinity":
			f = math.Inf(-1)
		default:
			return nil, fmt.Errorf("%q is not a fill value volfs reads: %w", str, ErrUnsupported)
		}
		if d.Kind != 'f' {
			return nil, fmt.Errorf("%q for a non-float type", str)
		}
		put(floatBits(f, d.Size))
		return out, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if d.Kind != 'b' {
			return nil, fmt.Errorf("%s for a non-bool type", raw)
		}
		if b {
			out[0] = 1
		}
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var n json.Number
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("want a number, got %s", raw)
	}
	switch d.Kind {
	case 'f':
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("want a number, got %s", raw)
		}
		put(floatBits(f, d.Size))
	case 'b':
		v, err := n.Int64()
		if err != nil || v < 0 || v > 1 {
			return nil, fmt.Errorf("want a bool, got %s", raw)
		}
		out[0] = byte(v)
	case 'i':
		v, err := strconv.ParseInt(n.String(), 10, d.Size*8)
		if err != nil {
			return nil, fmt.Errorf("want an int%d, got %s", d.Size*8, raw)
		}
		put(uint64(v))
	case 'u':
		v, err := strconv.ParseUint(n.String(), 10, d.Size*8)
		if err != nil {
			return nil, fmt.Errorf("want a uint%d, got %s", d.Size*8, raw)
		}
		put(v)
	}
	return out, nil
}

// fillString shows a fill value for `volfs info`.
func fillString(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

// floatBits returns the IEEE 754 bits of f as a float of size bytes. NaN is
// the canonical quiet NaN that NumPy writes (Go's math.NaN sets a payload
// bit).
func floatBits(f float64, size int) uint64 {
	if math.IsNaN(f) {
		return [...]uint64{2: 0x7e00, 4: 0x7fc00000, 8: 0x7ff8000000000000}[size]
	}
	switch size {
	case 2:
		return uint64(codec.Float16Bits(float32(f)))
	case 4:
		return uint64(math.Float32bits(float32(f)))
	}
	return math.Float64bits(f)
}

// rewriteJSON returns obj with the members of set replaced, indented.
func rewriteJSON(obj map[string]json.RawMessage, set map[string]json.RawMessage) ([]byte, error) {
	out := make(map[string]json.RawMessage, len(obj)+len(set))
	for k, v := range obj {
		out[k] = v
	}
	for k, v := range set {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// marshalJSON is json.Marshal without HTML escaping: metadata volfs writes
// shows "<u2" as its readers and the source wrote it, not "\u003cu2".
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
