package decode

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/volfs/volfs/decode/codec"
)

// LoadReserver is implemented by a Source that bounds the memory loads
// hold while they run, beyond the chunk they make (fs: the chunk store's
// cache.Store.ReserveLoad). ReserveLoad waits until n more bytes fit in
// its budget, or ctx ends (its error, nothing taken), and returns the
// function that gives them back. A load holds one reservation at a time
// and waits for nothing but its own reads while it holds it, so that
// reservations always drain. A Source without it bounds nothing.
type LoadReserver interface {
	ReserveLoad(ctx context.Context, n int64) (release func(), err error)
}

// reserveLoad reserves n bytes of src's budget of loads, if it has one.
func reserveLoad(ctx context.Context, src Source, n uint64) (release func(), err error) {
	r, ok := src.(LoadReserver)
	if !ok || n == 0 {
		return func() {}, nil
	}
	return r.ReserveLoad(ctx, int64(min(n, 1<<62)))
}

// smallGzipIndex is the largest gzip-compressed minishard index read
// before its memory is reserved: its trailer then says how much to
// reserve for the rest at no extra request. A larger one costs a 4-byte
// read of its trailer first.
const smallGzipIndex = 1 << 20

// readMinishardIndex reads, decompresses and parses the minishard index at
// [start, end) of the shard file key, with the memory it holds meanwhile
// reserved through src (LoadReserver): the stored bytes, the decompressed
// ones, the parsed entries and the memo's copy of them. A raw index
// reserves 3 times its size before it is read. A gzip one reserves its
// stored size plus 3 times the size its trailer states (at most
// maxMinishardIndexBytes); one that decodes to more (a stream of several
// members, or a trailer that lies) is read again under a reservation of
// the largest index, which the budget cuts to its size: it then runs
// alone, so that a lying trailer costs time, never memory.
func (s *shardingSpec) readMinishardIndex(ctx context.Context, src Source, key string, start, end uint64) ([]byte, error) {
	n := end - start
	if !s.gzipIndex {
		release, err := reserveLoad(ctx, src, 3*n)
		if err != nil {
			return nil, err
		}
		defer release()
		b, err := readExactly(ctx, src, key, start, n, "minishard index")
		if err != nil {
			return nil, err
		}
		return parseMinishardIndex(b)
	}
	var b []byte
	var trailer []byte
	var err error
	if n <= smallGzipIndex {
		if b, err = readExactly(ctx, src, key, start, n, "minishard index"); err != nil {
			return nil, err
		}
		trailer = b[max(len(b), 4)-4:]
	} else if trailer, err = readExactly(ctx, src, key, end-4, 4, "minishard index trailer"); err != nil {
		return nil, err
	}
	if len(trailer) < 4 {
		return nil, fmt.Errorf("%w: minishard index of %d bytes is no gzip stream", ErrCorrupt, n)
	}
	bound := min(max(uint64(binary.LittleEndian.Uint32(trailer)), 1), maxMinishardIndexBytes)
	out, err := s.gunzipIndex(ctx, src, key, start, n, b, bound)
	if err != nil && bound < maxMinishardIndexBytes && ctx.Err() == nil {
		// Longer than its trailer says, or corrupt: the second try
		// tells which.
		out, err = s.gunzipIndex(ctx, src, key, start, n, nil, maxMinishardIndexBytes)
	}
	return out, err
}

// gunzipIndex decompresses and parses the gzip minishard index of n bytes
// at start of key, at most bound bytes decompressed, under a reservation
// of its bytes; b is the stored index if already read (and not yet
// reserved: at most smallGzipIndex), else nil.
func (s *shardingSpec) gunzipIndex(ctx context.Context, src Source, key string, start, n uint64, b []byte, bound uint64) ([]byte, error) {
	release, err := reserveLoad(ctx, src, n+3*bound)
	if err != nil {
		return nil, err
	}
	defer release()
	if b == nil {
		if b, err = readExactly(ctx, src, key, start, n, "minishard index"); err != nil {
			return nil, err
		}
	}
	out, err := codec.Gunzip(b, int(bound), int(bound))
	if err != nil {
		return nil, err
	}
	return parseMinishardIndex(out)
}
