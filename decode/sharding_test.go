package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// errNoObject is what memSource returns for a key it does not hold.
var errNoObject = errors.New("test: no such object")

// memSource is a Source over a map of objects that counts what is read:
// bytes returned, Get and GetRange calls, and loads run by Memo per key.
// Memo memoises for good (no eviction) and dedupes nothing concurrent,
// which the tests do not need.
type memSource struct {
	files map[string][]byte

	mu     sync.Mutex
	bytes  int64             // GUARDED_BY(mu)
	ranges int               // GUARDED_BY(mu)
	gets   int               // GUARDED_BY(mu)
	memo   map[string][]byte // GUARDED_BY(mu)
	loads  map[string]int    // GUARDED_BY(mu)
}

func newMemSource(files map[string][]byte) *memSource {
	return &memSource{files: files, memo: map[string][]byte{}, loads: map[string]int{}}
}

func (m *memSource) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	b, ok := m.files[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, errNoObject)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", key, len(b), limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	m.bytes += int64(len(b))
	return slices.Clone(b), nil
}

func (m *memSource) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, ok := m.files[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, errNoObject)
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("%s: range %d+%d", key, offset, length)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	b = b[offset:min(int64(len(b)), offset+length)]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ranges++
	m.bytes += int64(len(b))
	return slices.Clone(b), nil
}

func (m *memSource) Release([]byte) {}

func (m *memSource) Stat(ctx context.Context, key string) (int64, error) {
	b, ok := m.files[key]
	if !ok {
		return 0, fmt.Errorf("%s: %w", key, errNoObject)
	}
	return int64(len(b)), nil
}

