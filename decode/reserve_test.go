package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// reservingSource is a memSource that is a LoadReserver: it records every
// reservation and fails the test if one is taken while another is held.
type reservingSource struct {
	*memSource
	t *testing.T

	mu   sync.Mutex
	held bool    // GUARDED_BY(mu)
	got  []int64 // GUARDED_BY(mu); the reservations, in order
}

func (s *reservingSource) ReserveLoad(_ context.Context, n int64) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		s.t.Errorf("reservation of %d taken while another is held", n)
	}
	s.held = true
	s.got = append(s.got, n)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held = false
	}, nil
}

// TestMinishardIndexReserved: reading a minishard index reserves its
// bytes first, one reservation at a time: 3 x a raw index; a gzip one its
// stored size plus 3 x what its trailer says; a trailer that understates
// the index is read again under a reservation of the largest index: the
// chunk reads right when the index has several members, and a lying
// trailer, which gzip's own check catches, is corrupt.
func TestMinishardIndexReserved(t *testing.T) {
	index := u64(2, 6, 0, 0, 4, 3) // chunks 2 and 8, 4 and 3 bytes
	lying := gzipBytes(t, index)
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 8)
	twoMembers := slices.Concat(gzipBytes(t, index[:16]), gzipBytes(t, index[16:]))
	tests := []struct {
		name  string
		enc   string
		index []byte
		want  []int64
		bad   bool // corrupt
	}{
		{"raw", "raw", index, []int64{3 * 48}, false},
		{"gzip", "gzip", gzipBytes(t, index), []int64{int64(len(gzipBytes(t, index))) + 3*48}, false},
		{"gzip trailer lies", "gzip", lying, []int64{int64(len(lying)) + 3*8, int64(len(lying)) + 3*maxMinishardIndexBytes}, true},
		{"gzip of two members", "gzip", twoMembers, []int64{int64(len(twoMembers)) + 3*32, int64(len(twoMembers)) + 3*maxMinishardIndexBytes}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte{1, 2, 3, 4, 6, 7, 8}
			shard := slices.Concat(u64(uint64(len(data)), uint64(len(data)+len(tc.index))), data, tc.index)
			s := mustSharding(t, fmt.Sprintf(`{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0,
				"minishard_bits": 0, "shard_bits": 0, "minishard_index_encoding": %q, "data_encoding": "raw"}`, tc.enc))
			src := &reservingSource{memSource: newMemSource(map[string][]byte{"0.shard": shard}), t: t}
			got, err := s.readChunk(context.Background(), src, "", 8, 100)
			if tc.bad {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("readChunk(8) = %v, %v; want an error wrapping ErrCorrupt", got, err)
				}
			} else if err != nil || !bytes.Equal(got, []byte{6, 7, 8}) {
				t.Fatalf("readChunk(8) = %v, %v; want [6 7 8]", got, err)
			}
			if !slices.Equal(src.got, tc.want) {
				t.Errorf("reservations %v, want %v", src.got, tc.want)
			}
		})
	}
}
