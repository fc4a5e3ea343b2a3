package decode

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"path"
	"strconv"
	"strings"
)

// Zarr v3 sharding (the sharding_indexed codec, zarr-specs
// codecs/sharding-indexed) stores the inner chunks of a shard one after
// another, in any order, with an index of one (offset, nbytes) pair of
// little-endian uint64 per inner chunk in C order of the shard's inner
// grid, at the start or the end of the shard, encoded by index_codecs
// (bytes, optionally crc32c). An entry of two 2^64-1 marks an absent inner
// chunk. An inner chunk may itself be a shard (nested sharding).
//
// volfs serves a sharded array as its innermost chunks. A chunk read is
// therefore, as for precomputed shards (sharding.go): the shard's index
// (memoised through Source.Memo, so the chunks of a shard share it), the
// index of each nested shard on the way down (memoised too), then the
// chunk's own byte range. Nothing reads a shard whole.

// maxV3IndexBytes bounds the index of one Zarr v3 shard: 16 bytes an inner
// chunk, so 4 Mi inner chunks. Writers aim at shards of a few thousand
// chunks; an array whose shards index more is refused at parse time
// (ErrUnsupported), so no index, however the metadata lies, costs more.
const maxV3IndexBytes = 64 << 20

// wholeV3IndexBytes is the largest index read and memoised whole (64 Ki
// inner chunks). A larger one is read in blocks of v3IndexBlock entries,
// each memoised on its own, so a read costs one block of the index, not
// all of it; a crc32c over it is checked once per shard by reading it
// through in pieces of wholeV3IndexBytes.
const wholeV3IndexBytes = 1 << 20

// v3IndexBlock is the number of index entries (16 bytes each) of one block
// of a large index: 64 KiB.
const v3IndexBlock = 4096

// v3Sharded is a sharded Zarr v3 array's chunk reader.
type v3Sharded struct {
	shape     []int64    // the shard shape: the array's chunk_grid
	levels    []*v3Shard // outermost first
	innermost *v3Chain   // the codec chain of the innermost chunks
	keys      keyTree    // the array's chunk key encoding
}

// newV3Sharded makes the reader of an array whose chunk grid is shape and
// whose codecs are chain, which shards. It refuses what cannot be read by
// range: bytes-to-bytes codecs after sharding_indexed at any level (they
// compress a whole shard), and shards indexing more than maxV3IndexBytes.
func newV3Sharded(chain *v3Chain, shape []int64, keys keyTree) (*v3Sharded, error) {
	z := &v3Sharded{shape: shape, keys: keys}
	for c := chain; c.shard != nil; c = c.shard.inner {
		if len(c.b2b) > 0 {
			return nil, fmt.Errorf("%s after sharding_indexed compresses whole shards, which cannot be read by range: %w",
				strings.Join(c.names[1:], " | "), ErrUnsupported)
		}
		if c.shard.indexSize > maxV3IndexBytes {
			return nil, fmt.Errorf("a shard index of %d inner chunks (%d bytes) is more than the %d bytes volfs reads: %w",
				c.shard.n, c.shard.indexSize, maxV3IndexBytes, ErrUnsupported)
		}
		z.levels = append(z.levels, c.shard)
		z.innermost = c.shard.inner
	}
	return z, nil
}

// checkShardShape validates a Zarr v3 chunk_grid chunk shape, which may be
// a shard's: one positive length per axis of the array, and a product (in
// bytes) that fits 62 bits. Shards are never decoded whole, so unlike a
// chunk a shard may be larger than maxChunkBytes.
func checkShardShape(shape, arrayShape []int64, elemSize int) error {
	if len(shape) != len(arrayShape) {
		return fmt.Errorf("chunk_shape %v has %d axes, the shape %d", shape, len(shape), len(arrayShape))
	}
	n := uint64(elemSize)
	for _, s := range shape {
		if s <= 0 {
			return fmt.Errorf("chunk_shape must be positive, got %v", shape)
		}
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > 1<<62 {
			return fmt.Errorf("chunk_shape %v of %d-byte elements overflows 62 bits", shape, elemSize)
		}
		n = lo
	}
	return nil
}

