package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"
)

// pngChannels maps a PNG colour type (IHDR byte 9) to the number of
// channels it stores: gray, gray+alpha, RGB, RGBA. Palette images (type
// 3) are not channels of a volume and are refused.
var pngChannels = map[byte]int{0: 1, 4: 2, 2: 3, 6: 4}

// PNG decodes a precomputed png chunk (uint8 or uint16, elemSize 1 or
// 2; 1 to 4 channels) and appends the raw layout to dst[:0]: little-endian
// elements, x fastest, then y, z and channel.
//
// As for jpeg, the image's rows concatenated are the chunk's voxels, so any
// width and height whose product is the voxel count is accepted. The PNG's
// colour type must hold exactly channels samples per pixel (gray,
// gray+alpha, RGB, RGBA) at 8*elemSize bits; 16-bit samples, big-endian in
// PNG, come out little-endian.
//
// The header is read before any pixel: an image of another size, colour
// type or bit depth is refused with an error wrapping ErrCorrupt without
// decoding it, so no allocation is sized by the input beyond what extent
// allows.
func PNG(dst, src []byte, extent [3]int64, channels, elemSize int) ([]byte, error) {
	if channels < 1 || channels > 4 || (elemSize != 1 && elemSize != 2) {
		return nil, fmt.Errorf("png: %d channels of %d bytes: %w", channels, elemSize, ErrUnsupported)
	}
	voxels, ok := checkedVolume(extent)
	if !ok || voxels > MaxChunkBytes/int64(channels*elemSize) {
		return nil, fmt.Errorf("%w: png: chunk of %v voxels out of range", ErrCorrupt, extent)
	}
	// The signature (8 bytes), then the IHDR chunk: length, "IHDR", width,
	// height, bit depth, colour type.
	if len(src) < 8+8+10 || string(src[12:16]) != "IHDR" {
		return nil, fmt.Errorf("%w: png: no IHDR header", ErrCorrupt)
	}
	depth, ctype := int(src[24]), src[25]
	if pngChannels[ctype] != channels || depth != 8*elemSize {
		return nil, fmt.Errorf("%w: png: colour type %d at %d bits, want %d channels of %d bits",
			ErrCorrupt, ctype, depth, channels, 8*elemSize)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: png: %v", ErrCorrupt, err)
	}
	if int64(cfg.Width)*int64(cfg.Height) != voxels {
		return nil, fmt.Errorf("%w: png: image is %dx%d, want %d pixels for a %v chunk",
			ErrCorrupt, cfg.Width, cfg.Height, voxels, extent)
	}
	img, err := png.Decode(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: png: %v", ErrCorrupt, err)
	}

	// image/png gives Gray/Gray16 for gray, RGBA/RGBA64 for RGB (alpha
	// opaque) and NRGBA/NRGBA64 for gray+alpha (gray in R, G and B) and
	// RGBA, with 16-bit samples big-endian: so every case is a packed pixel
	// array from which channel c is the sample at pick[c]. (Gray with a
	// tRNS chunk comes as NRGBA too: its gray is sample 0.)
	var pix []byte
	var stride, bpp int
	switch m := img.(type) {
	case *image.Gray:
		pix, stride, bpp = m.Pix, m.Stride, 1
	case *image.Gray16:
		pix, stride, bpp = m.Pix, m.Stride, 2
	case *image.RGBA:
		pix, stride, bpp = m.Pix, m.Stride, 4
	case *image.NRGBA:
		pix, stride, bpp = m.Pix, m.Stride, 4
	case *image.RGBA64:
		pix, stride, bpp = m.Pix, m.Stride, 8
	case *image.NRGBA64:
		pix, stride, bpp = m.Pix, m.Stride, 8
	default:
		return nil, fmt.Errorf("%w: png: decoded to %T", ErrCorrupt, img)
	}
	samples := bpp / elemSize
	pick := [][]int{nil, {0}, {0, 3}, {0, 1, 2}, {0, 1, 2, 3}}[channels]
	if samples < channels {
		return nil, fmt.Errorf("%w: png: decoded to %T for %d channels", ErrCorrupt, img, channels)
	}

	n := int(voxels)
	size := n * channels * elemSize
	out := dst[:0]
	if cap(out) < size {
		out = make([]byte, size)
	}
	out = out[:size]
	w, h := cfg.Width, cfg.Height
	for c, s := range pick {
		plane := out[c*n*elemSize : (c+1)*n*elemSize]
		for y := range h {
			row := pix[y*stride : y*stride+w*bpp]
			dstRow := plane[y*w*elemSize : (y+1)*w*elemSize]
			if elemSize == 1 {
				for x := range w {
					dstRow[x] = row[x*bpp+s]
				}
				continue
			}
			for x := range w {
				v := binary.BigEndian.Uint16(row[x*bpp+2*s:])
				binary.LittleEndian.PutUint16(dstRow[2*x:], v)
			}
		}
	}
	return out, nil
}
