package codec

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
)

// JPEG decodes a precomputed jpeg chunk (uint8, 1 or 3 channels) and
// appends the raw layout to dst[:0]: x fastest, then y, z and channel, each
// channel a plane of extent[0] x extent[1] x extent[2] bytes.
//
// The stored image's rows, concatenated, are the chunk's voxels in x, y, z
// order; neuroglancer's writers make it extent[0] wide and
// extent[1]*extent[2] high, and the format allows any width and height
// whose product is the voxel count, so that is all this checks. One
// channel is a grayscale JPEG; three are a colour one whose pixels hold the
// channels interleaved, converted from YCbCr to RGB as libjpeg does (see
// ycbcrToPlanes).
//
// The header is read before any pixel: an image of another size or number
// of components is refused with an error wrapping ErrCorrupt without
// decoding it, so no allocation is sized by the input beyond what extent
// allows.
func JPEG(dst, src []byte, extent [3]int64, channels int) ([]byte, error) {
	if channels != 1 && channels != 3 {
		return nil, fmt.Errorf("jpeg: %d channels: %w", channels, ErrUnsupported)
	}
	voxels, ok := checkedVolume(extent)
	if !ok || voxels > MaxChunkBytes/int64(channels) {
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
		ycbcrToPlanes(out, m)
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

// ycbcrToPlanes converts a decoded colour JPEG into three planes of R, G
// and B, the way libjpeg(-turbo) does by default, which is what PIL,
// CloudVolume and neuroglancer decode with: chroma subsampled 2x1 or 2x2
// is upsampled with libjpeg's "fancy" triangular filter (image/jpeg would
// replicate each chroma sample, up to ~12 levels off at colour edges), and
// the colour conversion uses libjpeg's fixed-point constants. Other
// subsampling ratios replicate chroma samples.
func ycbcrToPlanes(out []byte, m *image.YCbCr) {
	w, h := m.Rect.Dx(), m.Rect.Dy()
	n := w * h
	r, g, b := out[:n], out[n:2*n], out[2*n:3*n]
	var cb, cr []byte // full-resolution chroma, when upsampled here
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio420:
		cb, cr = fancyUpsample(m.Cb, m.CStride, w, h, true), fancyUpsample(m.Cr, m.CStride, w, h, true)
	case image.YCbCrSubsampleRatio422:
		cb, cr = fancyUpsample(m.Cb, m.CStride, w, h, false), fancyUpsample(m.Cr, m.CStride, w, h, false)
	}
	for y := range h {
		for x := range w {
			yy := int32(m.Y[m.YOffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)])
			var u, v int32
			if cb != nil {
				u, v = int32(cb[y*w+x]), int32(cr[y*w+x])
			} else {
				j := m.COffset(m.Rect.Min.X+x, m.Rect.Min.Y+y)
				u, v = int32(m.Cb[j]), int32(m.Cr[j])
			}
			i := y*w + x
			r[i], g[i], b[i] = libjpegRGB(yy, u-128, v-128)
		}
	}
}

// libjpegRGB is libjpeg's jdcolor.c YCbCr to RGB conversion: 16-bit fixed
// point, rounded, clamped.
func libjpegRGB(y, cb, cr int32) (r, g, b byte) {
	const (
		half = 1 << 15
		fixR = 91881  // FIX(1.40200)
		fixG = 22554  // FIX(0.34414)
		fixH = 46802  // FIX(0.71414)
		fixB = 116130 // FIX(1.77200)
	)
	clamp := func(v int32) byte { return byte(min(max(v, 0), 255)) }
	return clamp(y + (fixR*cr+half)>>16), clamp(y + (-fixG*cb-fixH*cr+half)>>16), clamp(y + (fixB*cb+half)>>16)
}

// fancyUpsample doubles a chroma plane of the image's top-left-anchored
// subsampled size horizontally (and vertically when vert) into w x h
// samples, with libjpeg's jdsample.c h2v1/h2v2 fancy upsampling: each
// output sample is 3/4 of the nearer input sample plus 1/4 of the next
// one out, per axis, with libjpeg's rounding biases; edge samples are
// replicated beyond the plane.
func fancyUpsample(plane []byte, stride, w, h int, vert bool) []byte {
	cw := (w + 1) / 2
	ch := h
	if vert {
		ch = (h + 1) / 2
	}
	out := make([]byte, w*h)
	sums := make([]int32, cw)
	row := make([]byte, 2*cw)
	at := func(y, x int) int32 { return int32(plane[y*stride+x]) }
	for y := range h {
		// Column sums of this output row: vertically 3/4 nearer + 1/4
		// further (scaled by 4), or the row itself (scaled by 4) for 2x1.
		cy := y
		if vert {
			cy = y / 2
			other := cy - 1
			if y%2 == 1 {
				other = cy + 1
			}
			other = min(max(other, 0), ch-1)
			for x := range cw {
				sums[x] = 3*at(cy, x) + at(other, x)
			}
		} else {
			for x := range cw {
				sums[x] = 4 * at(cy, x)
			}
		}
		// Horizontally the same 3/4 + 1/4, with jdsample.c's rounding
		// biases: 8 and 7 over 16 for h2v2, 1 and 2 over 4 for h2v1.
		for x := range cw {
			prev, next := sums[max(x-1, 0)], sums[min(x+1, cw-1)]
			if vert {
				row[2*x] = byte((3*sums[x] + prev + 8) >> 4)
				row[2*x+1] = byte((3*sums[x] + next + 7) >> 4)
			} else {
				s, p, n := sums[x]/4, prev/4, next/4
				row[2*x] = byte((3*s + p + 1) >> 2)
				row[2*x+1] = byte((3*s + n + 2) >> 2)
			}
		}
		copy(out[y*w:(y+1)*w], row)
	}
	return out
}
