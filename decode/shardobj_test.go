package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestShardIDs lists tensorstore's golden shard (objects 2 and 8 in
// minishard 0, 3 in minishard 1) from its indexes, and refuses more ids
// than asked for.
func TestShardIDs(t *testing.T) {
	sh, err := ParseSharding(json.RawMessage(fmt.Sprintf(tensorstoreShardSpec, "raw", "raw")))
	if err != nil {
		t.Fatal(err)
	}
	src := newMemSource(map[string][]byte{"seg/0.shard": tensorstoreRawShard})
	ctx := context.Background()
	ids, err := sh.ShardIDs(ctx, src, "seg", "0.shard", 10)
	if err != nil || !slices.Equal(ids, []uint64{2, 3, 8}) {
		t.Errorf("ShardIDs = %v, %v; want [2 3 8]", ids, err)
	}
	if _, err := sh.ShardIDs(ctx, src, "seg", "0.shard", 2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ShardIDs with max 2 of 3: %v, want an error wrapping ErrCorrupt", err)
	}
	if _, _, ranges := src.stats(); ranges != 3 {
		t.Errorf("%d ranged reads, want 3 (the shard index and two minishard indexes, once each)", ranges)
	}
}

func TestShardNumber(t *testing.T) {
	for _, tc := range []struct {
		bits uint
		name string
		n    uint64
		ok   bool
	}{
		{0, "0.shard", 0, true},
		{0, "1.shard", 0, false},
		{0, ".shard", 0, false},
		{2, "3.shard", 3, true},
		{2, "4.shard", 0, false},
		{5, "1f.shard", 31, true},
		{5, "1F.shard", 0, false},
		{5, "f.shard", 0, false},
		{5, "0f.shard", 15, true},
		{5, "0f.shard.gz", 0, false},
		{64, "ffffffffffffffff.shard", 1<<64 - 1, true},
		{64, "+fffffffffffffff.shard", 0, false},
	} {
		sh, err := ParseSharding(json.RawMessage(fmt.Sprintf(`{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity", "preshift_bits": 0, "minishard_bits": 0, "shard_bits": %d}`, tc.bits)))
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := sh.ShardNumber(tc.name); n != tc.n || ok != tc.ok {
			t.Errorf("shard_bits %d: ShardNumber(%q) = %d, %v; want %d, %v", tc.bits, tc.name, n, ok, tc.n, tc.ok)
		}
	}
}

// TestShardObjects reads every object of tensorstore's golden shard with
// one ranged read per minishard (2 and 8 lie side by side), the bytes
// those of Read, and refuses an object past the limit.
func TestShardObjects(t *testing.T) {
	sh, err := ParseSharding(json.RawMessage(fmt.Sprintf(tensorstoreShardSpec, "raw", "raw")))
	if err != nil {
		t.Fatal(err)
	}
	src := newMemSource(map[string][]byte{"seg/0.shard": tensorstoreRawShard})
	ctx := context.Background()
	got := map[uint64][]byte{}
	err = sh.ShardObjects(ctx, src, "seg", "0.shard", 100, func(id uint64, b []byte) error {
		if got[id] != nil {
			t.Errorf("object %d twice", id)
		}
		got[id] = slices.Clone(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ranges := src.stats(); ranges != 5 {
		t.Errorf("%d ranged reads, want 5 (shard index, two minishard indexes, one run of objects per minishard)", ranges)
	}
	for _, id := range []uint64{2, 3, 8} {
		want, err := sh.Read(ctx, src, "seg", id, 100)
		if err != nil || !bytes.Equal(got[id], want) {
			t.Errorf("object %d: ShardObjects %v, Read %v, %v", id, got[id], want, err)
		}
	}
	if len(got) != 3 {
		t.Errorf("objects %v, want 2, 3 and 8", got)
	}
	err = sh.ShardObjects(ctx, src, "seg", "0.shard", 3, func(uint64, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("ShardObjects with limit 3 of an object of 4 bytes: %v, want an error wrapping ErrCorrupt", err)
	}
	stop := errors.New("stop")
	if err := sh.ShardObjects(ctx, src, "seg", "0.shard", 100, func(uint64, []byte) error { return stop }); err != stop {
		t.Errorf("fn's error: got %v", err)
	}
}

// TestShardListingReservesOneAtATime lists and reads a shard of 2^13
// minishards (its 128 KiB index read in parts, not memoised whole)
// through a LoadReserver: no reservation may be taken while another is
// held (LoadReserver's contract), or a listing whose shard index takes
// the whole load budget waits for itself forever.
func TestShardListingReservesOneAtATime(t *testing.T) {
	const mb = 13
	objs := map[uint64][]byte{5: {1, 2, 3}, 8197: {4, 5}, 9000: {6}} // minishards 5, 5, 808
	data := slices.Concat(objs[5], objs[8197], objs[9000])
	ms5 := u64(5, 8192, 0, 0, 3, 2)
	ms808 := u64(9000, 5, 1)
	index := make([]byte, 16<<mb)
	at := uint64(len(data))
	binary.LittleEndian.PutUint64(index[16*5:], at)
	binary.LittleEndian.PutUint64(index[16*5+8:], at+uint64(len(ms5)))
	at += uint64(len(ms5))
	binary.LittleEndian.PutUint64(index[16*808:], at)
	binary.LittleEndian.PutUint64(index[16*808+8:], at+uint64(len(ms808)))
	shard := slices.Concat(index, data, ms5, ms808)
	sh, err := ParseSharding(json.RawMessage(fmt.Sprintf(`{"@type": "neuroglancer_uint64_sharded_v1", "hash": "identity",
		"preshift_bits": 0, "minishard_bits": %d, "shard_bits": 0, "minishard_index_encoding": "raw", "data_encoding": "raw"}`, mb)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := &reservingSource{memSource: newMemSource(map[string][]byte{"skel/0.shard": shard}), t: t}
	ids, err := sh.ShardIDs(ctx, src, "skel", "0.shard", 10)
	if err != nil || !slices.Equal(ids, []uint64{5, 8197, 9000}) {
		t.Errorf("ShardIDs = %v, %v; want [5 8197 9000]", ids, err)
	}
	src = &reservingSource{memSource: newMemSource(map[string][]byte{"skel/0.shard": shard}), t: t}
	got := map[uint64][]byte{}
	err = sh.ShardObjects(ctx, src, "skel", "0.shard", 100, func(id uint64, b []byte) error {
		got[id] = slices.Clone(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range objs {
		if !bytes.Equal(got[id], want) {
			t.Errorf("object %d: %v, want %v", id, got[id], want)
		}
	}
	if len(got) != len(objs) {
		t.Errorf("objects %v, want %v", got, objs)
	}
}
