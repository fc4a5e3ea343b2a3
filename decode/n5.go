package decode

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"

	"github.com/volfs/volfs/decode/codec"
	"github.com/volfs/volfs/internal/mem"
)

func init() {
	RegisterFormat(Format{Name: "n5", Meta: "attributes.json", Parse: ParseN5})
}

// n5Types are the N5 data types volfs reads.
var n5Types = map[string]DType{
	"uint8": {Size: 1, Kind: 'u'}, "uint16": {Size: 2, Kind: 'u'}, "uint32": {Size: 4, Kind: 'u'}, "uint64": {Size: 8, Kind: 'u'},
	"int8": {Size: 1, Kind: 'i'}, "int16": {Size: 2, Kind: 'i'}, "int32": {Size: 4, Kind: 'i'}, "int64": {Size: 8, Kind: 'i'},
	"float32": {Size: 4, Kind: 'f'}, "float64": {Size: 8, Kind: 'f'},
}

// ParseN5 parses the "attributes.json" of directory dir. Attributes without
// "dimensions" (a group, the root) are not volume metadata (nil, nil). A
// dataset is dir itself; each of its chunk files is a valid raw N5 block:
// a header giving the block's extent clipped to the dataset, then the
// elements big-endian, first dimension fastest. A block stored truncated
// or padded is re-laid to that extent (missing elements read as zero), so
// a block's size is known from the metadata alone. Any problem is a
// *MetadataError naming the field; a compression volfs does not implement
// wraps ErrUnsupported.
func ParseN5(dir string, meta []byte) (*Volume, error) {
	file := path.Join(dir, "attributes.json")
	fail := func(field string, err error) error { return &MetadataError{File: file, Field: field, Err: err} }
	var top map[string]json.RawMessage
	if err := json.Unmarshal(meta, &top); err != nil {
		return nil, fail("", fmt.Errorf("not a JSON object: %w", err))
	}
	if _, ok := top["dimensions"]; !ok {
		return nil, nil // a group's attributes
	}
	a := &Array{Key: dir, Channels: 1, Clipped: true, FirstFastest: true}
	if err := field(top, "dimensions", &a.Shape); err != nil {
		return nil, fail("dimensions", err)
	}
	if err := field(top, "blockSize", &a.Chunk); err != nil {
		return nil, fail("blockSize", err)
	}
	var dt string
	if err := field(top, "dataType", &dt); err != nil {
		return nil, fail("dataType", err)
	}
	d, ok := n5Types[dt]
	if !ok {
		return nil, fail("dataType", fmt.Errorf("%q: %w", dt, ErrUnsupported))
	}
	d.Name, d.BigEndian = dt, true
	a.DType = d
	if len(a.Shape) > 0xffff {
		return nil, fail("dimensions", fmt.Errorf("%d axes", len(a.Shape)))
	}
	if f, err := a.checkGrid([3]string{"dimensions", "blockSize", "dimensions"}); err != nil {
		return nil, fail(f, err)
	}
	for _, b := range a.Chunk {
		if b > 0xffffffff {
			return nil, fail("blockSize", fmt.Errorf("%d does not fit a block header", b))
		}
	}
	a.keys = separatorKeys("", "/", len(a.Shape))

	ctype, field := "raw", "compression"
	var comp struct{ Type string }
	if raw, ok := top["compression"]; ok {
		if err := json.Unmarshal(raw, &comp); err != nil || comp.Type == "" {
			return nil, fail("compression", fmt.Errorf("want an object with a type, got %s", raw))
		}
		ctype = comp.Type
		var gz struct {
			UseZlib bool `json:"useZlib"`
		}
		if json.Unmarshal(raw, &gz); ctype == "gzip" && gz.UseZlib {
			ctype = "zlib"
		}
	} else if raw, ok := top["compressionType"]; ok { // N5 before 1.0
		field = "compressionType"
		if err := json.Unmarshal(raw, &ctype); err != nil {
			return nil, fail(field, err)
		}
	}
	var decompress codec.Func
	if ctype != "raw" {
		name, ok := codec.Name(codec.N5, ctype)
		if !ok {
			return nil, fail(field, fmt.Errorf("compression %q: %w", ctype, ErrUnsupported))
		}
		var err error
		if decompress, err = codec.Lookup(name); err != nil {
			return nil, fail(field, err)
		}
	}
	a.Encoding = ctype
	a.header = func(c []int64) []byte { return n5Header(a.Extent(c)) }
	a.decode = func(dst, stored []byte, c []int64, size int) ([]byte, error) {
		return decodeN5Block(dst, stored, decompress, a.Extent(c), a.Chunk, d.Size, size)
	}
	a.Describe = [][2]string{{"order", "first axis fastest, big-endian"}}

	rewritten, err := rewriteJSON(top, map[string]json.RawMessage{
		"compression":     json.RawMessage(`{"type": "raw"}`),
		"compressionType": nil,
	})
	if err != nil {
		return nil, fail("", err)
	}
	a.setRecipe("n5", []map[string]json.RawMessage{top}, func(name string) bool { return n5Members[name] })
	return &Volume{Format: "n5", Dir: dir, MetaName: "attributes.json", Original: meta, Rewritten: rewritten, Arrays: []*Array{a}}, nil
}

