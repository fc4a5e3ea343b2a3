// Package zarr3shard writes Zarr v3 shards by hand, as the
// sharding_indexed codec (zarr-specs codecs/sharding-indexed) lays them
// out, so that tests of volfs's shard reader do not depend on the reader's
// own code or on a writer installed on the machine. It is imported by tests
// only.
package zarr3shard

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Level is one level of sharding_indexed, outermost first.
type Level struct {
	Inner []int64 // inner chunk shape
	AtEnd bool    // index_location end, else start
	CRC   bool    // index_codecs bytes then crc32c, else bytes only
}

// Value is the element at global coordinates g of the arrays the tests
// write (an FNV-1a of the coordinates, folded to 16 bits), as
// integration/testdata/zarr3shard.mjs computes it.
func Value(g []int64) uint16 {
	h := uint32(2166136261)
	for _, x := range g {
		h = (h ^ uint32(x)) * 16777619
	}
	return uint16(h ^ h>>16)
}

// Encode returns the stored bytes of the shard of shape at origin (global
// element coordinates) with the given levels. chunk returns the stored
// bytes of the innermost chunk at origin o, or false to leave it out of its
// shard's index (an entry of two 2^64-1). Inner chunks are written in
// reverse grid order: offsets need not follow the grid.
func Encode(levels []Level, origin, shape []int64, chunk func(o []int64) ([]byte, bool)) []byte {
	lv := levels[0]
	nd := len(shape)
	grid := make([]int64, nd)
	n := int64(1)
	for d := range nd {
		grid[d] = shape[d] / lv.Inner[d]
		n *= grid[d]
	}
	index := make([]byte, 16*n)
	var data []byte
	base := int64(0)
	if !lv.AtEnd {
		base = 16 * n
		if lv.CRC {
			base += 4
		}
	}
	for i := n - 1; i >= 0; i-- {
		o := make([]int64, nd)
		r := i
		for d := nd - 1; d >= 0; d-- {
			o[d] = origin[d] + r%grid[d]*lv.Inner[d]
			r /= grid[d]
		}
		var b []byte
		if len(levels) == 1 {
			var ok bool
			if b, ok = chunk(o); !ok {
				binary.LittleEndian.PutUint64(index[16*i:], math.MaxUint64)
				binary.LittleEndian.PutUint64(index[16*i+8:], math.MaxUint64)
				continue
			}
		} else {
			b = Encode(levels[1:], o, lv.Inner, chunk)
		}
		binary.LittleEndian.PutUint64(index[16*i:], uint64(base+int64(len(data))))
		binary.LittleEndian.PutUint64(index[16*i+8:], uint64(len(b)))
		data = append(data, b...)
	}
	if lv.CRC {
		index = binary.LittleEndian.AppendUint32(index, crc32.Checksum(index, crc32.MakeTable(crc32.Castagnoli)))
	}
	if lv.AtEnd {
		return append(data, index...)
	}
	return append(index, data...)
}

// Codecs returns the "codecs" list of an array sharded by levels, ready
// for encoding/json: the innermost chunks are bytes little-endian, then
// gzip (level 1) when gz.
func Codecs(levels []Level, gz bool) []any {
	bytesLE := map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}}
	if len(levels) == 0 {
		if gz {
			return []any{bytesLE, map[string]any{"name": "gzip", "configuration": map[string]any{"level": 1}}}
		}
		return []any{bytesLE}
	}
	lv := levels[0]
	loc, index := "start", []any{bytesLE}
	if lv.AtEnd {
		loc = "end"
	}
	if lv.CRC {
		index = append(index, map[string]any{"name": "crc32c"})
	}
	return []any{map[string]any{"name": "sharding_indexed", "configuration": map[string]any{
		"chunk_shape": lv.Inner, "codecs": Codecs(levels[1:], gz), "index_codecs": index, "index_location": loc}}}
}

// Gzip returns b gzip-compressed.
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}
