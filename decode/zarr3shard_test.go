package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/volfs/volfs/internal/zarr3shard"
)

// v3Writer writes a sharded Zarr v3 array of uint16 by hand
// (zarr3shard.Encode): element g (global coordinates) holds
// zarr3shard.Value(g); innermost chunks are bytes little-endian, gzipped
// when gz; absent(g), for an innermost chunk's first element g, leaves it
// out of its shard's index.
type v3Writer struct {
	shape, shard []int64
	levels       []zarr3shard.Level
	gz           bool
	absent       func(g []int64) bool
	v2keys       bool // chunk key encoding v2 ("0.1.2"), else default ("c/0/1/2")
}

// v3Chunk returns the decoded bytes of the box of shape at origin.
func v3Chunk(origin, shape []int64) []byte {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	out := make([]byte, 2*n)
	g := make([]int64, len(shape))
	for i := range n {
		r := i
		for d := len(shape) - 1; d >= 0; d-- {
			g[d] = origin[d] + r%shape[d]
			r /= shape[d]
		}
		binary.LittleEndian.PutUint16(out[2*i:], zarr3shard.Value(g))
	}
	return out
}

// encode returns the stored bytes of the shard at origin.
func (w *v3Writer) encode(origin []int64) []byte {
	inner := w.levels[len(w.levels)-1].Inner
	return zarr3shard.Encode(w.levels, origin, w.shard, func(o []int64) ([]byte, bool) {
		if w.absent != nil && w.absent(o) {
			return nil, false
		}
		b := v3Chunk(o, inner)
		if w.gz {
			b = zarr3shard.Gzip(b)
		}
		return b, true
	})
}

func jsonInts(v []int64) string { return strings.ReplaceAll(fmt.Sprint(v), " ", ", ") }

// meta returns the array's zarr.json.
func (w *v3Writer) meta() []byte { return w.metaCodecs(zarr3shard.Codecs(w.levels, w.gz)) }

// metaCodecs returns the array's zarr.json with the given codecs.
func (w *v3Writer) metaCodecs(list []any) []byte {
	codecs, err := json.Marshal(list)
	if err != nil {
		panic(err)
	}
	return fmt.Appendf(nil, `{"zarr_format": 3, "node_type": "array", "shape": %s, "data_type": "uint16",
		"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": %s}},
		"chunk_key_encoding": %s,
		"fill_value": 7, "codecs": %s}`, jsonInts(w.shape), jsonInts(w.shard), w.keyEncoding(), codecs)
}

func (w *v3Writer) keyEncoding() string {
	if w.v2keys {
		return `{"name": "v2", "configuration": {"separator": "."}}`
	}
	return `{"name": "default", "configuration": {"separator": "/"}}`
}

// files writes the array under dir: zarr.json and every shard, except
// those for which skip holds (missing shards).
func (w *v3Writer) files(t testing.TB, dir string, skip func(s []int64) bool) map[string][]byte {
	files := map[string][]byte{dir + "/zarr.json": w.meta()}
	nd := len(w.shape)
	grid := make([]int64, nd)
	n := int64(1)
	for d := range nd {
		grid[d] = (w.shape[d] + w.shard[d] - 1) / w.shard[d]
		n *= grid[d]
	}
	for i := range n {
		s := make([]int64, nd)
		o := make([]int64, nd)
		r := i
		for d := nd - 1; d >= 0; d-- {
			s[d] = r % grid[d]
			o[d] = s[d] * w.shard[d]
			r /= grid[d]
		}
		if skip != nil && skip(s) {
			continue
		}
		key := "c/" + strings.Trim(strings.ReplaceAll(fmt.Sprint(s), " ", "/"), "[]")
		if w.v2keys {
			key = strings.Trim(strings.ReplaceAll(fmt.Sprint(s), " ", "."), "[]")
		}
		files[dir+"/"+key] = w.encode(o)
	}
	return files
}

