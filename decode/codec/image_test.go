package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"testing"
)

// encodePNG and encodeJPEG make inputs for the refusal tests and the fuzz
// seeds; the decoders' values are checked against PIL's in
// TestWrittenByPython.
func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func grayImage(w, h int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	return img
}

func rgbImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 5)
		if i%4 == 3 {
			img.Pix[i] = 0xff
		}
	}
	return img
}

func TestPNGValues(t *testing.T) {
	// 16-bit gray: big-endian samples in PNG, little-endian out.
	g := image.NewGray16(image.Rect(0, 0, 2, 3))
	for i := range 6 {
		g.SetGray16(i%2, i/2, color.Gray16{Y: uint16(0x0102 * (i + 1))})
	}
	got, err := PNG(nil, encodePNG(t, g), [3]int64{2, 3, 1}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x02, 0x01, 0x04, 0x02, 0x06, 0x03, 0x08, 0x04, 0x0a, 0x05, 0x0c, 0x06}
	if !bytes.Equal(got, want) {
		t.Errorf("got %x, want %x", got, want)
	}
	// RGB, 2x1x2 voxels: channels interleaved in the image, planar out.
	rgb := image.NewRGBA(image.Rect(0, 0, 2, 2))
	for i := range 4 {
		rgb.Set(i%2, i/2, color.RGBA{R: byte(i), G: byte(10 + i), B: byte(20 + i), A: 0xff})
	}
	got, err = PNG(nil, encodePNG(t, rgb), [3]int64{2, 1, 2}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}; !bytes.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestImagesRefused(t *testing.T) {
	gray := encodePNG(t, grayImage(4, 6))
	jgray := encodeJPEG(t, grayImage(4, 6))
	jrgb := encodeJPEG(t, rgbImage(4, 6))
	tests := []struct {
		name     string
		decode   func() ([]byte, error)
		corrupts bool // else unsupported
	}{
		{"png of another size", func() ([]byte, error) { return PNG(nil, gray, [3]int64{4, 6, 2}, 1, 1) }, true},
		{"png gray for 3 channels", func() ([]byte, error) { return PNG(nil, gray, [3]int64{4, 6, 1}, 3, 1) }, true},
		{"png 8-bit for uint16", func() ([]byte, error) { return PNG(nil, gray, [3]int64{4, 6, 1}, 1, 2) }, true},
		{"png RGB for 4 channels", func() ([]byte, error) {
			return PNG(nil, encodePNG(t, rgbImage(4, 6)), [3]int64{4, 6, 1}, 4, 1)
		}, true},
		{"png palette", func() ([]byte, error) {
			p := image.NewPaletted(image.Rect(0, 0, 4, 6), color.Palette{color.Black, color.White})
			return PNG(nil, encodePNG(t, p), [3]int64{4, 6, 1}, 3, 1)
		}, true},
		{"png truncated", func() ([]byte, error) { return PNG(nil, gray[:len(gray)-20], [3]int64{4, 6, 1}, 1, 1) }, true},
		{"png empty", func() ([]byte, error) { return PNG(nil, nil, [3]int64{4, 6, 1}, 1, 1) }, true},
		{"png huge header", func() ([]byte, error) {
			b := bytes.Clone(gray)
			copy(b[16:24], []byte{0x7f, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff})
			binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29])) // a valid IHDR
			return PNG(nil, b, [3]int64{4, 6, 1}, 1, 1)
		}, true},
		{"png 5 channels", func() ([]byte, error) { return PNG(nil, gray, [3]int64{4, 6, 1}, 5, 1) }, false},
		{"jpeg of another size", func() ([]byte, error) { return JPEG(nil, jgray, [3]int64{4, 3, 1}, 1) }, true},
		{"jpeg gray for 3 channels", func() ([]byte, error) { return JPEG(nil, jgray, [3]int64{4, 6, 1}, 3) }, true},
		{"jpeg colour for 1 channel", func() ([]byte, error) { return JPEG(nil, jrgb, [3]int64{4, 6, 1}, 1) }, true},
		{"jpeg truncated", func() ([]byte, error) { return JPEG(nil, jgray[:len(jgray)/2], [3]int64{4, 6, 1}, 1) }, true},
		{"jpeg empty", func() ([]byte, error) { return JPEG(nil, nil, [3]int64{4, 6, 1}, 1) }, true},
		{"jpeg 2 channels", func() ([]byte, error) { return JPEG(nil, jgray, [3]int64{4, 6, 1}, 2) }, false},
	}
	for _, tt := range tests {
		got, err := tt.decode()
		want := ErrUnsupported
		if tt.corrupts {
			want = ErrCorrupt
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: got %d bytes, %v; want an error wrapping %v", tt.name, len(got), err, want)
		}
	}
}

// TestImagesAnyShape: the format allows any width x height with the chunk's
// voxel count; the rows concatenated are the voxels.
func TestImagesAnyShape(t *testing.T) {
	img := grayImage(24, 1)
	want := bytes.Clone(img.Pix)
	got, err := PNG(nil, encodePNG(t, img), [3]int64{4, 3, 2}, 1, 1)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("png 24x1 as 4x3x2: got %v, %v; want %v", got, err, want)
	}
	if got, err := JPEG(nil, encodeJPEG(t, grayImage(6, 4)), [3]int64{4, 3, 2}, 1); err != nil || len(got) != 24 {
		t.Errorf("jpeg 6x4 as 4x3x2: got %d bytes, %v", len(got), err)
	}
}

func FuzzPNG(f *testing.F) {
	f.Add(encodePNG(f, grayImage(4, 6)), uint8(1), uint8(1))
	f.Add(encodePNG(f, rgbImage(4, 6)), uint8(3), uint8(1))
	f.Add(encodePNG(f, image.NewNRGBA64(image.Rect(0, 0, 4, 6))), uint8(4), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, channels, elemSize uint8) {
		c, es := int(channels%4)+1, int(elemSize%2)+1
		extent := [3]int64{4, 3, 2}
		got, err := PNG(nil, b, extent, c, es)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if len(got) != 24*c*es {
			t.Fatalf("decoded %d bytes, want %d", len(got), 24*c*es)
		}
	})
}

func FuzzJPEG(f *testing.F) {
	f.Add(encodeJPEG(f, grayImage(4, 6)), false)
	f.Add(encodeJPEG(f, rgbImage(4, 6)), true)
	f.Add(encodeJPEG(f, rgbImage(8, 3)), true)
	f.Fuzz(func(t *testing.T, b []byte, rgb bool) {
		c := 1
		if rgb {
			c = 3
		}
		got, err := JPEG(nil, b, [3]int64{4, 3, 2}, c)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if len(got) != 24*c {
			t.Fatalf("decoded %d bytes, want %d", len(got), 24*c)
		}
	})
}