// String describes the sharding for `volfs info`: the shard shape, then
// each level's inner chunk shape and index location.
func (z *v3Sharded) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shards %v", z.shape)
	for _, s := range z.levels {
		where := "start"
		if s.indexAtEnd {
			where = "end"
		}
		fmt.Fprintf(&b, " of %v (index at %s, %s)", s.inner.shape, where, s.index)
	}
	return b.String()
}

// readChunk returns the stored bytes of the innermost chunk at c (grid
// coordinates of the innermost chunks) of the array in directory dir,
// ready for the innermost codec chain. limit bounds the chunk's stored
// size; a chunk the index says is larger is an error wrapping ErrCorrupt.
//
// It reads through src with ranged reads only: the size of the shard (for
// an index at the end), the index entry of each level (memoised under the
// shard's key plus "#v3index/<level>@<offset>" and, for a large index,
// "/<block>"), then the chunk. A shard that does not exist is src's error,
// wrapped with %w; an absent inner chunk at any level is an error wrapping
// ErrMissing. Both read as fill. An entry that points outside its shard,
// an index that fails its checksum or a truncated shard is an error
// wrapping ErrCorrupt. Safe for concurrent use; cancelling ctx abandons the
// reads with ctx's error.
func (z *v3Sharded) readChunk(ctx context.Context, src Source, dir string, c []int64, limit int64) ([]byte, error) {
	nd := len(c)
	p := make([]int64, nd) // the chunk's first element, within the current level
	shard := make([]int64, nd)
	for d := range nd {
		p[d] = c[d] * z.innermost.shape[d] // fits: checkGrid bounds the grid's end
		shard[d] = p[d] / z.shape[d]
		p[d] -= shard[d] * z.shape[d]
	}
	key := path.Join(dir, z.keys.nameOf(shard))
	// The current level's shard is [base, base+length) of the object;
	// length is unknown (-1) for the object itself until needed.
	base, length := uint64(0), int64(-1)
	for l, s := range z.levels {
		i := int64(0) // the inner chunk's index in C order of the level's grid
		for d := range nd {
			q := p[d] / s.inner.shape[d]
			i = i*s.grid[d] + q
			p[d] -= q * s.inner.shape[d]
		}
		if length < 0 && s.indexAtEnd {
			size, err := shardSize(ctx, src, key)
			if err != nil {
				return nil, err
			}
			length = size
		}
		off, n, err := s.entry(ctx, src, key, l, base, length, i)
		if err != nil {
			return nil, err
		}
		if off == math.MaxUint64 && n == math.MaxUint64 {
			return nil, fmt.Errorf("%s: inner chunk %d of the level-%d shard at %d is absent: %w", key, i, l, base, ErrMissing)
		}
		if off > 1<<62 || n > 1<<62 || length >= 0 && (off > uint64(length) || n > uint64(length)-off) {
			size := "past 2^62"
			if length >= 0 {
				size = fmt.Sprintf("outside the shard's %d", length)
			}
			return nil, fmt.Errorf("%w: %s: index entry %d of the level-%d shard at %d: %d bytes at %d, %s",
				ErrCorrupt, key, i, l, base, n, off, size)
		}
		base, length = base+off, int64(n)
		if base > 1<<62 {
			return nil, fmt.Errorf("%w: %s: nested shard at %d past 2^62", ErrCorrupt, key, base)
		}
	}
	if length > limit {
		return nil, fmt.Errorf("%w: %s: inner chunk of %d bytes at %d, more than the %d a chunk may take",
			ErrCorrupt, key, length, base, limit)
	}
	return readExactly(ctx, src, key, base, uint64(length), "inner chunk")
}

