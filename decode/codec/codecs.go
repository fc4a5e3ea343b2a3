package codec

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/volfs/volfs/internal/mem"
)

// The numcodecs and Zarr v3 codecs that are one library call each; blosc,
// which volfs implements itself, is in blosc.go.
func init() {
	registerCompressor("zlib", decodeZlib)
	registerCompressor("bz2", decodeBz2)
	registerCompressor("zstd", decodeZstd)
	registerCompressor("lz4", decodeLZ4)
}

// errTooLong reports a stream that decodes to more than its limit.
var errTooLong = errors.New("stream decodes to more than the chunk size")

// corrupt wraps err, from the named codec, as ErrCorrupt.
func corrupt(codec string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, codec, err)
}

// readAllLimit appends everything r yields to dst[:0] and returns it,
// refusing a stream of more than limit bytes with errTooLong. When dst
// holds less than limit it allocates limit bytes once: chunks nearly
// always decode to exactly the size their metadata promises, and growing
// a buffer step by step would allocate about twice that. probe is one
// byte of scratch (it escapes to the heap, so pooled callers pass their
// own).
func readAllLimit(dst []byte, r io.Reader, limit int, probe []byte) ([]byte, error) {
	out := dst[:0]
	if cap(out) < limit {
		out = mem.Make(limit)[:0]
	}
	for {
		end := min(cap(out), limit)
		if len(out) == end {
			// Full: the stream must end here.
			n, err := io.ReadFull(r, probe[:1])
			switch {
			case n > 0:
				return nil, errTooLong
			case err == io.EOF:
				return out, nil
			default:
				return nil, err
			}
		}
		n, err := r.Read(out[len(out):end])
		out = out[:len(out)+n]
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// zlibInflate decodes the zlib stream (RFC 1950) src into dst[:0], at most
// limit bytes, and checks its Adler-32. Bytes after the checksum are
// ignored, as zlib's own decoder and Python's do. When dst holds less than
// limit it allocates limit bytes once: chunks nearly always decode to
// exactly the size their metadata promises.
func zlibInflate(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < 2 {
		return nil, io.ErrUnexpectedEOF
	}
	cmf, flg := src[0], src[1]
	switch {
	case cmf&0x0f != 8 || cmf>>4 > 7 || (uint16(cmf)<<8|uint16(flg))%31 != 0:
		return nil, errors.New("bad zlib header")
	case flg&0x20 != 0:
		return nil, errors.New("zlib stream needs a preset dictionary")
	}
	limit = max(limit, 0)
	out := dst[:0]
	if cap(out) < limit {
		out = mem.Make(limit)[:0]
	}
	n, used, err := inflate(out[:limit], src[2:])
	switch {
	case err == errInflateFull:
		return nil, errTooLong
	case err != nil:
		return nil, err
	}
	out = out[:n]
	sum := src[2+used:]
	if len(sum) < 4 {
		return nil, fmt.Errorf("zlib checksum: %w", io.ErrUnexpectedEOF)
	}
	if got, want := adler32.Checksum(out), binary.BigEndian.Uint32(sum); got != want {
		return nil, fmt.Errorf("zlib checksum %08x, stored %08x", got, want)
	}
	return out, nil
}

// decodeZlib is the "zlib" decoder.
func decodeZlib(dst, src []byte, limit int) ([]byte, error) {
	out, err := zlibInflate(dst, src, limit)
	if err != nil {
		return nil, corrupt("zlib", err)
	}
	return out, nil
}

// zlibDecodeExact decodes the zlib stream src into exactly len(dst) bytes.
func zlibDecodeExact(dst, src []byte) error {
	out, err := zlibInflate(dst[:0:len(dst)], src, len(dst))
	if err != nil {
		return err
	}
	if len(out) != len(dst) {
		return fmt.Errorf("zlib stream decodes to %d bytes, want %d", len(out), len(dst))
	}
	return nil
}

// decodeBz2 is the "bz2" decoder: a bzip2 stream, possibly several
// concatenated. The standard library's reader cannot be reset, so each
// call allocates its tables (about 4 bytes per byte of bzip2 block size,
// at most 3.6 MB).
func decodeBz2(dst, src []byte, limit int) ([]byte, error) {
	out, err := readAllLimit(dst, bzip2.NewReader(bytes.NewReader(src)), limit, make([]byte, 1))
	if err != nil {
		return nil, corrupt("bz2", err)
	}
	return out, nil
}

// zstdDecoder is the one zstd decoder every chunk shares: DecodeAll runs
// up to GOMAXPROCS decodes at once without allocating per call. With the
// cap limit on, DecodeAll never grows the buffer it is given, so the
// caller's allocation bounds the output.
var zstdDecoder = func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxChunkBytes),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic("decode: zstd: " + err.Error())
	}
	return d
}()

