package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"path"
	"strconv"

	"github.com/volfs/volfs/decode/codec"
)

// Sharded precomputed scales (neuroglancer_uint64_sharded_v1, neuroglancer's
// datasource/precomputed/sharded.md) pack many chunks into few shard
// files. A chunk's uint64 id (the compressed Morton code of its grid
// position) is shifted right by preshift_bits and hashed; the hash's low
// minishard_bits pick a minishard and the next shard_bits pick the shard
// file. A shard file starts with its shard index: for each minishard, the
// [start, end) byte range of its minishard index, relative to the end of
// the shard index. A minishard index lists, for each chunk of the
// minishard, its id, offset and size; the chunk's bytes are at that range.
//
// A chunk read therefore costs three ranged reads — the shard index entry,
// the minishard index, the chunk — and the first two are shared by every
// chunk of the minishard through Source.Memo.

// shardingSpec is a validated "sharding" member of a precomputed scale.
type shardingSpec struct {
	preshiftBits  uint // 0..64
	minishardBits uint // 0..60
	shardBits     uint // 0..64-minishardBits
	murmur        bool // hash is murmurhash3_x86_128, else identity
	// Whether minishard indexes and chunk data are gzip-compressed.
	gzipIndex, gzipData bool
}

// maxMinishardIndexBytes bounds a minishard index, stored or decompressed:
// 24 bytes a chunk, so 2.8 million chunks in one minishard. Writers aim at
// minishards of a few thousand chunks; a larger size in a shard index is
// refused as corrupt rather than fetched.
const maxMinishardIndexBytes = 64 << 20

// wholeShardIndexBits is the largest minishard_bits for which the whole
// shard index (16 << minishardBits bytes, 64 KiB here) is fetched and
// memoised at once; above it, each minishard's 16-byte entry is fetched
// and memoised on its own, so a huge index is never read whole.
const wholeShardIndexBits = 12

// maxReadableMinishardBits is the largest minishard_bits whose shard index
// (16 << minishard_bits bytes) ends before 1<<62, the bound every offset
// computed here stays under so that no sum overflows. tensorstore allows
// up to 60, but no file is 2^62 bytes long.
const maxReadableMinishardBits = 58

// parseSharding validates the "sharding" member of a precomputed scale, as
// tensorstore does: @type, hash, preshift_bits, minishard_bits and
// shard_bits are required; minishard_index_encoding and data_encoding
// default to "raw". A value volfs does not know (another @type, hash or
// encoding) is an error wrapping ErrUnsupported that names it; a missing
// member, a wrong JSON type or a bit width out of range is a plain error.
// Either way the second result names the offending member, e.g.
// "sharding.hash".
func parseSharding(raw json.RawMessage) (*shardingSpec, string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, "sharding", fmt.Errorf("want an object, got %.100s", raw)
	}
	str := func(name, def string) (string, error) {
		v, ok := obj[name]
		if !ok && def != "" {
			return def, nil
		}
		var s string
		if !ok {
			return "", errors.New("missing")
		}
		if err := json.Unmarshal(v, &s); err != nil || string(v) == "null" {
			return "", fmt.Errorf("want a string, got %.100s", v)
		}
		return s, nil
	}
	num := func(name string, max uint) (uint, error) {
		v, ok := obj[name]
		if !ok {
			return 0, errors.New("missing")
		}
		n, err := strconv.ParseUint(string(v), 10, 8)
		if err != nil || n > uint64(max) {
			return 0, fmt.Errorf("want an integer from 0 to %d, got %.100s", max, v)
		}
		return uint(n), nil
	}
	s := &shardingSpec{}
	typ, err := str("@type", "")
	if err != nil {
		return nil, "sharding.@type", err
	}
	if typ != "neuroglancer_uint64_sharded_v1" {
		return nil, "sharding.@type", fmt.Errorf("%q: %w", typ, ErrUnsupported)
	}
	hash, err := str("hash", "")
	if err != nil {
		return nil, "sharding.hash", err
	}
	switch hash {
	case "identity":
	case "murmurhash3_x86_128":
		s.murmur = true
	default:
		return nil, "sharding.hash", fmt.Errorf("%q: %w", hash, ErrUnsupported)
	}
	if s.preshiftBits, err = num("preshift_bits", 64); err != nil {
		return nil, "sharding.preshift_bits", err
	}
	if s.minishardBits, err = num("minishard_bits", 60); err != nil {
		return nil, "sharding.minishard_bits", err
	}
	if s.shardBits, err = num("shard_bits", 64-s.minishardBits); err != nil {
		return nil, "sharding.shard_bits", err
	}
	for _, e := range []struct {
		name string
		dst  *bool
	}{{"minishard_index_encoding", &s.gzipIndex}, {"data_encoding", &s.gzipData}} {
		enc, err := str(e.name, "raw")
		if err != nil {
			return nil, "sharding." + e.name, err
		}
		switch enc {
		case "raw":
		case "gzip":
			*e.dst = true
		default:
			return nil, "sharding." + e.name, fmt.Errorf("%q: %w", enc, ErrUnsupported)
		}
	}
	return s, "", nil
}