// shardSize returns the size of the object key, memoised under key plus
// "#size".
func shardSize(ctx context.Context, src Source, key string) (int64, error) {
	b, err := src.Memo(ctx, key+"#size", func(ctx context.Context) ([]byte, error) {
		n, err := src.Stat(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("decode: %s: size: %w", key, err)
		}
		if n < 0 || n > 1<<62 {
			return nil, fmt.Errorf("%w: %s: size %d", ErrCorrupt, key, n)
		}
		return binary.LittleEndian.AppendUint64(nil, uint64(n)), nil
	})
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("decode: %s: memoised size of %d bytes", key, len(b))
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// entry returns index entry i of the shard that is [base, base+length) of
// the object key, at nesting level l; length is -1 when unknown, which
// only an index at the start allows. Offsets are relative to base.
func (s *v3Shard) entry(ctx context.Context, src Source, key string, l int, base uint64, length int64, i int64) (off, n uint64, err error) {
	size := uint64(s.indexSize)
	if length >= 0 && uint64(length) < size {
		return 0, 0, fmt.Errorf("%w: %s: level-%d shard at %d of %d bytes has no room for its index of %d",
			ErrCorrupt, key, l, base, length, size)
	}
	at := base
	if s.indexAtEnd {
		at = base + uint64(length) - size
	}
	memo := key + "#v3index/" + strconv.Itoa(l) + "@" + strconv.FormatUint(base, 10)
	var e []byte
	if size <= wholeV3IndexBytes {
		index, err := src.Memo(ctx, memo, func(ctx context.Context) ([]byte, error) {
			raw, err := readExactly(ctx, src, key, at, size, "shard index")
			if err != nil {
				return nil, err
			}
			index := make([]byte, 16*s.n)
			if err := s.index.decode(index, raw); err != nil {
				return nil, fmt.Errorf("%s: shard index at %d: %w", key, at, err)
			}
			return index, nil
		})
		if err != nil {
			return 0, 0, err
		}
		e = index[16*i:]
	} else {
		if len(s.index.b2b) > 0 { // crc32c: checked once, over the whole index
			if _, err := src.Memo(ctx, memo+"/checked", func(ctx context.Context) ([]byte, error) {
				return []byte{}, s.checkIndex(ctx, src, key, at)
			}); err != nil {
				return 0, 0, err
			}
		}
		blk := i / v3IndexBlock
		entries := min(v3IndexBlock, s.n-blk*v3IndexBlock)
		b, err := src.Memo(ctx, memo+"/"+strconv.FormatInt(blk, 10), func(ctx context.Context) ([]byte, error) {
			b, err := readExactly(ctx, src, key, at+uint64(16*blk*v3IndexBlock), uint64(16*entries), "shard index block")
			if err != nil {
				return nil, err
			}
			if s.index.big {
				swapBytes(b, 8)
			}
			return b, nil
		})
		if err != nil {
			return 0, 0, err
		}
		e = b[16*(i%v3IndexBlock):]
	}
	if len(e) < 16 {
		return 0, 0, fmt.Errorf("decode: %s: shard index entry %d out of its %d bytes", key, i, len(e))
	}
	return binary.LittleEndian.Uint64(e), binary.LittleEndian.Uint64(e[8:]), nil
}

// checkIndex checks the crc32c of a large shard index at offset at of the
// object key, reading it in pieces of wholeV3IndexBytes so that it is never
// in memory whole.
func (s *v3Shard) checkIndex(ctx context.Context, src Source, key string, at uint64) error {
	data := uint64(16 * s.n)
	crc := uint32(0)
	for done := uint64(0); done < data; {
		n := min(wholeV3IndexBytes, data-done)
		b, err := readExactly(ctx, src, key, at+done, n, "shard index")
		if err != nil {
			return err
		}
		crc = crc32.Update(crc, crc32cTable, b)
		done += n
	}
	sum, err := readExactly(ctx, src, key, at+data, 4, "shard index checksum")
	if err != nil {
		return err
	}
	if stored := binary.LittleEndian.Uint32(sum); stored != crc {
		return fmt.Errorf("%w: %s: shard index at %d: crc32c %08x, stored %08x", ErrCorrupt, key, at, crc, stored)
	}
	return nil
}

// nameOf returns the key of the chunk at grid coordinates c of a key tree
// that joins coordinates with a separator (zarr's): those need no Array.
func (t keyTree) nameOf(c []int64) string { return t.name(nil, c) }

// crc32cTable is the CRC-32C table of the sharding_indexed index checksum.
var crc32cTable = crc32.MakeTable(crc32.Castagnoli)
