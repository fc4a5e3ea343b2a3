package decode

import (
	"encoding/base64"
	"errors"
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

// FuzzGunzip: corrupt streams are errors wrapping ErrCorrupt, never panics,
// and output never exceeds the limit.
func FuzzGunzip(f *testing.F) {
	z, _ := base64.StdEncoding.DecodeString(helloGzip)
	f.Add(z, 5)
	f.Add(z[:10], 5)
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}, 100)
	f.Fuzz(func(t *testing.T, src []byte, limit int) {
		limit = max(0, min(limit, 1<<20))
		out, err := Gunzip(src, limit, limit)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		if len(out) > limit {
			t.Fatalf("got %d bytes, limit %d", len(out), limit)
		}
	})
}