// compressedMortonCode returns the chunk id of grid position c in a grid
// of grid chunks per axis: the compressed Morton code of neuroglancer's
// precomputed volume.md. Bit i of each axis, taken x, y, z for i = 0, 1,
// ..., goes to the next output bit only while 2^i < grid[axis], so an axis
// stops taking bits once its coordinates have none left. The code fits 64
// bits when compressedMortonBits(grid) <= 64; callers check that when they
// validate the scale. 0 <= c[d] < grid[d].
func compressedMortonCode(c, grid []int64) uint64 {
	var id uint64
	j := uint(0)
	for i := uint(0); i < 63; i++ {
		more := false
		for d := range c {
			if grid[d] > 1<<i {
				id |= uint64(c[d]>>i&1) << j
				j++
				more = true
			}
		}
		if !more {
			break
		}
	}
	return id
}

// compressedMortonBits returns the number of bits the compressed Morton
// codes of a grid need: the sum over axes of ceil(log2(grid[d])). A
// sharded scale whose grid needs more than 64 is refused.
func compressedMortonBits(grid []int64) int {
	n := 0
	for _, g := range grid {
		if g > 1 {
			n += bits.Len64(uint64(g - 1))
		}
	}
	return n
}

// lowBits returns a value with the low n bits set, n <= 64.
func lowBits(n uint) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

// locate returns the shard number and minishard number of chunkID.
func (s *shardingSpec) locate(chunkID uint64) (shard, minishard uint64) {
	h := chunkID >> s.preshiftBits // 0 when preshift_bits is 64
	if s.murmur {
		h, _ = codec.Murmur3X86_128(binary.LittleEndian.AppendUint64(make([]byte, 0, 8), h), 0)
	}
	return h >> s.minishardBits & lowBits(s.shardBits), h & lowBits(s.minishardBits)
}

// shardFile returns the name of the shard file that holds chunkID (its
// shard number in lowercase hex, zero-padded to ceil(shard_bits/4) digits,
// then ".shard") and the chunk's minishard number within that file.
func (s *shardingSpec) shardFile(chunkID uint64) (name string, minishard uint64) {
	shard, minishard := s.locate(chunkID)
	return fmt.Sprintf("%0*x.shard", int(s.shardBits+3)/4, shard), minishard
}

// shardIndexSize is the size in bytes of a shard's index.
func (s *shardingSpec) shardIndexSize() uint64 { return 16 << s.minishardBits }

// readChunk returns the stored bytes of chunk chunkID of the sharded scale
// in directory dir (with data_encoding gzip undone): what an unsharded
// scale stores in the chunk's own object, ready for the scale's encoding.
// limit bounds the chunk's bytes as stored in the shard and, gzipped, as
// decompressed; a chunk that needs more is an error wrapping ErrCorrupt.
//
// It reads through src with ranged reads only: the shard index (or the
// one entry of it, for more than 2^12 minishards), the chunk's minishard
// index, then the chunk. Both indexes are memoised through src.Memo under
// the shard's key plus "#index" (or "#index/<minishard>") and
// "#minishard/<minishard>", so the chunks of one minishard share one read
// of each.
//
// A chunk that its minishard does not list, in a minishard that is empty,
// is an error wrapping ErrMissing: it reads as fill. A shard file that does
// not exist is src's error, wrapped with %w and otherwise untouched, which
// the caller recognises as it does for an unsharded chunk. An offset or
// size in the shard that overflows, runs backwards, lies past the end of
// the file or past what limit allows is an error wrapping ErrCorrupt; so
// is a minishard index that does not parse. Safe for concurrent use;
// cancelling ctx abandons the reads with ctx's error.
func (s *shardingSpec) readChunk(ctx context.Context, src Source, dir string, chunkID uint64, limit int64) ([]byte, error) {
	return s.read(ctx, src, dir, chunkID, int(min(limit, 1<<40)), limit)
}