// n5Header returns the header of a default-mode N5 block of extent e.
func n5Header(e []int64) []byte {
	h := make([]byte, 4+4*len(e))
	binary.BigEndian.PutUint16(h[2:], uint16(len(e)))
	for i, n := range e {
		binary.BigEndian.PutUint32(h[4+4*i:], uint32(n))
	}
	return h
}

// decodeN5Block decodes a stored N5 block into a raw block of the given
// extent (the block clipped to the dataset): its header, then the elements.
// The stored header's extent is trusted for the layout of the data but
// bounded by the block size; elements outside it read as zero, elements
// outside extent are dropped.
func decodeN5Block(dst, stored []byte, codec codec.Func, extent, block []int64, elemSize, size int) ([]byte, error) {
	nd := len(extent)
	if len(stored) < 4 {
		return nil, fmt.Errorf("%w: n5 block of %d bytes has no header", ErrCorrupt, len(stored))
	}
	mode := binary.BigEndian.Uint16(stored)
	if mode != 0 && mode != 1 {
		return nil, fmt.Errorf("n5 block mode %d (object blocks): %w", mode, ErrUnsupported)
	}
	if int(binary.BigEndian.Uint16(stored[2:])) != nd {
		return nil, fmt.Errorf("%w: n5 block header has %d dimensions, want %d", ErrCorrupt, binary.BigEndian.Uint16(stored[2:]), nd)
	}
	hlen := 4 + 4*nd
	if mode == 1 {
		hlen += 4
	}
	if len(stored) < hlen {
		return nil, fmt.Errorf("%w: n5 block header truncated", ErrCorrupt)
	}
	have := make([]int64, nd)
	n := int64(1)
	for i := range nd {
		have[i] = int64(binary.BigEndian.Uint32(stored[4+4*i:]))
		if have[i] > block[i] {
			return nil, fmt.Errorf("%w: n5 block header extent %v exceeds the block size %v", ErrCorrupt, have, block)
		}
		n *= have[i]
	}
	if mode == 1 && int64(binary.BigEndian.Uint32(stored[4+4*nd:])) != n {
		return nil, fmt.Errorf("n5 varlength block: %w", ErrUnsupported)
	}
	data := stored[hlen:]
	want := int(n) * elemSize
	if codec != nil {
		var err error
		if data, err = codec(nil, data, want); err != nil {
			return nil, err
		}
	}
	if len(data) != want {
		return nil, fmt.Errorf("%w: n5 block data has %d bytes, want %d for extent %v", ErrCorrupt, len(data), want, have)
	}
	out := dst[:0]
	if cap(out) < size {
		out = mem.Make(size)[:0]
	}
	out = append(out, n5Header(extent)...)
	hdr := len(out)
	out = out[:size]
	same := true
	for i := range nd {
		same = same && have[i] == extent[i]
	}
	if same {
		copy(out[hdr:], data)
		return out, nil
	}
	clear(out[hdr:])
	copyBox(out[hdr:], extent, data, have, elemSize)
	return out, nil
}

// copyBox copies the overlap of two first-axis-fastest boxes anchored at
// the origin, of extents dstExt and srcExt, from src to dst.
func copyBox(dst []byte, dstExt []int64, src []byte, srcExt []int64, elemSize int) {
	nd := len(dstExt)
	common := make([]int64, nd)
	for i := range nd {
		common[i] = min(dstExt[i], srcExt[i])
		if common[i] == 0 {
			return
		}
	}
	row := common[0] * int64(elemSize)
	idx := make([]int64, nd) // idx[0] stays 0: rows are copied whole
	for {
		so, do := int64(0), int64(0)
		for i := nd - 1; i >= 0; i-- {
			so = so*srcExt[i] + idx[i]
			do = do*dstExt[i] + idx[i]
		}
		copy(dst[do*int64(elemSize):do*int64(elemSize)+row], src[so*int64(elemSize):so*int64(elemSize)+row])
		i := 1
		for ; i < nd; i++ {
			if idx[i]++; idx[i] < common[i] {
				break
			}
			idx[i] = 0
		}
		if i == nd {
			return
		}
	}
}

// n5Members are the members of an N5 dataset's attributes.json that decide
// how its blocks decode; the others are the user's attributes, not part of
// the array's recipe.
var n5Members = map[string]bool{"dimensions": true, "blockSize": true, "dataType": true, "compression": true, "compressionType": true}
