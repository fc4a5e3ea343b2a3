package decode

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
func fuzzCodec(f *testing.F, name string) {
	codec := mustCodec(f, name)
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
