package codec

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"image"
	"math"
	"slices"
	"testing"
)

// benchExtent is the chunk every encoding benchmark decodes: the common
// 64^3 precomputed chunk.
var benchExtent = [3]int64{64, 64, 64}

// smoothVolume returns n voxels of an image-like field (smooth with noise),
// x fastest.
func smoothVolume(n int) []byte {
	v := make([]byte, n)
	seed := uint32(1)
	for i := range v {
		x, y, z := i%64, i/64%64, i/4096
		seed = seed*1664525 + 1013904223
		f := 128 + 60*math.Sin(float64(x)/5) + 50*math.Cos(float64(y+z)/7) + float64(seed>>28)
		v[i] = byte(min(max(f, 0), 255))
	}
	return v
}

// segmentation returns labels of a 64^3 chunk: blobs of ~6 voxels across,
// ids spread over the uint64 range, so 8^3 blocks hold a few ids each.
func segmentation() []uint64 {
	v := make([]uint64, 64*64*64)
	for i := range v {
		x, y, z := i%64, i/64%64, i/4096
		v[i] = uint64(x/6+(y/5)*11+(z/7)*127) * 0x9e3779b97f4a7c15
	}
	return v
}

// encodeCSeg is a plain compressed_segmentation encoder (one channel, no
// shared tables) for the benchmarks' input; the decoder's correctness is
// checked against independent encoders in the other tests.
func encodeCSeg(vals []uint64, extent, block [3]int64, elemSize int) []byte {
	ex, ey, ez := extent[0], extent[1], extent[2]
	bx, by, bz := block[0], block[1], block[2]
	gx, gy, gz := (ex+bx-1)/bx, (ey+by-1)/by, (ez+bz-1)/bz
	w := make([]uint32, 1+2*gx*gy*gz)
	w[0] = 1
	b := 0
	for z0 := int64(0); z0 < ez; z0 += bz {
		for y0 := int64(0); y0 < ey; y0 += by {
			for x0 := int64(0); x0 < ex; x0 += bx {
				var table []uint64
				codes := make([]int, bx*by*bz)
				for z := range bz {
					for y := range by {
						for x := range bx {
							xx, yy, zz := min(x0+x, ex-1), min(y0+y, ey-1), min(z0+z, ez-1)
							v := vals[(zz*ey+yy)*ex+xx]
							i := slices.Index(table, v)
							if i < 0 {
								i = len(table)
								table = append(table, v)
							}
							codes[(z*by+y)*bx+x] = i
						}
					}
				}
				nbits := 0
				for 1<<nbits < len(table) {
					nbits = map[int]int{0: 1, 1: 2, 2: 4, 4: 8, 8: 16, 16: 32}[nbits]
				}
				valuesAt := len(w) - 1
				enc := make([]uint32, (nbits*len(codes)+31)/32)
				for i, c := range codes {
					if nbits > 0 {
						enc[i*nbits/32] |= uint32(c) << (i * nbits % 32)
					}
				}
				w = append(w, enc...)
				tableAt := len(w) - 1
				for _, v := range table {
					w = append(w, uint32(v))
					if elemSize == 8 {
						w = append(w, uint32(v>>32))
					}
				}
				w[1+2*b] = uint32(tableAt) | uint32(nbits)<<24
				w[2+2*b] = uint32(valuesAt)
				b++
			}
		}
	}
	out := make([]byte, 0, 4*len(w))
	for _, x := range w {
		out = binary.LittleEndian.AppendUint32(out, x)
	}
	return out
}

func BenchmarkPrecomputedDecode(b *testing.B) {
	n := int(benchExtent[0] * benchExtent[1] * benchExtent[2])
	gray := smoothVolume(n)
	rgbImg := image.NewRGBA(image.Rect(0, 0, 64, 64*64))
	for i := range n {
		rgbImg.Pix[4*i], rgbImg.Pix[4*i+1], rgbImg.Pix[4*i+2], rgbImg.Pix[4*i+3] = gray[i], gray[(i+7)%n], 255-gray[i], 255
	}
	grayImg := &image.Gray{Pix: gray, Stride: 64, Rect: image.Rect(0, 0, 64, 64*64)}
	seg := segmentation()
	seg32 := make([]byte, 0, 4*n)
	seg64 := make([]byte, 0, 8*n)
	for _, v := range seg {
		seg32 = binary.LittleEndian.AppendUint32(seg32, uint32(v))
		seg64 = binary.LittleEndian.AppendUint64(seg64, v)
	}
	block := [3]int64{8, 8, 8}
	cases := []struct {
		name   string
		stored []byte
		size   int // decoded bytes
		decode func(dst, src []byte) ([]byte, error)
		want   []byte // when the decode is exact
	}{
		{"raw-uint8", gray, n, func(dst, src []byte) ([]byte, error) { return append(dst[:0], src...), nil }, gray},
		{"raw-gzip-uint8", gzipBytes(b, gray), n, func(dst, src []byte) ([]byte, error) { return gunzip(dst, src, n, n) }, gray},
		{"jpeg-gray", encodeJPEG(b, grayImg), n, func(dst, src []byte) ([]byte, error) { return JPEG(dst, src, benchExtent, 1) }, nil},
		{"jpeg-rgb", encodeJPEG(b, rgbImg), 3 * n, func(dst, src []byte) ([]byte, error) { return JPEG(dst, src, benchExtent, 3) }, nil},
		{"png-gray", encodePNG(b, grayImg), n, func(dst, src []byte) ([]byte, error) { return PNG(dst, src, benchExtent, 1, 1) }, gray},
		{"raw-uint64", seg64, 8 * n, func(dst, src []byte) ([]byte, error) { return append(dst[:0], src...), nil }, seg64},
		{"raw-gzip-uint64", gzipBytes(b, seg64), 8 * n, func(dst, src []byte) ([]byte, error) { return gunzip(dst, src, 8*n, 8*n) }, seg64},
		{"cseg-uint32", encodeCSeg(seg, benchExtent, block, 4), 4 * n, func(dst, src []byte) ([]byte, error) {
			return CompressedSegmentation(dst, src, benchExtent, 1, 4, block)
		}, seg32},
		{"cseg-uint64", encodeCSeg(seg, benchExtent, block, 8), 8 * n, func(dst, src []byte) ([]byte, error) {
			return CompressedSegmentation(dst, src, benchExtent, 1, 8, block)
		}, seg64},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dst, err := c.decode(nil, c.stored)
			if err != nil {
				b.Fatal(err)
			}
			if len(dst) != c.size || c.want != nil && !bytes.Equal(dst, c.want) {
				b.Fatalf("decoded %d bytes, not the %d expected", len(dst), c.size)
			}
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if dst, err = c.decode(dst, c.stored); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mvoxel/s")
			b.ReportMetric(float64(len(c.stored))/float64(c.size), "stored/decoded")
		})
	}
}

// gzipBytes compresses b with compress/gzip at level 9.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, 9)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