func (m *memSource) Memo(ctx context.Context, key string, load func(context.Context) ([]byte, error)) ([]byte, error) {
	m.mu.Lock()
	v, ok := m.memo[key]
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := load(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads[key]++
	if err != nil {
		return nil, err
	}
	m.memo[key] = v
	return v, nil
}

func (m *memSource) stats() (bytes int64, gets, ranges int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes, m.gets, m.ranges
}

func mustSharding(t testing.TB, spec string) *shardingSpec {
	t.Helper()
	s, field, err := parseSharding(json.RawMessage(spec))
	if err != nil {
		t.Fatalf("parseSharding(%s): %s: %v", spec, field, err)
	}
	return s
}

func TestParseSharding(t *testing.T) {
	spec := func(kv ...string) string {
		m := map[string]any{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity",
			"preshift_bits": 1, "minishard_bits": 7, "shard_bits": 3}
		for i := 0; i < len(kv); i += 2 {
			var v any
			if err := json.Unmarshal([]byte(kv[i+1]), &v); err != nil {
				v = kv[i+1] // a bare word: delete marker below
			}
			if kv[i+1] == "-" {
				delete(m, kv[i])
				continue
			}
			m[kv[i]] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	good := []struct {
		spec string
		want shardingSpec
	}{
		{spec(), shardingSpec{preshiftBits: 1, minishardBits: 7, shardBits: 3}},
		{spec("hash", `"murmurhash3_x86_128"`, "data_encoding", `"gzip"`),
			shardingSpec{preshiftBits: 1, minishardBits: 7, shardBits: 3, murmur: true, gzipData: true}},
		{spec("minishard_index_encoding", `"gzip"`, "data_encoding", `"raw"`),
			shardingSpec{preshiftBits: 1, minishardBits: 7, shardBits: 3, gzipIndex: true}},
		// The ranges tensorstore's ShardingSpecTest.Parse accepts.
		{spec("preshift_bits", "0"), shardingSpec{preshiftBits: 0, minishardBits: 7, shardBits: 3}},
		{spec("preshift_bits", "64"), shardingSpec{preshiftBits: 64, minishardBits: 7, shardBits: 3}},
		{spec("minishard_bits", "60", "shard_bits", "0"), shardingSpec{preshiftBits: 1, minishardBits: 60}},
		{spec("minishard_bits", "0", "shard_bits", "0"), shardingSpec{preshiftBits: 1}},
		{spec("shard_bits", "57"), shardingSpec{preshiftBits: 1, minishardBits: 7, shardBits: 57}},
	}
	for _, tt := range good {
		got, field, err := parseSharding(json.RawMessage(tt.spec))
		if err != nil {
			t.Errorf("parseSharding(%s): %s: %v", tt.spec, field, err)
			continue
		}
		if *got != tt.want {
			t.Errorf("parseSharding(%s) = %+v, want %+v", tt.spec, *got, tt.want)
		}
	}
	bad := []struct {
		spec, field string
		unsupported bool
	}{
		{spec("@type", `"neuroglancer_uint64_sharded_v2"`), "sharding.@type", true},
		{spec("hash", `"murmurhash3_x64_128"`), "sharding.hash", true},
		{spec("data_encoding", `"zstd"`), "sharding.data_encoding", true},
		{spec("minishard_index_encoding", `"jpeg"`), "sharding.minishard_index_encoding", true},
		{spec("@type", "-"), "sharding.@type", false},
		{spec("hash", "-"), "sharding.hash", false},
		{spec("hash", "null"), "sharding.hash", false},
		{spec("preshift_bits", "-"), "sharding.preshift_bits", false},
		{spec("minishard_bits", "-"), "sharding.minishard_bits", false},
		{spec("shard_bits", "-"), "sharding.shard_bits", false},
		{spec("data_encoding", "1234"), "sharding.data_encoding", false},
		{spec("preshift_bits", "-1"), "sharding.preshift_bits", false},
		{spec("preshift_bits", "65"), "sharding.preshift_bits", false},
		{spec("preshift_bits", "1.5"), "sharding.preshift_bits", false},
		{spec("minishard_bits", "61", "shard_bits", "0"), "sharding.minishard_bits", false},
		{spec("shard_bits", "58"), "sharding.shard_bits", false},
		{spec("shard_bits", "65"), "sharding.shard_bits", false},
		{`"invalid"`, "sharding", false},
		{`null`, "sharding", false},
	}
	for _, tt := range bad {
		_, field, err := parseSharding(json.RawMessage(tt.spec))
		if err == nil || field != tt.field || errors.Is(err, ErrUnsupported) != tt.unsupported {
			t.Errorf("parseSharding(%s) = field %q, error %v; want field %q, unsupported %v", tt.spec, field, err, tt.field, tt.unsupported)
		}
	}
}

// TestCompressedMortonCodeDiagram checks the example of neuroglancer's
// precomputed volume.md ("Compressed morton code"): an x axis of 16 bits
// (up to 42943), y of 14 and z of 24, whose bits land where the diagram
// below, copied from the spec, draws them. Reading each line from the
// right, the n-th hex digit is bit n of that axis (digits restart at 0
// after f).
func TestCompressedMortonCodeDiagram(t *testing.T) {
	diagram := map[int]string{
		0: "---- ---- ---- ---- ---f -e-- d--c --b- -a-- 9--8 --7- -6-- 5--4 --3- -2-- 1--0",
		1: "---- ---- ---- ---- ---- ---d --c- -b-- a--9 --8- -7-- 6--5 --4- -3-- 2--1 --0-",
		2: "---- ---- --76 5432 10f- e-d- -c-- b--a --9- -8-- 7--6 --5- -4-- 3--2 --1- -0--",
	}
	grid := []int64{42943, 1 << 14, 1 << 24}
	if got := compressedMortonBits(grid); got != 16+14+24 {
		t.Errorf("compressedMortonBits(%v) = %d, want %d", grid, got, 16+14+24)
	}
	for axis, line := range diagram {
		line = strings.ReplaceAll(line, " ", "")
		bit := 0
		for pos := range 64 {
			ch := line[63-pos]
			if ch == '-' {
				continue
			}
			if want := fmt.Sprintf("%x", bit%16); string(ch) != want {
				t.Fatalf("diagram line %d: digit %c at output bit %d, want %s", axis, ch, pos, want)
			}
			c := []int64{0, 0, 0}
			c[axis] = 1 << bit
			if got := compressedMortonCode(c, grid); got != 1<<pos {
				t.Errorf("compressedMortonCode(%v, %v) = %#x, want bit %d (%#x)", c, grid, got, pos, uint64(1)<<pos)
			}
			bit++
		}
	}
	all := []int64{42943 - 1, 1<<14 - 1, 1<<24 - 1}
	if got := compressedMortonCode(all, grid); got >= 1<<54 || got < 1<<53 {
		t.Errorf("compressedMortonCode(%v, %v) = %#x, want 54 bits", all, grid, got)
	}
}

func TestCompressedMortonCodeSmall(t *testing.T) {
	tests := []struct {
		c, grid []int64
		want    uint64
	}{
		{[]int64{0, 0, 0}, []int64{1, 1, 1}, 0},
		{[]int64{1, 0, 0}, []int64{2, 1, 1}, 1},
		{[]int64{0, 1, 0}, []int64{1, 2, 1}, 1},
		// x, y and z alternate while all have bits: a plain Morton code.
		{[]int64{1, 1, 1}, []int64{2, 2, 2}, 0b111},
		{[]int64{2, 0, 0}, []int64{4, 4, 4}, 0b1000},
		{[]int64{0, 0, 2}, []int64{4, 4, 4}, 0b100000},
		// y has 1 bit, x 3: after bit 0 of y, x's bits follow back to back.
		{[]int64{4, 0, 0}, []int64{8, 2, 1}, 0b1000},
		{[]int64{7, 1, 0}, []int64{8, 2, 1}, 0b1111},
		{[]int64{2, 1, 0}, []int64{5, 2, 1}, 0b0110},
		// A grid of 3 needs 2 bits, 4 needs 2, 5 needs 3.
		{[]int64{2, 2, 4}, []int64{3, 4, 5}, 0b1_011_000}, // x1 -> bit 3, y1 -> 4, z2 -> 6
	}
	for _, tt := range tests {
		if got := compressedMortonCode(tt.c, tt.grid); got != tt.want {
			t.Errorf("compressedMortonCode(%v, %v) = %#b, want %#b", tt.c, tt.grid, got, tt.want)
		}
	}
}

func TestShardFile(t *testing.T) {
	tests := []struct {
		spec      string
		id        uint64
		name      string
		minishard uint64
	}{
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":1,"shard_bits":0}`, 3, "0.shard", 1},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":2,"shard_bits":3}`, 0b101_10, "5.shard", 2},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":2,"shard_bits":5}`, 0b11011_01, "1b.shard", 1},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":0,"shard_bits":9}`, 0x1ff, "1ff.shard", 0},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":0,"shard_bits":9}`, 0x1, "001.shard", 0},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":3,"minishard_bits":2,"shard_bits":4}`, 0b1001_11_101, "9.shard", 3},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":64,"minishard_bits":2,"shard_bits":4}`, ^uint64(0), "0.shard", 0},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"identity","preshift_bits":0,"minishard_bits":0,"shard_bits":64}`, ^uint64(0), "ffffffffffffffff.shard", 0},
		// murmurhash3_x86_128 of 42 with seed 0 is 0xc20b94f95119f47a
		// (tensorstore's vector): minishard 0x7a & 0x3f, shard the next 8 bits.
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"murmurhash3_x86_128","preshift_bits":0,"minishard_bits":6,"shard_bits":8}`, 42, "d1.shard", 0x3a},
		{`{"@type":"neuroglancer_uint64_sharded_v1","hash":"murmurhash3_x86_128","preshift_bits":2,"minishard_bits":6,"shard_bits":8}`, 42<<2 | 3, "d1.shard", 0x3a},
	}
	for _, tt := range tests {
		s := mustSharding(t, tt.spec)
		name, ms := s.shardFile(tt.id)
		if name != tt.name || ms != tt.minishard {
			t.Errorf("%s: shardFile(%#x) = %q, %d; want %q, %d", tt.spec, tt.id, name, ms, tt.name, tt.minishard)
		}
	}
}

// TestParseMinishardIndexGolden decodes tensorstore's
// EncodeMinishardIndexTest outputs (uint64_sharded_encoder_test.cc).
func TestParseMinishardIndexGolden(t *testing.T) {
	tests := []struct {
		name   string
		stored []byte
		want   []byte // id, offset, size triples
	}{
		{"Empty", nil, nil},
		{"SingleEntry", []byte{
			0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
			0x11, 0, 0, 0, 0, 0, 0, 0,
			0x12, 0, 0, 0, 0, 0, 0, 0,
		}, u64(0x0123456789abcdef, 0x11, 0x23-0x11)},
		{"MultipleEntries", u64(1, 6, 3, 2, 7, 3), u64(1, 3, 7, 7, 12, 3)},
	}
	for _, tt := range tests {
		got, err := parseMinishardIndex(tt.stored)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

// tensorstoreRawShard is the shard of tensorstore's ShardEncoderTest.Raw
// (uint64_sharded_encoder_test.cc): identity hash, minishard_bits 1,
// shard_bits 0; chunks 2 and 8 in minishard 0, chunk 3 in minishard 1. The
// file is the encoded shard index followed by the encoded shard data.
var tensorstoreRawShard = slices.Concat(
	[]byte{
		7, 0, 0, 0, 0, 0, 0, 0,
		55, 0, 0, 0, 0, 0, 0, 0,
		57, 0, 0, 0, 0, 0, 0, 0,
		81, 0, 0, 0, 0, 0, 0, 0,
	},
	[]byte{
		1, 2, 3, 4,
		6, 7, 8,
		2, 0, 0, 0, 0, 0, 0, 0,
		6, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		4, 0, 0, 0, 0, 0, 0, 0,
		3, 0, 0, 0, 0, 0, 0, 0,
		9, 10,
		3, 0, 0, 0, 0, 0, 0, 0,
		55, 0, 0, 0, 0, 0, 0, 0,
		2, 0, 0, 0, 0, 0, 0, 0,
	})

const tensorstoreShardSpec = `{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0,
	"minishard_bits": 1, "shard_bits": 0, "data_encoding": %q, "minishard_index_encoding": %q}`

func TestReadChunkTensorstoreRaw(t *testing.T) {
	s := mustSharding(t, fmt.Sprintf(tensorstoreShardSpec, "raw", "raw"))
	src := newMemSource(map[string][]byte{"seg/0.shard": tensorstoreRawShard})
	ctx := context.Background()
	for id, want := range map[uint64][]byte{2: {1, 2, 3, 4}, 8: {6, 7, 8}, 3: {9, 10}} {
		got, err := s.readChunk(ctx, src, "seg", id, 100)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("readChunk(%d) = %v, %v; want %v", id, got, err, want)
		}
	}
	for _, id := range []uint64{0, 4, 5, 7, 1 << 40} {
		if got, err := s.readChunk(ctx, src, "seg", id, 100); !errors.Is(err, ErrMissing) {
			t.Errorf("readChunk(%d) = %v, %v; want an error wrapping ErrMissing", id, got, err)
		}
	}
	if _, err := s.readChunk(ctx, src, "other", 2, 100); !errors.Is(err, errNoObject) {
		t.Errorf("readChunk from a missing shard: %v, want the source's error wrapped", err)
	}
	if _, err := s.readChunk(ctx, src, "seg", 2, 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("readChunk of 4 bytes with limit 3: %v, want an error wrapping ErrCorrupt", err)
	}
}

// gzipBytes compresses b at level 9, as tensorstore's encoder does.
// u64 is v in little-endian uint64s, as shard files store their numbers.
func u64(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, 9)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReadChunkTensorstoreGzip builds the shard of tensorstore's
// ShardEncoderTest.Gzip the way that test builds its expected bytes: chunk
// 3 stored uncompressed although data_encoding is gzip (tensorstore's
// WriteIndexedEntry with compress=false) is not readable as gzip, so only
// chunks 2 and 8 are checked; chunk 3 is refused as corrupt.
func TestReadChunkTensorstoreGzip(t *testing.T) {
	var data []byte
	c2 := gzipBytes(t, []byte{1, 2, 3, 4})
	c8 := gzipBytes(t, []byte{6, 7, 8})
	data = append(data, c2...)
	data = append(data, c8...)
	i0 := uint64(len(data))
	data = append(data, gzipBytes(t, u64(2, 6, 0, 0, uint64(len(c2)), uint64(len(c8))))...)
	e0 := uint64(len(data))
	data = append(data, 9, 10)
	i1 := uint64(len(data))
	data = append(data, gzipBytes(t, u64(3, e0, 2))...)
	e1 := uint64(len(data))
	shard := slices.Concat(u64(i0, e0, i1, e1), data)

	s := mustSharding(t, fmt.Sprintf(tensorstoreShardSpec, "gzip", "gzip"))
	src := newMemSource(map[string][]byte{"0.shard": shard})
	ctx := context.Background()
	for id, want := range map[uint64][]byte{2: {1, 2, 3, 4}, 8: {6, 7, 8}} {
		got, err := s.readChunk(ctx, src, "", id, 100)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("readChunk(%d) = %v, %v; want %v", id, got, err, want)
		}
	}
	if _, err := s.readChunk(ctx, src, "", 3, 100); !errors.Is(err, ErrCorrupt) {
		t.Errorf("readChunk(3), stored raw in a gzip shard: %v, want an error wrapping ErrCorrupt", err)
	}
	if _, err := s.readChunk(ctx, src, "", 2, 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("readChunk(2) with limit 3: %v, want an error wrapping ErrCorrupt", err)
	}
}

// TestReadChunkCorruptShard damages the tensorstore shard in each of the
// ways a reader must catch; none may panic or return bytes.
func TestReadChunkCorruptShard(t *testing.T) {
	put := func(b []byte, at int, v uint64) []byte {
		b = slices.Clone(b)
		binary.LittleEndian.PutUint64(b[at:], v)
		return b
	}
	tests := []struct {
		name  string
		shard []byte
		id    uint64
	}{
		{"shard index truncated", tensorstoreRawShard[:20], 2},
		{"minishard index runs backwards", put(tensorstoreRawShard, 0, 56), 2},
		{"minishard index past the end", put(tensorstoreRawShard, 8, 1000), 2},
		{"minishard index range overflows", put(put(tensorstoreRawShard, 0, 1<<63), 8, 1<<63+24), 2},
		{"minishard index huge", put(tensorstoreRawShard, 8, 1<<40), 2},
		{"minishard index not 3 arrays", put(tensorstoreRawShard, 8, 54), 2},
		{"chunk past the end", put(tensorstoreRawShard, 32+7+32, 1000), 2},
		{"chunk offset overflows", put(tensorstoreRawShard, 32+7+16, 1<<63), 2},
		{"chunk size overflows", put(put(tensorstoreRawShard, 32+7+16, 1<<62), 32+7+32, 1<<62), 2},
		{"second chunk offset overflows", put(tensorstoreRawShard, 32+7+24, ^uint64(0)), 8},
		{"truncated in the chunk", tensorstoreRawShard[:32+2], 2},
	}
	s := mustSharding(t, fmt.Sprintf(tensorstoreShardSpec, "raw", "raw"))
	for _, tt := range tests {
		src := newMemSource(map[string][]byte{"0.shard": tt.shard})
		got, err := s.readChunk(context.Background(), src, "", tt.id, 1<<20)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, %v; want an error wrapping ErrCorrupt", tt.name, got, err)
		}
	}
	// A gzip minishard index that is not gzip, or truncated.
	gz := mustSharding(t, fmt.Sprintf(tensorstoreShardSpec, "raw", "gzip"))
	src := newMemSource(map[string][]byte{"0.shard": tensorstoreRawShard})
	if got, err := gz.readChunk(context.Background(), src, "", 2, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Errorf("raw index read as gzip: got %v, %v; want an error wrapping ErrCorrupt", got, err)
	}
}

// FuzzShardIndex reads a chunk out of arbitrary shard bytes under several
// specs, exercising the shard index, the minishard index parser and the
// range checks: no input panics, every error is ErrCorrupt or ErrMissing,
// and no chunk exceeds the limit.
func FuzzShardIndex(f *testing.F) {
	f.Add(tensorstoreRawShard, uint64(2), uint8(1), false, false)
	f.Add(tensorstoreRawShard, uint64(3), uint8(1), false, false)
	f.Add(tensorstoreRawShard, uint64(8), uint8(1), false, true)
	f.Add([]byte{}, uint64(0), uint8(0), true, true)
	f.Fuzz(func(t *testing.T, shard []byte, id uint64, minishardBits uint8, gzipIndex, gzipData bool) {
		parsed, err := parseMinishardIndex(shard)
		if err == nil && len(parsed) != len(shard) {
			t.Fatalf("parsed minishard index has %d bytes, want %d", len(parsed), len(shard))
		}
		enc := map[bool]string{false: "raw", true: "gzip"}
		s := mustSharding(t, fmt.Sprintf(`{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0,
			"minishard_bits": %d, "shard_bits": 0, "data_encoding": %q, "minishard_index_encoding": %q}`,
			minishardBits%4, enc[gzipData], enc[gzipIndex]))
		src := newMemSource(map[string][]byte{"0.shard": shard})
		const limit = 1 << 10
		got, err := s.readChunk(context.Background(), src, "", id, limit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMissing) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrMissing: %v", err)
			}
			return
		}
		if len(got) > limit {
			t.Fatalf("chunk of %d bytes, limit %d", len(got), limit)
		}
	})
}
