package decode

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzParsePrecomputed: any info either is refused with a *MetadataError or
// yields arrays whose chunk names parse back to their coordinates and
// whose chunk sizes are positive and bounded.
func FuzzParsePrecomputed(f *testing.F) {
	f.Add([]byte(goodInfo))
	f.Add([]byte(withScale0("voxel_offset", `[-9223372036854775808, 0, 0]`)))
	f.Add([]byte(withScale0("size", `[1, 1, 1]`)))
	f.Add([]byte(`{"data_type": "uint8", "num_channels": 1, "scales": [{"key": "a", "size": [1,1,1], "chunk_sizes": [[1,1,1]], "encoding": "raw"}]}`))
	f.Fuzz(func(t *testing.T, info []byte) {
		v, err := ParsePrecomputed("d", info)
		if err != nil {
			var me *MetadataError
			if !errors.As(err, &me) {
				t.Fatalf("error is %T, not *MetadataError: %v", err, err)
			}
			return
		}
		if _, err := ParsePrecomputed("d", v.Rewritten); err != nil {
			t.Fatalf("rewritten info does not parse: %v", err)
		}
		for _, a := range v.Arrays {
			n := a.NumChunks()
			for _, i := range []int64{0, n / 2, n - 1} {
				c := a.Coords(i)
				name := a.ChunkName(c)
				got, ok := a.ParseChunkName(name)
				if !ok || len(got) != len(c) {
					t.Fatalf("%s: chunk %v named %q does not parse back", a.Name, c, name)
				}
				for d := range c {
					if got[d] != c[d] {
						t.Fatalf("%s: %q parses to %v, want %v", a.Name, name, got, c)
					}
				}
				if s := a.ChunkSize(c); s <= 0 || s > maxChunkBytes {
					t.Fatalf("%s: chunk %v has size %d", a.Name, c, s)
				}
			}
		}
	})
}

// FuzzParseChunkName: no name panics, and a name that parses is the
// canonical name of what it parses to.
func FuzzParseChunkName(f *testing.F) {
	v, err := ParsePrecomputed("", []byte(goodInfo))
	if err != nil {
		f.Fatal(err)
	}
	a := v.Arrays[0]
	for _, s := range []string{"-13-19_5-21_-3-1", "51-57_37-50_5-6", "-13--5_5-21_-3-1", "0-0_0-0_0-0", "--_--_--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c, ok := a.ParseChunkName(name)
		if ok && a.ChunkName(c) != name {
			t.Fatalf("%q parsed to %v, whose name is %q", name, c, a.ChunkName(c))
		}
	})
}

// fuzzMetadata checks a metadata parser: any input is refused with a
// *MetadataError, ignored (nil, nil), or yields arrays whose keys parse
// back, whose chunk sizes are bounded, and whose rewritten metadata parses
// to the same geometry.
func fuzzMetadata(t *testing.T, parse func(string, []byte) (*Volume, error), meta []byte) {
	v, err := parse("d", meta)
	if err != nil {
		var me *MetadataError
		if !errors.As(err, &me) {
			t.Fatalf("error is %T, not *MetadataError: %v", err, err)
		}
		return
	}
	if v == nil {
		return
	}
	again, err := parse("d", v.Rewritten)
	if err != nil || again == nil || len(again.Arrays) != len(v.Arrays) {
		t.Fatalf("rewritten metadata does not parse to the same arrays: %v", err)
	}
	for i, a := range v.Arrays {
		if fmt.Sprint(a.Shape, a.Chunk) != fmt.Sprint(again.Arrays[i].Shape, again.Arrays[i].Chunk) {
			t.Fatalf("rewritten metadata changed the geometry")
		}
		n := a.NumChunks()
		for _, j := range []int64{0, n / 2, n - 1} {
			c := a.Coords(j)
			got, ok := a.ParseChunkName(a.ChunkName(c))
			if !ok || fmt.Sprint(got) != fmt.Sprint(c) {
				t.Fatalf("chunk %v named %q parses to %v %v", c, a.ChunkName(c), got, ok)
			}
			if s := a.ChunkSize(c); s <= 0 || s > maxChunkBytes+1<<20 {
				t.Fatalf("chunk %v has size %d", c, s)
			}
			// A chunk of garbage is refused or decodes to its size, never
			// anything else, and never panics.
			if out, err := a.Decode([]byte("\x00\x01garbage"), c); err == nil && int64(len(out)) != a.ChunkSize(c) {
				t.Fatalf("garbage decoded to %d bytes, want %d", len(out), a.ChunkSize(c))
			}
		}
	}
}

func FuzzParseZarr2(f *testing.F) {
	f.Add([]byte(`{"zarr_format": 2, "shape": [10, 7], "chunks": [4, 3], "dtype": "<i2", "order": "F", "compressor": {"id": "zlib", "level": 1}, "fill_value": -3, "filters": null, "dimension_separator": "/"}`))
	f.Add([]byte(`{"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": ">f8", "compressor": null, "fill_value": "NaN", "filters": [{"id": "zstd"}]}`))
	f.Fuzz(func(t *testing.T, meta []byte) { fuzzMetadata(t, ParseZarr2, meta) })
}

func FuzzParseZarr3(f *testing.F) {
	f.Add([]byte(`{"zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "int16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}}, "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0, "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 1], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}], "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}], "index_location": "end"}}]}`))
	f.Add([]byte(`{"zarr_format": 3, "node_type": "array", "shape": [3, 3, 3], "data_type": "float32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [3, 3, 1]}}, "chunk_key_encoding": {"name": "v2"}, "fill_value": "0x7fc00000", "codecs": [{"name": "transpose", "configuration": {"order": "F"}}, {"name": "bytes", "configuration": {"endian": "big"}}]}`))
	f.Fuzz(func(t *testing.T, meta []byte) { fuzzMetadata(t, ParseZarr3, meta) })
}

func FuzzParseN5(f *testing.F) {
	f.Add([]byte(`{"dimensions": [5, 4], "blockSize": [3, 2], "dataType": "uint16", "compression": {"type": "gzip", "level": -1}}`))
	f.Add([]byte(`{"dimensions": [100, 3], "blockSize": [7, 1], "dataType": "float64", "compressionType": "raw"}`))
	f.Fuzz(func(t *testing.T, meta []byte) { fuzzMetadata(t, ParseN5, meta) })
}
