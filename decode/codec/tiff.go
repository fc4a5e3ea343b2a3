package codec

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/image/tiff/lzw"

	"github.com/volfs/volfs/internal/mem"
)

// The TIFF compressions that tifffile's reference sets name in a Zarr v2
// "compressor" (TiffFile.aszarr().write_fsspec): TIFF compression 5 as
// {"id": "imagecodecs_lzw"} and 32773 as {"id": "imagecodecs_packbits"}.
// Deflate (8) it names "zlib", registered in codecs.go. Every other
// imagecodecs_* id (JPEG, JPEG 2000, WebP, the predictor filters
// imagecodecs_delta and imagecodecs_floatpred, ...) is refused by
// NewStage with a message saying so.
func init() {
	registerCompressor("imagecodecs_lzw", decodeTIFFLZW)
	registerCompressor("imagecodecs_packbits", decodePackBits)
}

// tiffPrefix is how imagecodecs' numcodecs ids begin.
const tiffPrefix = "imagecodecs_"

// unsupportedImagecodecs is NewStage's refusal of an imagecodecs codec
// volfs does not decode.
func unsupportedImagecodecs(name string) error {
	return fmt.Errorf("codec %q: an imagecodecs (TIFF) codec volfs does not decode; of these it reads imagecodecs_lzw and imagecodecs_packbits: %w", name, ErrUnsupported)
}

// decodeTIFFLZW is the "imagecodecs_lzw" decoder: TIFF's LZW (TIFF 6.0
// section 13), MSB-first codes of 9 to 12 bits that widen one code
// early. golang.org/x/image/tiff/lzw implements that quirk; the "old
// style" LSB-first LZW of pre-6.0 writers is not read (it is corrupt
// here). The output is bounded by limit.
func decodeTIFFLZW(dst, src []byte, limit int) ([]byte, error) {
	r := lzw.NewReader(bytes.NewReader(src), lzw.MSB, 8)
	defer r.Close()
	out, err := readAllLimit(dst, r, max(limit, 0), make([]byte, 1))
	if err != nil {
		return nil, corrupt("imagecodecs_lzw", err)
	}
	return out, nil
}

// decodePackBits is the "imagecodecs_packbits" decoder: TIFF's PackBits
// (TIFF 6.0 section 9). Each header byte n is followed by n+1 literal
// bytes (0 <= n <= 127), or by one byte to repeat 1-n times (-127 <= n <=
// -1); -128 is skipped. A run that would take the output past limit, or
// that the input ends in the middle of, is corrupt.
func decodePackBits(dst, src []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	out := dst[:0]
	if cap(out) < limit {
		out = mem.Make(limit)[:0]
	}
	for i := 0; i < len(src); {
		n := int(int8(src[i]))
		i++
		switch {
		case n >= 0:
			if len(src)-i < n+1 {
				return nil, corrupt("imagecodecs_packbits", fmt.Errorf("literal run of %d bytes cut short at byte %d", n+1, len(src)))
			}
			if len(out)+n+1 > limit {
				return nil, corrupt("imagecodecs_packbits", errTooLong)
			}
			out = append(out, src[i:i+n+1]...)
			i += n + 1
		case n != -128:
			if i == len(src) {
				return nil, corrupt("imagecodecs_packbits", errors.New("repeat run cut short at the end"))
			}
			if len(out)+1-n > limit {
				return nil, corrupt("imagecodecs_packbits", errTooLong)
			}
			b := src[i]
			i++
			for range 1 - n {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// isImagecodecs reports whether name is one of imagecodecs' numcodecs ids.
func isImagecodecs(name string) bool { return strings.HasPrefix(name, tiffPrefix) }