// TestZarr3ShardedInnerChunks writes sharded arrays by hand (index at
// either end, with and without crc32c, nested, gzip inner chunks, absent
// inner chunks, a missing shard) and reads every innermost chunk through
// Load: exact bytes, fill where absent, and only the chunk's bytes plus
// its index moved.
func TestZarr3ShardedInnerChunks(t *testing.T) {
	absent := func(g []int64) bool { return (g[0]+g[1]+g[2])%5 == 3 }
	cases := []struct {
		name string
		w    v3Writer
	}{
		{"end crc", v3Writer{shape: []int64{8, 12, 20}, shard: []int64{4, 6, 8}, levels: []zarr3shard.Level{{Inner: []int64{2, 3, 4}, AtEnd: true, CRC: true}}, absent: absent}},
		{"start", v3Writer{shape: []int64{8, 12, 20}, shard: []int64{4, 6, 8}, levels: []zarr3shard.Level{{Inner: []int64{2, 3, 4}}}, gz: true, absent: absent}},
		{"v2 keys", v3Writer{shape: []int64{8, 12, 20}, shard: []int64{4, 6, 8}, levels: []zarr3shard.Level{{Inner: []int64{2, 3, 4}, AtEnd: true}}, absent: absent, v2keys: true}},
		{"start crc gzip", v3Writer{shape: []int64{8, 12, 16}, shard: []int64{8, 12, 16}, levels: []zarr3shard.Level{{Inner: []int64{1, 3, 16}, CRC: true}}, gz: true}},
		{"nested", v3Writer{shape: []int64{8, 12, 16}, shard: []int64{8, 12, 16}, levels: []zarr3shard.Level{
			{Inner: []int64{4, 6, 8}, AtEnd: true, CRC: true}, {Inner: []int64{2, 3, 4}, CRC: true}}, gz: true, absent: absent}},
		{"large index crc", v3Writer{shape: []int64{16, 64, 160}, shard: []int64{16, 64, 160}, levels: []zarr3shard.Level{{Inner: []int64{1, 1, 1}, AtEnd: true, CRC: true}}, absent: absent}},
		{"large index start", v3Writer{shape: []int64{16, 64, 160}, shard: []int64{16, 64, 160}, levels: []zarr3shard.Level{{Inner: []int64{1, 1, 1}}}}},
		{"nested end end", v3Writer{shape: []int64{9, 12, 16}, shard: []int64{4, 12, 16}, levels: []zarr3shard.Level{
			{Inner: []int64{4, 6, 8}, AtEnd: true}, {Inner: []int64{1, 2, 2}, AtEnd: true}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			missingShard := func(s []int64) bool { return s[0] == 1 && s[1] == 1 && s[2] == 1 }
			files := tc.w.files(t, "a", missingShard)
			vol, err := ParseZarr3("a", files["a/zarr.json"])
			if err != nil {
				t.Fatal(err)
			}
			a := vol.Arrays[0]
			innermost := tc.w.levels[len(tc.w.levels)-1].Inner
			if fmt.Sprint(a.Chunk) != fmt.Sprint(innermost) {
				t.Fatalf("chunk shape %v, want the innermost %v", a.Chunk, innermost)
			}
			if want := map[bool]string{false: "c/1/2/3", true: "1.2.3"}[tc.w.v2keys]; a.ChunkName([]int64{1, 2, 3}) != want {
				t.Errorf("inner chunk (1, 2, 3) is named %q, want %q", a.ChunkName([]int64{1, 2, 3}), want)
			}
			if !strings.Contains(string(vol.Rewritten), `"chunk_shape": [`) || strings.Contains(string(vol.Rewritten), "sharding") {
				t.Errorf("rewritten zarr.json still shards or has no grid:\n%s", vol.Rewritten)
			}
			src := newMemSource(files)
			read := 0
			for i := range a.NumChunks() {
				c := a.Coords(i)
				origin := make([]int64, len(c))
				shard := make([]int64, len(c))
				for d := range c {
					origin[d] = c[d] * a.Chunk[d]
					shard[d] = origin[d] / tc.w.shard[d]
				}
				before, _, _ := src.stats()
				got, err := a.Load(context.Background(), src, c)
				after, _, _ := src.stats()
				switch {
				case missingShard(shard):
					if !errors.Is(err, errNoObject) {
						t.Errorf("chunk %v in the missing shard: %v, want the source's not-found", c, err)
					}
				case tc.w.absent != nil && tc.w.absent(origin):
					if !errors.Is(err, ErrMissing) {
						t.Errorf("absent chunk %v: %v, want ErrMissing", c, err)
					}
				case err != nil:
					t.Errorf("chunk %v: %v", c, err)
				case !bytes.Equal(got, v3Chunk(origin, a.Chunk)):
					t.Errorf("chunk %v: wrong bytes", c)
				default:
					read++
				}
				// Bytes moved: the chunk, plus at most each level's index
				// the first time.
				index, outer := int64(0), tc.w.shard
				for _, lv := range tc.w.levels {
					n := int64(16)
					for d := range outer {
						n *= outer[d] / lv.Inner[d]
					}
					index += n + 4 + 16*v3IndexBlock // a large index: checked whole once, then a block
					outer = lv.Inner
				}
				if moved := after - before; moved > 2*a.ChunkSize(c)+256+index {
					t.Errorf("chunk %v moved %d bytes", c, moved)
				}
			}
			if read == 0 {
				t.Errorf("no chunk of %d read", a.NumChunks())
			}
			t.Logf("%d of %d chunks read exactly; %d memoised loads", read, a.NumChunks(), len(src.loads))
		})
	}
}

// TestZarr3ShardHostile feeds shards whose index lies and metadata that
// promises an unreasonable index: each is an error of the right kind,
// never bytes.
func TestZarr3ShardHostile(t *testing.T) {
	w := v3Writer{shape: []int64{4, 4}, shard: []int64{4, 4}, levels: []zarr3shard.Level{{Inner: []int64{2, 2}, AtEnd: true, CRC: true}}}
	good := w.files(t, "a", nil)
	vol, err := ParseZarr3("a", good["a/zarr.json"])
	if err != nil {
		t.Fatal(err)
	}
	a := vol.Arrays[0]
	shard := good["a/c/0/0"]
	entry := func(i int, off, n uint64, fixCRC bool) []byte {
		b := bytes.Clone(shard)
		idx := b[len(b)-4-64:]
		binary.LittleEndian.PutUint64(idx[16*i:], off)
		binary.LittleEndian.PutUint64(idx[16*i+8:], n)
		if fixCRC {
			binary.LittleEndian.PutUint32(idx[64:], crc32.Checksum(idx[:64], crc32.MakeTable(crc32.Castagnoli)))
		}
		return b
	}
	cases := []struct {
		name  string
		shard []byte
		want  error
	}{
		{"bad crc", entry(0, 0, 8, false), ErrCorrupt},
		{"past the end", entry(0, uint64(len(shard)), 8, true), ErrCorrupt},
		{"huge size", entry(0, 0, 1<<62, true), ErrCorrupt},
		{"wrapping", entry(0, math.MaxUint64-3, 8, true), ErrCorrupt},
		{"wrong size", entry(0, 0, 6, true), ErrCorrupt},
		{"truncated", shard[:40], ErrCorrupt},
		{"empty", nil, ErrCorrupt},
		{"half absent", entry(0, math.MaxUint64, 8, true), ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := newMemSource(map[string][]byte{"a/c/0/0": tc.shard})
			b, err := a.Load(context.Background(), src, []int64{0, 0})
			if !errors.Is(err, tc.want) {
				t.Errorf("got %d bytes, %v; want %v", len(b), err, tc.want)
			}
		})
	}

	// Metadata whose shards index more than maxV3IndexBytes (2^24 inner
	// chunks of one element) is refused before any read.
	huge := v3Writer{shape: []int64{1 << 12, 1 << 12}, shard: []int64{1 << 12, 1 << 12}, levels: []zarr3shard.Level{{Inner: []int64{1, 1}, CRC: true}}}
	if _, err := ParseZarr3("h", huge.meta()); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "shard index") {
		t.Errorf("2^24 inner chunks a shard: %v, want a refusal of the index size", err)
	}
	// A shard compressed whole cannot be read by range.
	whole := w.metaCodecs(append(zarr3shard.Codecs(w.levels, w.gz), map[string]any{"name": "gzip", "configuration": map[string]any{"level": 1}}))
	if _, err := ParseZarr3("g", whole); !errors.Is(err, ErrUnsupported) {
		t.Errorf("gzip after sharding_indexed: %v, want ErrUnsupported", err)
	}
}

