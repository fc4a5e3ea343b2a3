package decode

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/volfs/volfs/decode/codec"
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
// (16 MiB at 20, read in parts of 64 KiB) ShardIDs and ShardObjects walk
// to list a shard's objects; the objects of a shard with more minishards
// are still read by id.
const maxListedMinishardBits = 20

// ShardIDs returns, sorted and without repeats, the ids of the objects in
// the shard file name of dir: those its minishard indexes list that hash
// to this shard and minishard, so that each id it returns is one that
// Read finds. It reads the shard index and each non-empty minishard index,
// never an object, memoised under the keys Read uses. More than max ids is
// an error wrapping ErrCorrupt; so is a shard whose indexes lie.
func (s *Sharding) ShardIDs(ctx context.Context, src Source, dir, name string, max int) ([]uint64, error) {
	var ids []uint64
	err := s.minishards(ctx, src, dir, name, func(_ string, entries [][3]uint64) error {
		for _, e := range entries {
			if len(ids) == max {
				return fmt.Errorf("%w: %s: more than %d objects", ErrCorrupt, path.Join(dir, name), max)
			}
			ids = append(ids, e[0])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// maxObjectRun bounds one ranged read of ShardObjects: the objects of a
// minishard stored at most maxObjectGap apart are read together up to
// this many bytes.
const (
	maxObjectRun = 4 << 20
	maxObjectGap = 64 << 10
)

// ShardObjects calls fn with every object of the shard file name of dir
// (the ids ShardIDs returns, in stored order within each minishard, an id
// listed twice once) and its bytes, data_encoding gzip undone; fn must not
// keep b. Objects stored near each other are read with one ranged read of
// at most maxObjectRun bytes, so that reading every object of a shard costs
// a few requests, not one per object. An object of more than limit bytes,
// stored or decoded, is an error wrapping ErrCorrupt, as for Read; so is a
// shard whose indexes lie. fn's error ends the walk and is returned.
func (s *Sharding) ShardObjects(ctx context.Context, src Source, dir, name string, limit int64, fn func(id uint64, b []byte) error) error {
	sp := s.s
	base := sp.shardIndexSize()
	key := path.Join(dir, name)
	return s.minishards(ctx, src, dir, name, func(ms string, entries [][3]uint64) error {
		for _, e := range entries {
			if e[2] > uint64(max(limit, 0)) || e[1] > 1<<62-base {
				return fmt.Errorf("%w: %s: object %d: %d bytes at %d, more than the %d an object may take",
					ErrCorrupt, key, e[0], e[2], e[1], limit)
			}
		}
		slices.SortStableFunc(entries, func(a, b [3]uint64) int { return cmp.Compare(a[1], b[1]) })
		for len(entries) > 0 {
			start, end := entries[0][1], entries[0][1]+entries[0][2]
			n := 1
			for ; n < len(entries); n++ {
				e := entries[n]
				if e[1] > end+maxObjectGap || max(end, e[1]+e[2])-start > maxObjectRun {
					break
				}
				end = max(end, e[1]+e[2])
			}
			release, err := reserveLoad(ctx, src, end-start)
			if err != nil {
				return err
			}
			run, err := readExactly(ctx, src, key, base+start, end-start, "objects of minishard "+ms)
			if err == nil {
				for _, e := range entries[:n] {
					b := run[e[1]-start : e[1]-start+e[2]]
					if sp.gzipData {
						if b, err = codec.Gunzip(b, min(8*len(b)+4096, int(min(limit, 1<<40))), int(limit)); err != nil {
							err = fmt.Errorf("%s: object %d: %w", key, e[0], err)
							break
						}
					}
					if err = fn(e[0], b); err != nil {
						break
					}
				}
			}
			release()
			if err != nil {
				return err
			}
			entries = entries[n:]
		}
		return nil
	})
}

// minishards calls fn with the entries (id, offset from the end of the
// shard index, size) of each non-empty minishard of the shard file name of
// dir, keeping only the ids that hash to it, each once (the first, which
// Read finds); ms is the minishard's number.
func (s *Sharding) minishards(ctx context.Context, src Source, dir, name string, fn func(ms string, entries [][3]uint64) error) error {
	shard, ok := s.ShardNumber(name)
	if !ok {
		return fmt.Errorf("decode: %s: not a shard file name of %s", name, s)
	}
	key := path.Join(dir, name)
	sp := s.s
	if sp.minishardBits > maxListedMinishardBits {
		return fmt.Errorf("%w: %s: a shard of 2^%d minishards is not listed (objects are read by id)", ErrUnsupported, key, sp.minishardBits)
	}
	// The shard index is read 1<<wholeShardIndexBits entries (64 KiB) at
	// a time, whole and memoised as Read memoises it when that is all of
	// it, else in parts held without a reservation: the reads below
	// reserve, and a load holds one reservation at a time.
	window := uint64(1) << min(sp.minishardBits, wholeShardIndexBits)
	var index []byte
	var entries [][3]uint64
	seen := map[uint64]bool{}
	for ms := range uint64(1) << sp.minishardBits {
		if ms%window == 0 {
			var err error
			if sp.minishardBits <= wholeShardIndexBits {
				index, err = src.Memo(ctx, key+"#index", func(ctx context.Context) ([]byte, error) {
					return readExactly(ctx, src, key, 0, 16*window, "shard index")
				})
			} else {
				index, err = readExactly(ctx, src, key, 16*ms, 16*window, "shard index")
			}
			if err != nil {
				return err
			}
			if uint64(len(index)) != 16*window {
				return fmt.Errorf("%w: %s: shard index part of %d bytes, want %d", ErrCorrupt, key, len(index), 16*window)
			}
		}
		start, end, err := sp.entryRange(key, ms, index[16*(ms%window):])
		if err != nil {
			return err
		}
		if start == end {
			continue
		}
		msName := strconv.FormatUint(ms, 10)
		mi, err := src.Memo(ctx, key+"#minishard/"+msName, func(ctx context.Context) ([]byte, error) {
			b, err := sp.readMinishardIndex(ctx, src, key, start, end)
			if err != nil {
				return nil, fmt.Errorf("%s: minishard %d index: %w", key, ms, err)
			}
			return b, nil
		})
		if err != nil {
			return err
		}
		entries = entries[:0]
		clear(seen)
		for e := mi; len(e) >= 24; e = e[24:] {
			id := binary.LittleEndian.Uint64(e)
			if sh, m := sp.locate(id); sh != shard || m != ms || seen[id] {
				continue // listed where Read would not look, or again: not an object
			}
			seen[id] = true
			entries = append(entries, [3]uint64{id, binary.LittleEndian.Uint64(e[8:]), binary.LittleEndian.Uint64(e[16:])})
		}
		if len(entries) > 0 {
			if err := fn(msName, entries); err != nil {
				return err
			}
		}
	}
	return nil
}