// zstdContentSize walks the frames of src by their headers and block
// headers, without decoding, and returns the sum of their declared content
// sizes; known is false when some frame does not declare its size.
func zstdContentSize(src []byte) (total uint64, known bool, err error) {
	if len(src) == 0 {
		return 0, false, io.ErrUnexpectedEOF
	}
	known = true
	for len(src) > 0 {
		var h zstd.Header
		if err := h.Decode(src); err != nil {
			return 0, false, err
		}
		if h.Skippable {
			n := uint64(h.HeaderSize) + uint64(h.SkippableSize)
			if n > uint64(len(src)) {
				return 0, false, io.ErrUnexpectedEOF
			}
			src = src[n:]
			continue
		}
		if !h.HasFCS {
			return 0, false, nil
		}
		total += h.FrameContentSize
		if total > MaxChunkBytes {
			return total, true, nil
		}
		src = src[h.HeaderSize:]
		for last := false; !last; {
			if len(src) < 3 {
				return 0, false, io.ErrUnexpectedEOF
			}
			bh := uint32(src[0]) | uint32(src[1])<<8 | uint32(src[2])<<16
			src = src[3:]
			last = bh&1 != 0
			size := int(bh >> 3)
			switch (bh >> 1) & 3 {
			case 1: // RLE: one byte repeated size times
				size = 1
			case 3:
				return 0, false, errors.New("reserved block type")
			}
			if len(src) < size {
				return 0, false, io.ErrUnexpectedEOF
			}
			src = src[size:]
		}
		if h.HasCheckSum {
			if len(src) < 4 {
				return 0, false, io.ErrUnexpectedEOF
			}
			src = src[4:]
		}
	}
	return total, known, nil
}

// decodeZstd is the "zstd" decoder: one or more zstd frames. When every
// frame declares its content size (numcodecs, zarr-python and c-blosc
// always write it) the output is allocated once at that size, after
// checking it against limit; otherwise the output buffer is limit bytes
// and decoding stops with an error at the first block that overflows it.
// In that case the library may have grown the buffer once before it
// notices, so refusing such a bomb costs up to about 2.5 times limit.
func decodeZstd(dst, src []byte, limit int) ([]byte, error) {
	total, known, err := zstdContentSize(src)
	if err != nil {
		return nil, corrupt("zstd", err)
	}
	size := limit
	if known {
		if total > uint64(limit) {
			return nil, corrupt("zstd", fmt.Errorf("frames declare %d bytes, more than the chunk size %d", total, limit))
		}
		size = int(total)
	}
	out := dst[:0]
	if cap(out) < size {
		out = mem.Make(size)[:0]
	}
	// The cap limit makes DecodeAll refuse to produce more than cap(out).
	out, err = zstdDecoder.DecodeAll(src, out[:0:min(cap(out), limit)])
	if err != nil {
		return nil, corrupt("zstd", err)
	}
	return out, nil
}

// zstdDecodeExact decodes the zstd frames of src into exactly len(dst)
// bytes.
func zstdDecodeExact(dst, src []byte) error {
	out, err := decodeZstd(dst[:0:len(dst)], src, len(dst))
	if err != nil {
		return err
	}
	if len(out) != len(dst) {
		return fmt.Errorf("zstd stream decodes to %d bytes, want %d", len(out), len(dst))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}

// decodeLZ4 is the "lz4" decoder with numcodecs' framing: the decoded size
// as a 4-byte little-endian integer, then one raw LZ4 block.
func decodeLZ4(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < 4 {
		return nil, corrupt("lz4", io.ErrUnexpectedEOF)
	}
	n := int64(int32(binary.LittleEndian.Uint32(src)))
	if n < 0 || n > int64(limit) {
		return nil, corrupt("lz4", fmt.Errorf("header declares %d bytes, chunk size is %d", n, limit))
	}
	out := dst[:0]
	if cap(out) < int(n) {
		out = mem.Make(int(n))[:0]
	}
	out = out[:n]
	if n == 0 {
		return out, nil
	}
	if err := lz4DecodeExact(out, src[4:]); err != nil {
		return nil, corrupt("lz4", err)
	}
	return out, nil
}

// lz4DecodeExact decodes the raw LZ4 block src into exactly len(dst)
// bytes.
func lz4DecodeExact(dst, src []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return err
	}
	if n != len(dst) {
		return fmt.Errorf("lz4 block decodes to %d bytes, want %d", n, len(dst))
	}
	return nil
}
