package codec

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzCodec fuzzes the codec registered under name against its contract:
// no panic; an error wraps ErrCorrupt or ErrUnsupported; the output never
// exceeds the limit and its buffer is not much larger; decoding again into
// a dirty buffer gives the same bytes. The seed corpus is in
// testdata/fuzz/<target>, fixture buffers included.
func fuzzCodec(f *testing.F, name string) { fuzzDecoder(f, mustCodec(f, name)) }

// fuzzDecoder fuzzes codec as fuzzCodec does.
func fuzzDecoder(f *testing.F, codec Func) {
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, src []byte, limit int) {
		limit = max(0, min(limit, 8<<20))
		out, err := codec(nil, src, limit)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrUnsupported: %v", err)
			}
			return
		}
		if len(out) > limit {
			t.Fatalf("decoded %d bytes, limit %d", len(out), limit)
		}
		if c := cap(out); c > limit+limit/8+8192 {
			t.Fatalf("output buffer of %d bytes for a limit of %d", c, limit)
		}
		dirty := bytes.Repeat([]byte{0xa5}, len(out)+7)
		again, err := codec(dirty, src, limit)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second decode into a used buffer: %d bytes, %v; first gave %d", len(again), err, len(out))
		}
	})
}

func FuzzBlosc(f *testing.F)  { fuzzCodec(f, "blosc") }
func FuzzZstd(f *testing.F)   { fuzzCodec(f, "zstd") }
func FuzzZlib(f *testing.F)   { fuzzCodec(f, "zlib") }
func FuzzBz2(f *testing.F)    { fuzzCodec(f, "bz2") }
func FuzzLZ4(f *testing.F)    { fuzzCodec(f, "lz4") }
func FuzzCRC32C(f *testing.F) { fuzzCodec(f, "crc32c") }
func FuzzLZMA(f *testing.F)   { fuzzCodec(f, "lzma") }
func FuzzN5LZ4(f *testing.F)  { fuzzCodec(f, "n5.lz4") }

// FuzzXZDelta fuzzes the decoder of xz streams with the filters delta,
// LZMA2, seeded with one that Python's lzma wrote (delta distance 2).
func FuzzXZDelta(f *testing.F) {
	f.Add(xzDeltaSeed, 16)
	fuzzDecoder(f, decodeXZDelta)
}

// FuzzLZMA2Raw and FuzzLZMA1Raw fuzz numcodecs' raw lzma streams (format
// 3), LZMA2 after a delta filter and LZMA1 with its properties.
func FuzzLZMA2Raw(f *testing.F) {
	fuzzLZMARaw(f, `{"id": "lzma", "format": 3, "filters": [{"id": 3, "dist": 2}, {"id": 33}]}`)
}

func FuzzLZMA1Raw(f *testing.F) {
	fuzzLZMARaw(f, `{"id": "lzma", "format": 3, "filters": [{"id": 4611686018427387905, "lc": 1, "lp": 1, "pb": 1}]}`)
}

func fuzzLZMARaw(f *testing.F, cfg string) {
	s, err := NewStage("lzma", Config{Params: []byte(cfg)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{1, 0, 3, 'a', 'b', 'c', 'd', 0}, 4)
	fuzzDecoder(f, s.Decode)
}

// xzDeltaSeed is bytes(range(16)) compressed by Python's lzma with the
// filters delta (distance 2), LZMA2 (preset 1).
var xzDeltaSeed = []byte{
	0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x02, 0x01, 0x03, 0x01,
	0x01, 0x21, 0x01, 0x10, 0x29, 0xe2, 0x1b, 0xbf, 0xe0, 0x00, 0x0f, 0x00, 0x08, 0x5d, 0x00, 0x00,
	0x00, 0x52, 0x7b, 0x60, 0x3d, 0x33, 0x00, 0x00, 0x56, 0x53, 0x98, 0xb6, 0x21, 0xe4, 0x64, 0x7a,
	0x00, 0x01, 0x24, 0x10, 0xe9, 0x44, 0xd9, 0xcc, 0x1f, 0xb6, 0xf3, 0x7d, 0x01, 0x00, 0x00, 0x00,
	0x00, 0x04, 0x59, 0x5a,
}

// TestXZDeltaSeed decodes the seed: Python's bytes(range(16)).
func TestXZDeltaSeed(t *testing.T) {
	got, err := decodeXZDelta(nil, xzDeltaSeed, 16)
	if err != nil || !bytes.Equal(got, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Errorf("got %v, %v", got, err)
	}
}

// FuzzBlosclz: the blosclz decoder on its own (inside blosc it is reached
// only through a valid container) never panics and never claims more
// than the buffer it was given.
func FuzzBlosclz(f *testing.F) {
	f.Add([]byte{0x00, 'a'}, 1)
	f.Add([]byte{0x01, 'a', 'b', 0x20, 0x01}, 8)
	f.Fuzz(func(t *testing.T, src []byte, size int) {
		size = max(0, min(size, 1<<20))
		dst := make([]byte, size)
		n, err := blosclzDecompress(dst, src)
		if n < 0 || n > size {
			t.Fatalf("wrote %d bytes into %d", n, size)
		}
		if err == nil && blosclzDecode(dst[:n], src) != nil {
			t.Fatalf("a stream of %d bytes does not decode into exactly that", n)
		}
	})
}