// read is readChunk, with want the decoded size data_encoding gzip is
// first decoded into (codec.Gunzip); 0 takes 8 times the stored size plus
// 4 KiB, for an object of unknown size: a buffer that turns out short is
// doubled, so that what a small object costs follows its real size, not
// limit nor its trailer's claim.
func (s *shardingSpec) read(ctx context.Context, src Source, dir string, chunkID uint64, want int, limit int64) ([]byte, error) {
	name, minishard := s.shardFile(chunkID)
	key := path.Join(dir, name)
	if s.minishardBits > maxReadableMinishardBits {
		return nil, fmt.Errorf("%w: %s: a shard index of 16<<%d bytes is larger than any file", ErrCorrupt, key, s.minishardBits)
	}
	start, end, err := s.minishardRange(ctx, src, key, minishard)
	if err != nil {
		return nil, err
	}
	if start == end {
		return nil, fmt.Errorf("%s: chunk %d: minishard %d is empty: %w", key, chunkID, minishard, ErrMissing)
	}
	index, err := src.Memo(ctx, key+"#minishard/"+strconv.FormatUint(minishard, 10), func(ctx context.Context) ([]byte, error) {
		b, err := s.readMinishardIndex(ctx, src, key, start, end)
		if err != nil {
			return nil, fmt.Errorf("%s: minishard %d index: %w", key, minishard, err)
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	off, size, ok := lookupMinishard(index, chunkID)
	if !ok {
		return nil, fmt.Errorf("%s: chunk %d is not in minishard %d: %w", key, chunkID, minishard, ErrMissing)
	}
	base := s.shardIndexSize()
	if size > uint64(max(limit, 0)) || off > 1<<62-base {
		return nil, fmt.Errorf("%w: %s: chunk %d: %d bytes at %d, more than the %d a chunk may take",
			ErrCorrupt, key, chunkID, size, off, limit)
	}
	b, err := readExactly(ctx, src, key, base+off, size, "chunk")
	if err != nil {
		return nil, err
	}
	if s.gzipData {
		if want <= 0 {
			want = min(8*len(b)+4096, int(min(limit, 1<<40)))
		}
		if b, err = codec.Gunzip(b, want, int(limit)); err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", key, chunkID, err)
		}
	}
	return b, nil
}

// minishardRange returns the absolute byte range of minishard's index in
// the shard file key, from the memoised shard index.
func (s *shardingSpec) minishardRange(ctx context.Context, src Source, key string, minishard uint64) (start, end uint64, err error) {
	var entry []byte
	if s.minishardBits <= wholeShardIndexBits {
		n := s.shardIndexSize()
		index, err := src.Memo(ctx, key+"#index", func(ctx context.Context) ([]byte, error) {
			return readExactly(ctx, src, key, 0, n, "shard index")
		})
		if err != nil {
			return 0, 0, err
		}
		if uint64(len(index)) != n {
			return 0, 0, fmt.Errorf("%w: %s: shard index of %d bytes, want %d", ErrCorrupt, key, len(index), n)
		}
		entry = index[16*minishard:]
	} else {
		entry, err = src.Memo(ctx, key+"#index/"+strconv.FormatUint(minishard, 10), func(ctx context.Context) ([]byte, error) {
			return readExactly(ctx, src, key, 16*minishard, 16, "shard index entry")
		})
		if err != nil {
			return 0, 0, err
		}
		if len(entry) != 16 {
			return 0, 0, fmt.Errorf("%w: %s: shard index entry of %d bytes", ErrCorrupt, key, len(entry))
		}
	}
	return s.entryRange(key, minishard, entry)
}

// entryRange returns the absolute byte range of the minishard index that
// entry, minishard's 16-byte entry of the shard index of key, names.
func (s *shardingSpec) entryRange(key string, minishard uint64, entry []byte) (start, end uint64, err error) {
	start, end = binary.LittleEndian.Uint64(entry), binary.LittleEndian.Uint64(entry[8:])
	base := s.shardIndexSize()
	if start > end || end-start > maxMinishardIndexBytes || end > 1<<62-base {
		return 0, 0, fmt.Errorf("%w: %s: minishard %d index at [%d, %d)", ErrCorrupt, key, minishard, start, end)
	}
	return base + start, base + end, nil
}

// readExactly reads length bytes at offset of the object key; an object
// that ends first is corrupt (a truncated shard). Errors from src are
// wrapped with %w, so a missing shard stays recognisable.
func readExactly(ctx context.Context, src Source, key string, offset, length uint64, what string) ([]byte, error) {
	b, err := src.GetRange(ctx, key, int64(offset), int64(length))
	if err != nil {
		return nil, fmt.Errorf("decode: %s: %s: %w", key, what, err)
	}
	if uint64(len(b)) != length {
		return nil, fmt.Errorf("%w: %s: %s at %d: read %d bytes, want %d (truncated shard)", ErrCorrupt, key, what, offset, len(b), length)
	}
	return b, nil
}

// parseMinishardIndex decodes a minishard index as stored (gzip already
// undone): three arrays of n little-endian uint64 — chunk ids, each the
// difference from the previous id; chunk offsets, each relative to the end
// of the previous chunk (the first relative to the end of the shard
// index); chunk sizes. It returns n entries of three little-endian uint64
// (id, offset from the end of the shard index, size), the form
// lookupMinishard reads. A length that is not a multiple of 24, or an
// offset or size that overflows, is an error wrapping ErrCorrupt.
func parseMinishardIndex(b []byte) ([]byte, error) {
	if len(b)%24 != 0 {
		return nil, fmt.Errorf("%w: minishard index of %d bytes is not 3 arrays of uint64", ErrCorrupt, len(b))
	}
	n := len(b) / 24
	out := make([]byte, len(b))
	var id, end uint64
	for i := range n {
		id += binary.LittleEndian.Uint64(b[8*i:]) // wraps, as the writers' delta coding does
		delta := binary.LittleEndian.Uint64(b[8*(n+i):])
		size := binary.LittleEndian.Uint64(b[8*(2*n+i):])
		start := end + delta
		if start < end || start+size < start || start+size > 1<<62 {
			return nil, fmt.Errorf("%w: minishard index entry %d: %d bytes at %d+%d overflow", ErrCorrupt, i, size, end, delta)
		}
		end = start + size
		e := out[24*i:]
		binary.LittleEndian.PutUint64(e, id)
		binary.LittleEndian.PutUint64(e[8:], start)
		binary.LittleEndian.PutUint64(e[16:], size)
	}
	return out, nil
}

// lookupMinishard finds chunkID in a parsed minishard index and returns
// its offset from the end of the shard index and its size.
func lookupMinishard(index []byte, chunkID uint64) (offset, size uint64, ok bool) {
	for e := index; len(e) >= 24; e = e[24:] {
		if binary.LittleEndian.Uint64(e) == chunkID {
			return binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:]), true
		}
	}
	return 0, 0, false
}

