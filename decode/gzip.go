package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/volfs/volfs/cache/mem"
)

func init() {
	RegisterCodec("gzip", func(dst, src []byte, limit int) ([]byte, error) {
		return gunzip(dst, src, limit, limit)
	})
}

// gzipReaders pools gzip readers: each holds a 32 KiB window and Huffman
// tables that are costly to allocate per chunk.
var gzipReaders sync.Pool

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
// exactly); output longer than limit bytes is refused so that a small
// object cannot expand without bound. Errors wrap ErrCorrupt.
func Gunzip(src []byte, want, limit int) ([]byte, error) {
	return gunzip(nil, src, want, limit)
}

// gunzip is Gunzip appending to dst[:0].
func gunzip(dst, src []byte, want, limit int) ([]byte, error) {
	if want <= 0 && len(src) >= 18 {
		want = int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	}
	br := bytes.NewReader(src)
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(br)
	} else {
		err = zr.Reset(br)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	defer gzipReaders.Put(zr)
	// One spare byte lets a stream of exactly want bytes hit EOF without a
	// regrow.
	out := dst[:0]
	if cap(out) < min(want, limit)+1 {
		out = mem.Make(min(want, limit) + 1)[:0]
	}
	for {
		if len(out) == cap(out) {
			if len(out) > limit {
				return nil, fmt.Errorf("%w: gzip: stream expands beyond %d bytes", ErrCorrupt, limit)
			}
			out = append(out, 0)[:len(out)]
		}
		n, err := zr.Read(out[len(out):cap(out)])
		out = out[:len(out)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: gzip: stream expands beyond %d bytes", ErrCorrupt, limit)
	}
	return out, nil
}
