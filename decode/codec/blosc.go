package codec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/snappy"

	"github.com/volfs/volfs/internal/mem"
)

// Blosc (version 1, as c-blosc 1.x writes it and numcodecs, N5 and Zarr v3
// store it) is a container: a 16-byte header, then either the data as it
// is (MEMCPYED) or a table of block offsets followed by the blocks. Each
// block is compressed as one stream, or split into typesize streams (one
// per byte of the element, after shuffling), each prefixed by its
// compressed size; a stream whose compressed size equals its decoded size
// is stored raw. A shuffle filter, undone after decompression, is applied
// per block.
//
// Header, all integers little-endian:
//
//	0  version    format version: 1 or 2 for blosc1; 3 and up are blosc2
//	1  versionlz  version of the inner codec's format
//	2  flags      bit 0 byte shuffle, bit 1 MEMCPYED, bit 2 bitshuffle,
//	              bit 4 blocks not split, bits 5-7 inner codec
//	3  typesize   element size in bytes, for the shuffle and the split
//	4  nbytes     decoded size (int32)
//	8  blocksize  decoded size of every block but the last (int32)
//	12 cbytes     size of the whole buffer, header included (int32)
const (
	bloscHeaderSize = 16
	bloscShuffle    = 0x01
	bloscMemcpyed   = 0x02
	bloscBitshuffle = 0x04
	bloscDontSplit  = 0x10
	// A block is split into typesize streams only for typesizes up to
	// bloscMaxSplits and blocks of at least bloscMinSplitElems elements
	// (c-blosc's MAX_SPLITS and MIN_BUFFERSIZE), never for the last,
	// partial block, and never when bloscDontSplit is set (versions before
	// 1.9 split whenever these conditions held; later ones record their
	// choice in that flag).
	bloscMaxSplits     = 16
	bloscMinSplitElems = 128
)

// bloscInner holds the inner codecs by their number in the header's top 3
// flag bits. Each decodes one stream to exactly len(dst) bytes.
var bloscInner = [8]struct {
	name   string
	decode func(dst, src []byte) error
}{
	0: {"blosclz", blosclzDecode},
	1: {"lz4", lz4DecodeExact}, // lz4 and lz4hc share the block format
	2: {"snappy", snappyDecodeExact},
	3: {"zlib", zlibDecodeExact},
	4: {"zstd", zstdDecodeExact},
}

func init() {
	Register("blosc", newBlosc)
}

// newBlosc configures "blosc". The buffer's header says everything that
// decoding needs; the configuration names the inner codec and shuffle for
// display only (numcodecs writes shuffle as 0, 1, 2, Zarr v3 as
// "noshuffle", "shuffle", "bitshuffle").
func newBlosc(cfg Config) (*Stage, error) {
	name := "blosc"
	var p struct {
		Cname   string
		Shuffle json.RawMessage
	}
	if len(cfg.Params) > 0 && json.Unmarshal(cfg.Params, &p) == nil && p.Cname != "" {
		shuffle := strings.Trim(string(p.Shuffle), `"`)
		if n, err := strconv.Atoi(shuffle); err == nil {
			shuffle = [...]string{"noshuffle", "shuffle", "bitshuffle", "shuffle?"}[min(max(n, 0), 3)]
		}
		name = fmt.Sprintf("blosc(%s, %s)", p.Cname, shuffle)
		if shuffle == "" {
			name = fmt.Sprintf("blosc(%s)", p.Cname)
		}
	}
	return &Stage{Decode: decodeBlosc, Name: name, Encoded: cfg.Elem, Decoded: cfg.Elem, InLimit: storedLimit}, nil
}

// bloscScratch pools the buffers that hold a shuffled block before it is
// unshuffled into the output.
var bloscScratch sync.Pool

// errBlosc is the cause of most malformed blosc buffers.
var errBlosc = errors.New("bad blosc buffer")