// String describes the sharding for `volfs info`.
func (s *shardingSpec) String() string {
	hash := "identity"
	if s.murmur {
		hash = "murmurhash3_x86_128"
	}
	enc := func(gz bool) string {
		if gz {
			return "gzip"
		}
		return "raw"
	}
	return fmt.Sprintf("preshift=%d,hash=%s,minishard_bits=%d,shard_bits=%d,index=%s,data=%s",
		s.preshiftBits, hash, s.minishardBits, s.shardBits, enc(s.gzipIndex), enc(s.gzipData))
}

// ShardingGiven reports whether raw, the "sharding" member of a
// precomputed info (a volume's scale, a skeleton or mesh directory, an
// annotation's by_id or relationship index), asks for the sharded format:
// the one rule every reader of such a member follows.
//
// Neuroglancer's specification (skeletons.md, annotations.md, volume.md
// of src/datasource/precomputed) says: if specified, the member "must be
// a sharding specification"; if not specified, the unsharded
// representation is used. Absent and JSON null (what CloudVolume writes
// for an unsharded directory) are unsharded. Any other value, false
// included, is given, so that parsing it as a specification refuses it
// with a message naming the member ("sharding: want an object, got
// false") in every view and in `volfs info` alike.
func ShardingGiven(raw json.RawMessage) bool {
	v := bytes.TrimSpace(raw)
	return len(v) > 0 && string(v) != "null"
}
