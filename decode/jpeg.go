package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
)

// decodeJPEG decodes a precomputed jpeg chunk (uint8, 1 or 3 channels) and
// appends the raw layout to dst[:0]: x fastest, then y, z and channel, each
// channel a plane of extent[0] x extent[1] x extent[2] bytes.
//
// The stored image's rows, concatenated, are the chunk's voxels in x, y, z
// order; neuroglancer's writers make it extent[0] wide and
// extent[1]*extent[2] high, and the format allows any width and height
// whose product is the voxel count, so that is all this checks. One
// channel is a grayscale JPEG; three are a colour one whose pixels hold the
// channels interleaved, converted from YCbCr to RGB by image/jpeg.
//
// The header is read before any pixel: an image of another size or number
// of components is refused with an error wrapping ErrCorrupt without
// decoding it, so no allocation is sized by the input beyond what extent
// allows.
func decodeJPEG(dst, src []byte, extent [3]int64, channels int) ([]byte, error) {
	if channels != 1 && channels != 3 {
		return nil, fmt.Errorf("jpeg: %d channels: %w", channels, ErrUnsupported)
	}
	voxels, ok := checkedVolume(extent)
	if !ok || voxels > maxChunkBytes/int64(channels) {
		return nil, fmt.Errorf("%w: jpeg: chunk of %v voxels out of range", ErrCorrupt, extent)
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: jpeg: %v", ErrCorrupt, err)
	}
	if int64(cfg.Width)*int64(cfg.Height) != voxels {
		return nil, fmt.Errorf("%w: jpeg: image is %dx%d, want %d pixels for a %v chunk",
			ErrCorrupt, cfg.Width, cfg.Height, voxels, extent)
	}
	want := color.GrayModel
	if channels == 3 {
		want = color.YCbCrModel
	}
	if cfg.ColorModel != want {
		return nil, fmt.Errorf("%w: jpeg: image has %s pixels, want %d channels", ErrCorrupt, modelName(cfg.ColorModel), channels)
	}
	img, err := jpeg.Decode(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: jpeg: %v", ErrCorrupt, err)
	}
	n := int(voxels)
	out := dst[:0]
	if cap(out) < n*channels {
		out = make([]byte, n*channels)
	}
	out = out[:n*channels]
	switch m := img.(type) {
	case *image.Gray:
		w := m.Rect.Dx()
		for y := range m.Rect.Dy() {
			copy(out[y*w:(y+1)*w], m.Pix[y*m.Stride:])
		}
	case *image.YCbCr:
		r, g, b := out[:n], out[n:2*n], out[2*n:]
		w := m.Rect.Dx()
		for y := range m.Rect.Dy() {
			for x := range w {
				i := m.YOffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				j := m.COffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				r[y*w+x], g[y*w+x], b[y*w+x] = color.YCbCrToRGB(m.Y[i], m.Cb[j], m.Cr[j])
			}
		}
	default:
		// DecodeConfig and Decode agree on the colour model.
		return nil, fmt.Errorf("%w: jpeg: decoded to %T", ErrCorrupt, img)
	}
	return out, nil
}

// modelName names a colour model in an error message.
func modelName(m color.Model) string {
	switch m {
	case color.GrayModel:
		return "grayscale"
	case color.YCbCrModel:
		return "YCbCr"
	case color.CMYKModel:
		return "CMYK"
	}
	return fmt.Sprintf("%T", m)
}
