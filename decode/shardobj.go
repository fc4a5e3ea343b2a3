package decode

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Sharding reads objects that a neuroglancer_uint64_sharded_v1 directory
// keys by a uint64 id used as is (sharded.md): skeletons by segment id,
// annotation indexes by annotation or object id. It shares the chunk
// reads' code, bounds and memo keys (readChunk), so that an object read
// costs the same three ranged reads as a sharded chunk.
type Sharding struct{ s *shardingSpec }

// ParseSharding validates a "sharding" member as parseSharding does for a
// scale; the error names the offending member.
func ParseSharding(raw json.RawMessage) (*Sharding, error) {
	s, member, err := parseSharding(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", member, err)
	}
	return &Sharding{s}, nil
}

// String describes the sharding, as `volfs info` shows it; it names every
// parameter, so it also keys memoised indexes made under it.
func (s *Sharding) String() string { return s.s.String() }

// Read returns the stored bytes of object id in the sharded directory dir,
// data_encoding gzip undone, at most limit bytes: readChunk's contract
// (ErrMissing for an id its minishard does not list, ErrCorrupt for a
// shard that lies, src's error for a missing shard file), except that
// the memory gzip decoding takes follows the object's size, not limit.
func (s *Sharding) Read(ctx context.Context, src Source, dir string, id uint64, limit int64) ([]byte, error) {
	return s.s.read(ctx, src, dir, id, 0, limit)
}

// ShardNumber reports whether name is the name of a shard file of this
// sharding (lowercase hex of exactly the width shardFile writes, then
// ".shard") and returns its shard number.
func (s *Sharding) ShardNumber(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".shard")
	if !ok || hex == "" || len(hex) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || n > lowBits(s.s.shardBits) || fmt.Sprintf("%0*x.shard", int(s.s.shardBits+3)/4, n) != name {
		return 0, false
	}
	return n, true
}

// maxListedMinishardBits is the largest minishard_bits whose shard index
// (16 MiB at 20) ShardIDs reads whole to list a shard's objects; the
// objects of a shard with more minishards are still read by id.
const maxListedMinishardBits = 20

// ShardIDs returns, sorted and without repeats, the ids of the objects in
// the shard file name of dir: those its minishard indexes list that hash
// to this shard and minishard, so that each id it returns is one that
// Read finds. It reads the shard index and each non-empty minishard index,
// never an object, memoised under the keys Read uses. More than max ids is
// an error wrapping ErrCorrupt; so is a shard whose indexes lie.
func (s *Sharding) ShardIDs(ctx context.Context, src Source, dir, name string, max int) ([]uint64, error) {
	shard, ok := s.ShardNumber(name)
	if !ok {
		return nil, fmt.Errorf("decode: %s: not a shard file name of %s", name, s)
	}
	key := path.Join(dir, name)
	sp := s.s
	if sp.minishardBits > maxListedMinishardBits {
		return nil, fmt.Errorf("%w: %s: a shard of 2^%d minishards is not listed (objects are read by id)", ErrUnsupported, key, sp.minishardBits)
	}
	n := sp.shardIndexSize()
	var index []byte
	var err error
	if sp.minishardBits <= wholeShardIndexBits {
		index, err = src.Memo(ctx, key+"#index", func(ctx context.Context) ([]byte, error) {
			return readExactly(ctx, src, key, 0, n, "shard index")
		})
	} else {
		var release func()
		if release, err = reserveLoad(ctx, src, n); err == nil {
			index, err = readExactly(ctx, src, key, 0, n, "shard index")
			defer release()
		}
	}
	if err != nil {
		return nil, err
	}
	if uint64(len(index)) != n {
		return nil, fmt.Errorf("%w: %s: shard index of %d bytes, want %d", ErrCorrupt, key, len(index), n)
	}
	var ids []uint64
	for ms := range uint64(1) << sp.minishardBits {
		start, end, err := sp.entryRange(key, ms, index[16*ms:])
		if err != nil {
			return nil, err
		}
		if start == end {
			continue
		}
		mi, err := src.Memo(ctx, key+"#minishard/"+strconv.FormatUint(ms, 10), func(ctx context.Context) ([]byte, error) {
			b, err := sp.readMinishardIndex(ctx, src, key, start, end)
			if err != nil {
				return nil, fmt.Errorf("%s: minishard %d index: %w", key, ms, err)
			}
			return b, nil
		})
		if err != nil {
			return nil, err
		}
		for e := mi; len(e) >= 24; e = e[24:] {
			id := binary.LittleEndian.Uint64(e)
			if sh, m := sp.locate(id); sh != shard || m != ms {
				continue // listed where Read would not look: not an object
			}
			if len(ids) == max {
				return nil, fmt.Errorf("%w: %s: more than %d objects", ErrCorrupt, key, max)
			}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
