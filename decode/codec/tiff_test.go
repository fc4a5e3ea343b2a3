package codec

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestPackBitsSpecExample decodes the example of TIFF 6.0 section 9
// (PackBits) and checks every cut and every too small limit is corrupt.
func TestPackBitsSpecExample(t *testing.T) {
	src := []byte{0xFE, 0xAA, 0x02, 0x80, 0x00, 0x2A, 0xFD, 0xAA, 0x03, 0x80, 0x00, 0x2A, 0x22, 0xF7, 0xAA}
	want := []byte{0xAA, 0xAA, 0xAA, 0x80, 0x00, 0x2A, 0xAA, 0xAA, 0xAA, 0xAA, 0x80, 0x00, 0x2A, 0x22, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA, 0xAA}
	dec := mustCodec(t, "imagecodecs_packbits")
	got, err := dec(nil, src, len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got %x, %v; want %x", got, err, want)
	}
	// -128 is a no-op, wherever it stands.
	if got, err := dec(nil, append([]byte{0x80}, append(src, 0x80)...), len(want)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with no-ops: got %x, %v", got, err)
	}
	for n := range len(want) {
		if _, err := dec(nil, src, n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("limit %d: %v, want ErrCorrupt", n, err)
		}
	}
	for _, cut := range []int{1, 3, 4, 7, 10, 14} {
		if _, err := dec(nil, src[:cut], len(want)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d: %v, want ErrCorrupt", cut, err)
		}
	}
	// A run that repeats past the limit never grows the output.
	if _, err := dec(make([]byte, 0, 4), []byte{0x81, 0x55}, 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("repeat of 128 into 4: %v, want ErrCorrupt", err)
	}
}

// tiffLZWPlain is what testdata/tiff_lzw.bin decodes to: 32 rows of 64
// bytes, written by tifffile and compressed by libtiff's `tiffcp -c lzw
// -r 32`. The stream has more than 1024 codes, so it crosses TIFF LZW's
// early code-width changes at 511 and 1023.
func tiffLZWPlain() []byte {
	b := make([]byte, 2048)
	for i := range b {
		b[i] = byte((i*i*31 + i*7) % 251)
	}
	return b
}

// TestTIFFLZWLibtiff decodes a strip libtiff compressed and checks
// that a limit one byte short and every truncation are corrupt.
func TestTIFFLZWLibtiff(t *testing.T) {
	src, err := os.ReadFile("testdata/tiff_lzw.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := tiffLZWPlain()
	dec := mustCodec(t, "imagecodecs_lzw")
	got, err := dec(nil, src, len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, %v; want %d bytes equal", len(got), err, len(want))
	}
	if _, err := dec(nil, src, len(want)-1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("limit %d: %v, want ErrCorrupt", len(want)-1, err)
	}
	for _, cut := range []int{0, 1, len(src) / 2, len(src) - 2} {
		if got, err := dec(nil, src[:cut], len(want)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d: %d bytes, %v; want ErrCorrupt", cut, len(got), err)
		}
	}
}

// TestImagecodecsRefused checks that a TIFF codec volfs does not decode
// is refused with a message naming it and saying what it is.
func TestImagecodecsRefused(t *testing.T) {
	for _, name := range []string{"imagecodecs_jpeg", "imagecodecs_delta", "imagecodecs_jpeg2k"} {
		_, err := NewStage(name, Config{Params: []byte(`{"id": "` + name + `", "tables": null}`)})
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s: %v, want ErrUnsupported", name, err)
		}
		for _, part := range []string{`"` + name + `"`, "TIFF", "imagecodecs_lzw"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: %q does not say %q", name, err, part)
			}
		}
	}
}

func FuzzTIFFLZW(f *testing.F) {
	if src, err := os.ReadFile("testdata/tiff_lzw.bin"); err == nil {
		f.Add(src, 2048)
	}
	fuzzCodec(f, "imagecodecs_lzw")
}

func FuzzPackBits(f *testing.F) {
	f.Add([]byte{0xFE, 0xAA, 0x02, 0x80, 0x00, 0x2A, 0xFD, 0xAA, 0x03, 0x80, 0x00, 0x2A, 0x22, 0xF7, 0xAA}, 24)
	fuzzCodec(f, "imagecodecs_packbits")
}
