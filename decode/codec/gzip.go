package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/volfs/volfs/internal/mem"
)

func init() {
	registerCompressor("gzip", func(dst, src []byte, limit int) ([]byte, error) {
		return gunzip(dst, src, limit, limit)
	})
}

// TransportGzip reports whether an object fetched from key with the declared
// Content-Encoding is gzip-compressed as transport, on top of the format's
// own encoding: when the server says "gzip", or when the object is a ".gz"
// object standing for its plain key (CloudVolume's convention on disk). Any
// other content encoding is refused rather than guessed.
func TransportGzip(contentEncoding, key string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(contentEncoding)) {
	case "gzip", "x-gzip":
		return true, nil
	case "", "identity":
		return strings.HasSuffix(key, ".gz"), nil
	default:
		return false, fmt.Errorf("content encoding %q: %w", contentEncoding, ErrUnsupported)
	}
}

// Gunzip decompresses the gzip stream src (all members). want is the
// expected decoded size, used to allocate once (0 takes it from the
// stream's trailer, which a single-member stream of less than 4 GiB states
// exactly); a stream that turns out longer is decoded again into a buffer
// at least twice as large. Output longer than limit bytes is refused so
// that a small object cannot expand without bound. Errors wrap
// ErrCorrupt.
func Gunzip(src []byte, want, limit int) ([]byte, error) {
	return gunzip(nil, src, want, limit)
}

// gunzip is Gunzip decoding into dst's array when it holds the size.
func gunzip(dst, src []byte, want, limit int) ([]byte, error) {
	limit = max(limit, 0)
	isize := 0
	if len(src) >= 18 {
		isize = int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	}
	size := want
	if size <= 0 {
		size = isize
	}
	size = max(0, min(size, limit))
	for {
		out := dst[:0]
		if cap(out) < size {
			// From the pool (not zeroed: gunzipMembers returns only
			// what it wrote), where the chunks the cache gave back
			// are: a chunk whose transport gzip is removed here is
			// its own buffer's next user.
			out = mem.Get(size)[:0]
		}
		n, err := gunzipMembers(out[:size], src)
		switch {
		case err == errInflateFull && size < limit:
			// want was short: start over in a larger buffer, which is
			// rarer and simpler than resuming a stream.
			size = min(limit, max(2*size, isize, 4096))
			continue
		case err == errInflateFull:
			return nil, fmt.Errorf("%w: gzip: stream expands beyond %d bytes", ErrCorrupt, limit)
		case err != nil:
			return nil, corrupt("gzip", err)
		}
		return out[:n], nil
	}
}

// gunzipMembers decodes the gzip members that make up src, one after the
// other, into out and returns how many bytes they decode to. Each member's
// CRC-32 and size are checked; anything after a member but another member
// is an error, as it is to gzip(1). A stream too large for out fails with
// errInflateFull.
func gunzipMembers(out, src []byte) (int, error) {
	o := 0
	for {
		h, err := gzipHeaderLen(src)
		if err != nil {
			return 0, err
		}
		n, used, err := inflate(out[o:], src[h:])
		if err != nil {
			return 0, err
		}
		trailer := src[h+used:]
		if len(trailer) < 8 {
			return 0, fmt.Errorf("trailer: %w", io.ErrUnexpectedEOF)
		}
		if got, want := crc32.ChecksumIEEE(out[o:o+n]), binary.LittleEndian.Uint32(trailer); got != want {
			return 0, fmt.Errorf("checksum %08x, stored %08x", got, want)
		}
		if got, want := uint32(n), binary.LittleEndian.Uint32(trailer[4:]); got != want {
			return 0, fmt.Errorf("decoded %d bytes, trailer says %d", got, want)
		}
		o += n
		if src = trailer[8:]; len(src) == 0 {
			return o, nil
		}
	}
}

// gzip header flags (RFC 1952 2.3.1).
const (
	gzipFHCRC    = 1 << 1
	gzipFEXTRA   = 1 << 2
	gzipFNAME    = 1 << 3
	gzipFCOMMENT = 1 << 4
	gzipReserved = 0xe0
)

// errGzipHeaderTruncated reports a gzip member header cut short.
var errGzipHeaderTruncated = fmt.Errorf("header: %w", io.ErrUnexpectedEOF)

// gzipHeaderLen checks the gzip member header at the start of src (RFC
// 1952) and returns its length: where the deflate stream starts.
func gzipHeaderLen(src []byte) (int, error) {
	if len(src) < 10 {
		return 0, errGzipHeaderTruncated
	}
	if src[0] != 0x1f || src[1] != 0x8b || src[2] != 8 {
		return 0, errors.New("not a gzip member (bad magic or method)")
	}
	flg := src[3]
	if flg&gzipReserved != 0 {
		return 0, fmt.Errorf("reserved header flags %#x", flg)
	}
	p := 10
	if flg&gzipFEXTRA != 0 {
		if len(src)-p < 2 {
			return 0, errGzipHeaderTruncated
		}
		p += 2 + int(binary.LittleEndian.Uint16(src[p:]))
		if p > len(src) {
			return 0, errGzipHeaderTruncated
		}
	}
	for _, f := range []byte{gzipFNAME, gzipFCOMMENT} {
		if flg&f != 0 {
			i := bytes.IndexByte(src[p:], 0)
			if i < 0 {
				return 0, errGzipHeaderTruncated
			}
			p += i + 1
		}
	}
	if flg&gzipFHCRC != 0 {
		if len(src)-p < 2 {
			return 0, errGzipHeaderTruncated
		}
		if got, want := uint16(crc32.ChecksumIEEE(src[:p])), binary.LittleEndian.Uint16(src[p:]); got != want {
			return 0, fmt.Errorf("header checksum %04x, stored %04x", got, want)
		}
		p += 2
	}
	return p, nil
}