// decodeBlosc is the "blosc" decoder for blosc1 buffers. The element size for
// unshuffling comes from the buffer's header: a format need not pass it.
// Memory: the output (at most limit bytes, checked against the header
// before anything is allocated) and, for shuffled buffers, one block of
// scratch from a pool.
func decodeBlosc(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < bloscHeaderSize {
		return nil, corrupt("blosc", fmt.Errorf("%w: %d bytes, shorter than the header", errBlosc, len(src)))
	}
	version, flags, typesize := src[0], src[2], int(src[3])
	nbytes := int64(int32(binary.LittleEndian.Uint32(src[4:])))
	blocksize := int64(int32(binary.LittleEndian.Uint32(src[8:])))
	cbytes := int64(int32(binary.LittleEndian.Uint32(src[12:])))
	switch {
	case version >= 3:
		return nil, fmt.Errorf("blosc2 buffer (format version %d): %w", version, ErrUnsupported)
	case version == 0:
		return nil, corrupt("blosc", fmt.Errorf("%w: format version 0", errBlosc))
	case flags&(bloscShuffle|bloscBitshuffle) == bloscShuffle|bloscBitshuffle:
		// Both shuffles at once is how blosc2 marks its extended header.
		return nil, fmt.Errorf("blosc2 extended header (flags %#02x): %w", flags, ErrUnsupported)
	case nbytes < 0 || cbytes < bloscHeaderSize || cbytes > int64(len(src)):
		return nil, corrupt("blosc", fmt.Errorf("%w: nbytes %d, cbytes %d in a buffer of %d bytes", errBlosc, nbytes, cbytes, len(src)))
	case nbytes > int64(limit):
		return nil, corrupt("blosc", fmt.Errorf("decodes to %d bytes, more than the chunk size %d", nbytes, limit))
	case typesize == 0:
		return nil, corrupt("blosc", fmt.Errorf("%w: typesize 0", errBlosc))
	}
	src = src[:cbytes]
	n := int(nbytes)
	out := dst[:0]
	if n == 0 {
		return out, nil
	}
	if flags&bloscMemcpyed != 0 {
		if len(src)-bloscHeaderSize < n {
			return nil, corrupt("blosc", fmt.Errorf("%w: MEMCPYED buffer of %d bytes holds less than %d", errBlosc, len(src), n))
		}
		return append(out, src[bloscHeaderSize:bloscHeaderSize+n]...), nil
	}
	inner := bloscInner[flags>>5]
	if inner.decode == nil {
		return nil, fmt.Errorf("blosc inner codec %d: %w", flags>>5, ErrUnsupported)
	}
	if blocksize <= 0 {
		return nil, corrupt("blosc", fmt.Errorf("%w: blocksize %d", errBlosc, blocksize))
	}
	bs := int(blocksize)
	nblocks := (n + bs - 1) / bs
	starts := bloscHeaderSize + 4*nblocks
	if starts > len(src) {
		return nil, corrupt("blosc", fmt.Errorf("%w: %d block offsets do not fit in %d bytes", errBlosc, nblocks, len(src)))
	}
	if cap(out) < n {
		out = mem.Make(n)[:0]
	}
	out = out[:n]
	var scratch *[]byte
	if flags&(bloscShuffle|bloscBitshuffle) != 0 {
		scratch, _ = bloscScratch.Get().(*[]byte)
		if scratch == nil || cap(*scratch) < min(bs, n) {
			b := make([]byte, min(bs, n))
			scratch = &b
		}
		defer bloscScratch.Put(scratch)
	}
	for j := range nblocks {
		off := int64(int32(binary.LittleEndian.Uint32(src[bloscHeaderSize+4*j:])))
		if off < int64(starts) || off >= int64(len(src)) {
			return nil, corrupt("blosc", fmt.Errorf("%w: block %d starts at %d", errBlosc, j, off))
		}
		block := out[j*bs : min(n, (j+1)*bs)]
		if err := bloscBlock(block, src[off:], flags, typesize, len(block) < bs, inner.decode, scratch); err != nil {
			return nil, corrupt("blosc", fmt.Errorf("%s block %d: %w", inner.name, j, err))
		}
	}
	return out, nil
}

// bloscBlock decodes one block from src (which runs on to the end of the
// buffer) into block, as c-blosc's blosc_d does.
func bloscBlock(block, src []byte, flags byte, typesize int, last bool, inner func(dst, src []byte) error, scratch *[]byte) error {
	byteShuffled := flags&bloscShuffle != 0 && typesize > 1
	bitShuffled := flags&bloscBitshuffle != 0 && len(block) >= typesize
	into := block
	if byteShuffled || bitShuffled {
		into = (*scratch)[:len(block)]
	}
	nsplits := 1
	if flags&bloscDontSplit == 0 && typesize <= bloscMaxSplits && len(block)/typesize >= bloscMinSplitElems && !last {
		nsplits = typesize
	}
	if len(into)%nsplits != 0 {
		return fmt.Errorf("%w: block of %d bytes does not split in %d", errBlosc, len(into), nsplits)
	}
	size := len(into) / nsplits
	for s := range nsplits {
		if len(src) < 4 {
			return fmt.Errorf("%w: stream %d truncated", errBlosc, s)
		}
		cb := int64(int32(binary.LittleEndian.Uint32(src)))
		src = src[4:]
		if cb <= 0 || cb > int64(len(src)) {
			return fmt.Errorf("%w: stream %d of %d bytes in %d", errBlosc, s, cb, len(src))
		}
		part, stream := into[s*size:(s+1)*size], src[:cb]
		src = src[cb:]
		if int(cb) == size {
			copy(part, stream)
			continue
		}
		if err := inner(part, stream); err != nil {
			return fmt.Errorf("stream %d: %w", s, err)
		}
	}
	switch {
	case byteShuffled:
		unshuffle(block, into, typesize)
	case bitShuffled:
		bitunshuffle(block, into, typesize)
	}
	return nil
}

// snappyDecodeExact decodes the raw snappy block src into exactly len(dst)
// bytes.
func snappyDecodeExact(dst, src []byte) error {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return err
	}
	if n != len(dst) {
		return fmt.Errorf("snappy block declares %d bytes, want %d", n, len(dst))
	}
	out, err := snappy.Decode(dst, src)
	if err != nil {
		return err
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return fmt.Errorf("snappy block decodes to %d bytes, want %d", len(out), len(dst))
	}
	return nil
}
