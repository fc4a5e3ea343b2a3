package codec

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// le32Words lays out 32-bit words little-endian.
func le32Words(w ...uint32) []byte {
	b := make([]byte, 0, 4*len(w))
	for _, v := range w {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// rawElems lays out values as elemSize-byte little-endian elements: the raw
// layout of a chunk whose values are listed x fastest.
func rawElems(elemSize int, v ...uint64) []byte {
	b := make([]byte, 0, elemSize*len(v))
	for _, x := range v {
		if elemSize == 4 {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		} else {
			b = binary.LittleEndian.AppendUint64(b, x)
		}
	}
	return b
}

// oneChannel prefixes the data of one channel with the channel offset
// table of a one-channel chunk.
func oneChannel(w ...uint32) []byte { return le32Words(append([]uint32{1}, w...)...) }

// csegGolden are encodings published with the format's two reference
// implementations, rewritten with x, y, z sizes (x fastest):
//   - "ng/..." from neuroglancer's
//     sliceview/compressed_segmentation/encode_uint32.spec.ts (uint32);
//   - "ts/..." from tensorstore's
//     internal/compression/neuroglancer_compressed_segmentation_test.cc,
//     whose shapes are listed z, y, x there.
//
// encodeChannel's outputs are one channel's data, with offsets relative to
// that channel; oneChannel adds the chunk's channel offset table.
var csegGolden = []struct {
	name     string
	elemSize int
	extent   [3]int64
	block    [3]int64
	stored   []byte
	want     []uint64
}{
	{"ng/encodeChannel basic", 4, [3]int64{2, 2, 2}, [3]int64{2, 2, 1},
		oneChannel(5|2<<24, 4, 9|1<<24, 8, 0b01100001, 3, 4, 5, 0b1110, 1, 3),
		[]uint64{4, 3, 5, 4, 1, 3, 3, 3}},
	{"ng/encodeChannel basic cached 0-bit", 4, [3]int64{2, 2, 4}, [3]int64{2, 2, 1},
		oneChannel(8, 8, 9, 9, 9, 10, 8, 10, 4, 3),
		[]uint64{4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4}},
	{"ng/encodeChannel basic cached 2-bit", 4, [3]int64{2, 2, 4}, [3]int64{2, 2, 1},
		oneChannel(9|2<<24, 8, 13|1<<24, 12, 13|1<<24, 15, 9|2<<24, 16,
			0b01100001, 3, 4, 5, 0b1110, 1, 3, 0b00000001, 0b01001010),
		[]uint64{4, 3, 5, 4, 1, 3, 3, 3, 3, 1, 1, 1, 5, 5, 3, 4}},
	{"ng/encodeChannels 1-channel 1-block", 4, [3]int64{2, 2, 1}, [3]int64{2, 2, 1},
		le32Words(1, 2, 2, 4),
		[]uint64{4, 4, 4, 4}},
	// encodeBlock "size mismatch 1-bit": a 2x2x1 edge of a 3x2x1 block,
	// values at the full block's strides; the header is assembled here.
	{"ng/encodeBlock size mismatch 1-bit", 4, [3]int64{2, 2, 1}, [3]int64{3, 2, 1},
		oneChannel(3|1<<24, 2, 0b001001, 3, 4),
		[]uint64{4, 3, 4, 3}},
	{"ts/EncodeChannelTest.Basic", 8, [3]int64{2, 2, 2}, [3]int64{2, 2, 1},
		oneChannel(5|2<<24, 4, 12|1<<24, 11, 0b01100001, 3, 0, 4, 0, 5, 0, 0b1110, 1, 0, 3, 0),
		[]uint64{4, 3, 5, 4, 1, 3, 3, 3}},
	{"ts/EncodeChannelTest.BasicCached", 8, [3]int64{2, 2, 4}, [3]int64{2, 2, 1},
		oneChannel(9|2<<24, 8, 16|1<<24, 15, 16|1<<24, 20, 9|2<<24, 21,
			0b01100001, 3, 0, 4, 0, 5, 0, 0b1110, 1, 0, 3, 0, 0b00000001, 0b01001010),
		[]uint64{4, 3, 5, 4, 1, 3, 3, 3, 3, 1, 1, 1, 5, 5, 3, 4}},
	{"ts/EncodeChannelTest.BasicCachedZeroBitsAtEnd", 8, [3]int64{2, 2, 4}, [3]int64{2, 2, 1},
		oneChannel(8, 8, 8, 10, 8, 10, 8, 10, 3, 0),
		[]uint64{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
	{"ts/EncodeChannelTest.BasicCached32", 4, [3]int64{2, 2, 4}, [3]int64{2, 2, 1},
		oneChannel(9|2<<24, 8, 13|1<<24, 12, 13|1<<24, 15, 9|2<<24, 16,
			0b01100001, 3, 4, 5, 0b1110, 1, 3, 0b00000001, 0b01001010),
		[]uint64{4, 3, 5, 4, 1, 3, 3, 3, 3, 1, 1, 1, 5, 5, 3, 4}},
	{"ts/EncodeChannelsTest.Basic1Channel1Block", 8, [3]int64{2, 2, 1}, [3]int64{2, 2, 1},
		[]byte{
			1, 0, 0, 0,
			3, 0, 0, 1, 2, 0, 0, 0,
			0b0101, 0, 0, 0,
			0, 0, 0, 0,
			0, 0, 0, 0,
			4, 0, 0, 0,
			0, 0, 0, 0,
		},
		[]uint64{4, 0, 4, 0}},
	{"ts/DecodeChannelTest.EncodedBits32", 4, [3]int64{2, 1, 1}, [3]int64{2, 1, 1},
		oneChannel(4|32<<24, 2, 0, 1, 10, 20),
		[]uint64{10, 20}},
}

func TestCompressedSegmentationGolden(t *testing.T) {
	for _, tt := range csegGolden {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CompressedSegmentation(nil, tt.stored, tt.extent, 1, tt.elemSize, tt.block)
			if err != nil {
				t.Fatal(err)
			}
			if want := rawElems(tt.elemSize, tt.want...); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

// TestCompressedSegmentationRefused checks the malformed encodings of
// tensorstore's DecodeChannelTest (offsets, bit widths, truncation, block
// shapes that overflow) and a few of the chunk's own header.
func TestCompressedSegmentationRefused(t *testing.T) {
	good := []uint32{5 | 2<<24, 4, 12 | 1<<24, 11, 0b01100001, 3, 0, 4, 0, 5, 0, 0b1110, 1, 0, 3, 0}
	with := func(i int, v uint32) []uint32 { w := slices.Clone(good); w[i] = v; return w }
	small := [3]int64{2, 2, 1}
	tests := []struct {
		name   string
		stored []byte
		extent [3]int64
		block  [3]int64
	}{
		{"size not a multiple of 4", oneChannel(good...)[:4+4*len(good)-1], [3]int64{2, 2, 2}, small},
		{"truncated", oneChannel(good[:len(good)-1]...), [3]int64{2, 2, 2}, small},
		{"3 encoded bits", oneChannel(with(0, 5|3<<24)...), [3]int64{2, 2, 2}, small},
		{"33 encoded bits", oneChannel(with(0, 5|33<<24)...), [3]int64{2, 2, 2}, small},
		{"missing block headers", oneChannel(5|3<<24, 4, 12|1<<24), [3]int64{2, 2, 2}, small},
		{"encoded values offset", oneChannel(with(1, 16)...), [3]int64{2, 2, 2}, small},
		{"table offset", oneChannel(with(0, 16|2<<24)...), [3]int64{2, 2, 2}, small},
		{"missing encoded values", oneChannel(5|2<<24, 4, 0|1<<24, 11, 0b01100001, 3, 0, 4, 0, 5, 0), [3]int64{2, 2, 2}, small},
		{"block shape overflow 2^20", oneChannel(2|16<<24, 2, 0, 0), [3]int64{2, 2, 2}, [3]int64{1 << 20, 1 << 20, 1 << 20}},
		{"block shape overflow 2^22", oneChannel(2|16<<24, 2, 0, 0), [3]int64{2, 2, 2}, [3]int64{1 << 22, 1 << 22, 1 << 22}},
		{"value past its table", oneChannel(3|2<<24, 2, 0b11, 7), [3]int64{1, 1, 1}, [3]int64{1, 1, 1}},
		{"empty", nil, [3]int64{1, 1, 1}, [3]int64{1, 1, 1}},
		{"channel offset inside the offset table", le32Words(0, 2, 0, 2, 7), [3]int64{1, 1, 1}, [3]int64{1, 1, 1}},
		{"channel offset past the end", le32Words(9, 2, 0, 2, 7), [3]int64{1, 1, 1}, [3]int64{1, 1, 1}},
		{"zero block size", oneChannel(2, 2, 7), [3]int64{1, 1, 1}, [3]int64{0, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CompressedSegmentation(nil, tt.stored, tt.extent, 1, 8, tt.block)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("got %d bytes, error %v; want an error wrapping ErrCorrupt", len(got), err)
			}
		})
	}
}

// TestCompressedSegmentationChannels decodes two channels whose data share
// nothing, the second stored before the first.
func TestCompressedSegmentationChannels(t *testing.T) {
	stored := le32Words(
		8, 2, // channel 0 at word 8, channel 1 at word 2
		// channel 1: one 0-bit block, table at 2
		2, 2, 9,
		// padding
		0, 0, 0,
		// channel 0: the tensorstore BasicCached32 first block, 1 block of 2x2x1
		3|2<<24, 2, 0b01100001, 3, 4, 5,
	)
	got, err := CompressedSegmentation(nil, stored, [3]int64{2, 2, 1}, 2, 4, [3]int64{2, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := rawElems(4, 4, 3, 5, 4, 9, 9, 9, 9); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestCompressedSegmentationReusesDst: the result lands in dst's storage
// when it is large enough.
func TestCompressedSegmentationReusesDst(t *testing.T) {
	tt := csegGolden[0]
	dst := make([]byte, 100)
	got, err := CompressedSegmentation(dst, tt.stored, tt.extent, 1, tt.elemSize, tt.block)
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &dst[0] {
		t.Errorf("result does not reuse dst")
	}
}

// FuzzCompressedSegmentation: no input panics, and a decoded chunk always
// has exactly the promised size.
func FuzzCompressedSegmentation(f *testing.F) {
	for _, tt := range csegGolden {
		f.Add(tt.stored, uint8(tt.elemSize), uint8(1), uint8(tt.extent[0]), uint8(tt.extent[1]), uint8(tt.extent[2]),
			uint8(tt.block[0]), uint8(tt.block[1]), uint8(tt.block[2]))
	}
	f.Fuzz(func(t *testing.T, stored []byte, elemSize, channels, ex, ey, ez, bx, by, bz uint8) {
		es := 4
		if elemSize%2 == 1 {
			es = 8
		}
		extent := [3]int64{int64(ex%17) + 1, int64(ey%17) + 1, int64(ez%17) + 1}
		block := [3]int64{int64(bx%9) + 1, int64(by%9) + 1, int64(bz%9) + 1}
		nc := int(channels%3) + 1
		got, err := CompressedSegmentation(nil, stored, extent, nc, es, block)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if want := extent[0] * extent[1] * extent[2] * int64(nc*es); int64(len(got)) != want {
			t.Fatalf("decoded %d bytes, want %d", len(got), want)
		}
	})
}