// TestZarr3ConsolidatedGroup: a group's inline consolidated metadata is
// rewritten entry by entry as ParseZarr3 rewrites each array; groups,
// undecodable arrays and everything else stay as stored; a group without
// it is no volume.
func TestZarr3ConsolidatedGroup(t *testing.T) {
	w := v3Writer{shape: []int64{8, 8, 8}, shard: []int64{8, 8, 8}, levels: []zarr3shard.Level{{Inner: []int64{4, 4, 4}, AtEnd: true, CRC: true}}, gz: true}
	odd := `{"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "complex64", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}}, "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}]}`
	meta := `{"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}, "consolidated_metadata": {"kind": "inline", "must_understand": false,
		"metadata": {"s": ` + string(w.meta()) + `, "g": {"zarr_format": 3, "node_type": "group", "attributes": {}}, "g/odd": ` + odd + `}}}`
	vol, err := ParseZarr3("root", []byte(meta))
	if err != nil || vol == nil {
		t.Fatalf("got %v, %v; want a volume", vol, err)
	}
	if len(vol.Arrays) != 0 || vol.MetaName != "zarr.json" || string(vol.Original) != meta {
		t.Errorf("volume %+v: want no arrays, zarr.json, the original kept", vol)
	}
	var got struct {
		Attributes           map[string]int
		ConsolidatedMetadata struct {
			Kind     string
			Metadata map[string]struct {
				NodeType  string `json:"node_type"`
				DataType  string `json:"data_type"`
				ChunkGrid struct {
					Configuration struct {
						ChunkShape []int64 `json:"chunk_shape"`
					}
				} `json:"chunk_grid"`
				Codecs []struct{ Name string }
			}
		} `json:"consolidated_metadata"`
	}
	if err := json.Unmarshal(vol.Rewritten, &got); err != nil {
		t.Fatal(err)
	}
	m := got.ConsolidatedMetadata.Metadata
	if got.Attributes["a"] != 1 || got.ConsolidatedMetadata.Kind != "inline" || len(m) != 3 {
		t.Errorf("rewritten group lost members: %s", vol.Rewritten)
	}
	if s := m["s"]; fmt.Sprint(s.ChunkGrid.Configuration.ChunkShape) != "[4 4 4]" || len(s.Codecs) != 1 || s.Codecs[0].Name != "bytes" {
		t.Errorf("sharded entry: chunk shape %v, codecs %v; want the inner [4 4 4] and bytes", s.ChunkGrid.Configuration.ChunkShape, s.Codecs)
	}
	if o := m["g/odd"]; len(o.Codecs) != 2 || o.DataType != "complex64" {
		t.Errorf("undecodable entry rewritten: %+v, want it as stored", o)
	}
	if m["g"].NodeType != "group" {
		t.Errorf("group entry: %+v", m["g"])
	}
	if vol, err := ParseZarr3("", []byte(`{"zarr_format": 3, "node_type": "group"}`)); vol != nil || err != nil {
		t.Errorf("plain group: %v, %v; want nil, nil", vol, err)
	}
	if _, err := ParseZarr3("", []byte(`{"zarr_format": 3, "node_type": "group", "consolidated_metadata": {"metadata": 3}}`)); err == nil {
		t.Error("consolidated metadata that is not an object of entries: no error")
	}
}

// TestSameChunks: two metadata files of one directory describe the same
// chunks only with the same keys, grid, element type, byte order, order
// and fill.
func TestSameChunks(t *testing.T) {
	v2 := func(dtype, extra string) string {
		return `{"zarr_format": 2, "shape": [8, 8], "chunks": [4, 4], "dtype": "` + dtype + `", "order": "C", "compressor": {"id": "gzip", "level": 1}, "filters": null, "fill_value": 0, "dimension_separator": "."` + extra + `}`
	}
	v3 := func(keys, endian, fill string) string {
		return `{"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "uint16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}}, "chunk_key_encoding": ` + keys + `, "fill_value": ` + fill + `, "codecs": [{"name": "bytes", "configuration": {"endian": "` + endian + `"}}, {"name": "gzip", "configuration": {"level": 1}}]}`
	}
	v2keys, defkeys := `{"name": "v2", "configuration": {"separator": "."}}`, `{"name": "default"}`
	cases := []struct {
		name         string
		zarray, zarr string
		want         bool
	}{
		{"same", v2("<u2", ""), v3(v2keys, "little", "0"), true},
		{"big-endian stored, same decoded", v2("<u2", ""), v3(v2keys, "big", "0"), true},
		{"keys", v2("<u2", ""), v3(defkeys, "little", "0"), false},
		{"byte order decoded", v2(">u2", ""), v3(v2keys, "big", "0"), false},
		{"fill", v2("<u2", ""), v3(v2keys, "little", "5"), false},
		{"type", v2("<i2", ""), v3(v2keys, "little", "0"), false},
		{"order", strings.Replace(v2("<u2", ""), `"order": "C"`, `"order": "F"`, 1), v3(v2keys, "little", "0"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseZarr2("d", []byte(tc.zarray))
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseZarr3("d", []byte(tc.zarr))
			if err != nil {
				t.Fatal(err)
			}
			if got := SameChunks(a.Arrays[0], b.Arrays[0]); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestZarr3DimensionNamesOneLine: `volfs info` prints Describe as a table,
// so an indented zarr.json (zarrita writes one) must still describe its
// dimension names on one line.
func TestZarr3DimensionNamesOneLine(t *testing.T) {
	meta := []byte(`{
  "zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint8",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
  "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
  "codecs": [{"name": "bytes"}],
  "dimension_names": [
    "y",
    "x"
  ]
}`)
	vol, err := ParseZarr3("a", meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range vol.Arrays[0].Describe {
		if kv[0] == "dimensions" {
			if kv[1] != `["y","x"]` {
				t.Fatalf("dimensions = %q, want one line", kv[1])
			}
			return
		}
	}
	t.Fatal("no dimensions in Describe")
}
