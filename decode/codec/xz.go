package codec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"math"
	"strings"

	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/volfs/volfs/internal/mem"
)

// numcodecs calls the codec "lzma" (its default container is xz), with a
// "format" and, for raw streams, the "filters" that decode them; N5 calls
// it "xz".
func init() {
	Register("lzma", newLZMA)
	registerCompressor("xz", decodeLZMA)
}

// Python's lzma module numbers (numcodecs stores them as they are).
const (
	lzmaFormatAuto  = 0
	lzmaFormatXZ    = 1
	lzmaFormatAlone = 2
	lzmaFormatRaw   = 3

	lzmaFilterLZMA1 = 0x4000000000000001
	lzmaFilterLZMA2 = 0x21
	lzmaFilterDelta = 0x03
)

// lzmaFilter is one entry of Python's lzma filter chain specification.
type lzmaFilter struct {
	ID   uint64 `json:"id"`
	Dist *int   `json:"dist"` // delta
	LC   *int   `json:"lc"`   // LZMA1
	LP   *int   `json:"lp"`
	PB   *int   `json:"pb"`
}

// newLZMA configures numcodecs' "lzma": format 1 (xz) and 2 (.lzma) are
// self-describing and decoded as decodeLZMA does; format 3 (raw) takes its
// filter chain from the configuration: an optional delta filter, then LZMA1
// or LZMA2 (what Python's lzma module accepts for raw streams, less the
// branch-call-jump filters for executables, which are ErrUnsupported).
func newLZMA(cfg Config) (*Stage, error) {
	var p struct {
		Format  *int
		Filters []lzmaFilter
	}
	if err := cfg.unmarshal(&p); err != nil {
		return nil, err
	}
	format := lzmaFormatXZ
	if p.Format != nil {
		format = *p.Format
	}
	stage := &Stage{Decode: decodeLZMA, Name: "lzma", Encoded: cfg.Elem, Decoded: cfg.Elem, InLimit: storedLimit}
	switch format {
	case lzmaFormatXZ:
		// The stream names its filters; the configuration's, when given,
		// say in advance what it will name.
		if len(p.Filters) == 2 && p.Filters[0].ID == lzmaFilterDelta && p.Filters[1].ID == lzmaFilterLZMA2 {
			stage.Name = "lzma(xz, delta)"
			stage.Decode = decodeXZDelta
			return stage, nil
		}
		fallthrough
	case lzmaFormatAuto, lzmaFormatAlone:
		for _, f := range p.Filters {
			if f.ID != lzmaFilterLZMA1 && f.ID != lzmaFilterLZMA2 {
				return nil, fmt.Errorf("format %d with filter chain %v: only LZMA1 or LZMA2 alone, or delta then LZMA2 in xz: %w", format, filterIDs(p.Filters), ErrUnsupported)
			}
		}
		return stage, nil
	case lzmaFormatRaw:
	default:
		return nil, fmt.Errorf("format %d: want 1 (xz), 2 (alone) or 3 (raw)", format)
	}
	f := p.Filters
	if len(f) == 0 {
		return nil, errors.New("format 3 (raw) without filters")
	}
	delta := 0
	if f[0].ID == lzmaFilterDelta {
		if f[0].Dist == nil {
			delta = 1 // liblzma's default distance
		} else if delta = *f[0].Dist; delta < 1 || delta > 256 {
			return nil, fmt.Errorf("filters[0]: delta dist %d: want 1 to 256", delta)
		}
		f = f[1:]
	}
	if len(f) != 1 || f[0].ID != lzmaFilterLZMA1 && f[0].ID != lzmaFilterLZMA2 {
		return nil, fmt.Errorf("raw filter chain %v: only [delta,] LZMA1 or LZMA2: %w", filterIDs(p.Filters), ErrUnsupported)
	}
	last := f[0]
	if last.ID == lzmaFilterLZMA2 {
		stage.Name = "lzma(raw lzma2)"
		stage.Decode = func(dst, src []byte, limit int) ([]byte, error) {
			r, err := lzma.Reader2Config{DictCap: max(limit, minDict)}.NewReader2(bytes.NewReader(src))
			if err != nil {
				return nil, corrupt("lzma", err)
			}
			return readLZMA(dst, r, limit, delta)
		}
	} else {
		// A raw LZMA1 stream is a .lzma stream without its header: the
		// properties come from the filter (liblzma's defaults lc=3, lp=0,
		// pb=2), and the end marker ends it.
		props := lzma.Properties{LC: 3, LP: 0, PB: 2}
		for _, v := range []struct {
			p   *int
			dst *int
		}{{last.LC, &props.LC}, {last.LP, &props.LP}, {last.PB, &props.PB}} {
			if v.p != nil {
				*v.dst = *v.p
			}
		}
		if props.LC < 0 || props.LC > 8 || props.LP < 0 || props.LP > 4 || props.PB < 0 || props.PB > 4 {
			return nil, fmt.Errorf("LZMA1 properties %+v out of range", props)
		}
		stage.Name = "lzma(raw lzma1)"
		stage.Decode = func(dst, src []byte, limit int) ([]byte, error) {
			header := make([]byte, 13)
			header[0] = props.Code()
			binary.LittleEndian.PutUint32(header[1:], uint32(max(limit, minDict)))
			binary.LittleEndian.PutUint64(header[5:], math.MaxUint64) // size unknown: the end marker ends the stream
			r, err := lzma.NewReader(io.MultiReader(bytes.NewReader(header), bytes.NewReader(src)))
			if err != nil {
				return nil, corrupt("lzma", err)
			}
			return readLZMA(dst, r, limit, delta)
		}
	}
	if delta > 0 {
		stage.Name = strings.TrimSuffix(stage.Name, ")") + fmt.Sprintf(", delta %d)", delta)
	}
	return stage, nil
}

// filterIDs names the filters of a chain by their ids, in hex as liblzma
// writes them (0x21 is LZMA2, 0x3 delta).
func filterIDs(f []lzmaFilter) []string {
	ids := make([]string, len(f))
	for i, x := range f {
		ids[i] = fmt.Sprintf("%#x", x.ID)
	}
	return ids
}

// readLZMA reads r whole into dst[:0], at most limit bytes, then undoes a
// delta filter of distance delta (0 for none).
func readLZMA(dst []byte, r io.Reader, limit, delta int) ([]byte, error) {
	out, err := readAllLimit(dst, r, limit, make([]byte, 1))
	if err != nil {
		return nil, corrupt("lzma", err)
	}
	if delta > 0 {
		for i := delta; i < len(out); i++ {
			out[i] += out[i-delta]
		}
	}
	return out, nil
}

// xzMagic starts every xz stream.
var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0}

// minDict is the smallest LZMA dictionary the library accepts.
const minDict = 4096

// decodeLZMA is the "lzma" and "xz" decoder: one xz stream (numcodecs' LZMA
// with its default FORMAT_XZ, N5's xz) or a legacy .lzma stream
// (FORMAT_ALONE). Raw LZMA streams, whose filters live in the metadata,
// and xz filter chains other than a lone LZMA2 are ErrUnsupported.
//
// The LZMA library allocates the whole dictionary that a stream's header
// asks for (up to 4 GiB). Matches never reach further back than the
// output so far, which is at most limit bytes, so the headers are
// rewritten (in a copy) to ask for no more than that before decoding: the
// memory spent is the output plus at most limit for the dictionary.
func decodeLZMA(dst, src []byte, limit int) ([]byte, error) {
	dict := max(limit, minDict)
	var r io.Reader
	if bytes.HasPrefix(src, xzMagic) {
		patched, err := boundXZ(src, limit, dict)
		if err != nil {
			return nil, err
		}
		if r, err = (xz.ReaderConfig{SingleStream: true}).NewReader(bytes.NewReader(patched)); err != nil {
			return nil, corrupt("xz", err)
		}
	} else {
		// The .lzma header: properties, dictionary size (uint32), decoded
		// size (int64, -1 when unknown), all little-endian.
		if len(src) < 13 {
			return nil, corrupt("lzma", io.ErrUnexpectedEOF)
		}
		if size := int64(binary.LittleEndian.Uint64(src[5:])); size != -1 && (size < 0 || size > int64(limit)) {
			return nil, corrupt("lzma", fmt.Errorf("header declares %d bytes, chunk size is %d", size, limit))
		}
		header := bytes.Clone(src[:13])
		if binary.LittleEndian.Uint32(header[1:]) > uint32(dict) {
			binary.LittleEndian.PutUint32(header[1:], uint32(dict))
		}
		var err error
		if r, err = lzma.NewReader(io.MultiReader(bytes.NewReader(header), bytes.NewReader(src[13:]))); err != nil {
			return nil, corrupt("lzma", err)
		}
	}
	out, err := readAllLimit(dst, r, limit, make([]byte, 1))
	if err != nil {
		return nil, corrupt("lzma", err)
	}
	return out, nil
}

// xzDictSize is the dictionary size that LZMA2 property byte c stands for.
func xzDictSize(c byte) int64 {
	if c >= 40 {
		return 1<<32 - 1
	}
	return int64(2|c&1) << (c/2 + 11)
}

// uvarint reads one xz variable-length integer (at most 9 bytes) from b.
func uvarint(b []byte) (uint64, int, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 9 {
		return 0, 0, io.ErrUnexpectedEOF
	}
	return v, n, nil
}

// xzBlock is one block of an xz stream as its index records it: where
// the block starts in the stream, its unpadded size and its decoded size.
type xzBlock struct {
	pos            int64
	unpadded, size uint64
}

// xzIndex reads the index of the single xz stream src, found from the
// stream footer, and returns the stream's blocks.
// The blocks must decode to at most limit bytes together and fill the
// stream from its header to its index, each padded to 4 bytes; anything
// else is an error wrapping ErrCorrupt.
func xzIndex(src []byte, limit int) ([]xzBlock, error) {
	bad := func(format string, args ...any) ([]xzBlock, error) {
		return nil, corrupt("xz", fmt.Errorf(format, args...))
	}
	if len(src) < 24 || string(src[len(src)-2:]) != "YZ" {
		return bad("no stream footer at the end (stream padding and concatenated streams are not supported)")
	}
	footer := src[len(src)-12:]
	indexSize := (int64(binary.LittleEndian.Uint32(footer[4:])) + 1) * 4
	indexStart := int64(len(src)) - 12 - indexSize
	if indexStart < 12 {
		return bad("index of %d bytes does not fit", indexSize)
	}
	index := src[indexStart : len(src)-12]
	if index[0] != 0 {
		return bad("no index where the footer says")
	}
	nrec, n, err := uvarint(index[1:])
	if err != nil || nrec > uint64(len(index)) {
		return bad("bad index")
	}
	index = index[1+n:]
	blocks := make([]xzBlock, nrec)
	var total uint64
	pos := int64(12)
	for i := range blocks {
		b := &blocks[i]
		for _, v := range []*uint64{&b.unpadded, &b.size} {
			if *v, n, err = uvarint(index); err != nil {
				return bad("bad index")
			}
			index = index[n:]
		}
		if total += b.size; total > uint64(limit) {
			return bad("index declares more than the chunk size %d", limit)
		}
		// pos passes indexStart when the padding of the block before
		// does.
		if pos > indexStart || b.unpadded > uint64(indexStart-pos) {
			return bad("block of %d bytes overruns the index", b.unpadded)
		}
		b.pos = pos
		pos += (int64(b.unpadded) + 3) &^ 3
	}
	if pos != indexStart {
		return bad("blocks end at %d, index starts at %d", pos, indexStart)
	}
	return blocks, nil
}

// boundXZ checks the single xz stream src from its index before any
// decoding (xzIndex): its blocks must decode to at most limit bytes
// together and use a lone LZMA2 filter. It returns src, or a copy whose
// block headers ask for dictionaries of at most dict bytes (with their
// CRC32s redone).
func boundXZ(src []byte, limit, dict int) ([]byte, error) {
	blocks, err := xzIndex(src, limit)
	if err != nil {
		return nil, err
	}
	out := src
	for _, b := range blocks {
		patched, err := boundXZBlock(src[b.pos:b.pos+int64(b.unpadded)], dict)
		if err != nil {
			return nil, err
		}
		if patched != nil {
			if &out[0] == &src[0] {
				out = bytes.Clone(src)
			}
			copy(out[b.pos:], patched)
		}
	}
	return out, nil
}

// xzBlockHeader returns the header of the xz block that starts block,
// checked against its CRC32, and the offset in it of the block's first
// filter (after the flags and the optional sizes). Its flags are h[1].
func xzBlockHeader(block []byte) (h []byte, p int, err error) {
	if len(block) < 1 || block[0] == 0 {
		return nil, 0, corrupt("xz", errors.New("block header expected"))
	}
	hsize := (int(block[0]) + 1) * 4
	if hsize > len(block) {
		return nil, 0, corrupt("xz", io.ErrUnexpectedEOF)
	}
	h = block[:hsize]
	if crc32.ChecksumIEEE(h[:hsize-4]) != binary.LittleEndian.Uint32(h[hsize-4:]) {
		return nil, 0, corrupt("xz", errors.New("block header checksum"))
	}
	flags := h[1]
	p = 2
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} {
		if present {
			_, n, err := uvarint(h[p : hsize-4])
			if err != nil {
				return nil, 0, corrupt("xz", err)
			}
			p += n
		}
	}
	return h, p, nil
}

// boundXZBlock checks the header of the xz block that starts block, and
// returns nil when its dictionary is at most dict bytes, else the header
// rewritten to ask for dict bytes.
func boundXZBlock(block []byte, dict int) ([]byte, error) {
	h, p, err := xzBlockHeader(block)
	if err != nil {
		return nil, err
	}
	hsize, flags := len(h), h[1]
	id, n, err := uvarint(h[p : hsize-4])
	if err != nil {
		return nil, corrupt("xz", err)
	}
	p += n
	if flags&3 != 0 || id != 0x21 {
		return nil, fmt.Errorf("xz filter chain other than LZMA2 alone (first filter %#x): %w", id, ErrUnsupported)
	}
	psize, n, err := uvarint(h[p : hsize-4])
	if err != nil || psize != 1 || p+n >= hsize-4 {
		return nil, corrupt("xz", errors.New("bad LZMA2 properties"))
	}
	p += n
	if xzDictSize(h[p]) <= int64(dict) {
		return nil, nil
	}
	h = bytes.Clone(h)
	c := byte(0)
	for xzDictSize(c) < int64(dict) {
		c++
	}
	h[p] = c
	binary.LittleEndian.PutUint32(h[hsize-4:], crc32.ChecksumIEEE(h[:hsize-4]))
	return h, nil
}

// xzCheckSizes are the sizes of the integrity checks of xz's check types
// (none, CRC32, CRC64, SHA-256); other types are reserved.
var xzCheckSizes = map[byte]int{0: 0, 1: 4, 4: 8, 10: 32}

// crc64ECMA is the table of xz's CRC64.
var crc64ECMA = crc64.MakeTable(crc64.ECMA)

// decodeXZDelta decodes one xz stream whose blocks each hold the filter
// chain delta, LZMA2 (Python's lzma with filters [delta, lzma2]), which
// the xz library does not decode: each block's LZMA2 data is decoded raw,
// its delta undone, and its check verified. The index bounds the output
// before anything is decoded, and dictionaries to the output, as
// decodeLZMA does.
func decodeXZDelta(dst, src []byte, limit int) ([]byte, error) {
	bad := func(format string, args ...any) error { return corrupt("xz", fmt.Errorf(format, args...)) }
	if len(src) < 24 || !bytes.HasPrefix(src, xzMagic) || string(src[len(src)-2:]) != "YZ" {
		return nil, bad("not one xz stream (stream padding and concatenated streams are not supported)")
	}
	if crc32.ChecksumIEEE(src[6:8]) != binary.LittleEndian.Uint32(src[8:]) || src[6] != 0 {
		return nil, bad("bad stream header")
	}
	checkType := src[7] & 0x0f
	checkSize, ok := xzCheckSizes[checkType]
	if !ok {
		return nil, fmt.Errorf("xz check type %d: %w", checkType, ErrUnsupported)
	}
	blocks, err := xzIndex(src, limit)
	if err != nil {
		return nil, err
	}
	var total int
	for _, b := range blocks {
		total += int(b.size)
	}
	out := dst[:0]
	if cap(out) < total {
		out = mem.Make(total)[:0]
	}
	for _, r := range blocks {
		block := src[r.pos : r.pos+int64(r.unpadded)]
		h, p, err := xzBlockHeader(block)
		if err != nil {
			return nil, err
		}
		hsize := len(h)
		if hsize+checkSize > len(block) {
			return nil, bad("bad block header")
		}
		// Flags (filters - 1, and whether sizes follow), the sizes, then
		// each filter: id, size of its properties, properties. Delta's
		// property is its distance - 1; LZMA2's its dictionary size.
		dist, err := xzDeltaBlock(h, p)
		if err != nil {
			return nil, err
		}
		data := block[hsize : len(block)-checkSize]
		want := int(r.size)
		rd, err := lzma.Reader2Config{DictCap: max(want, minDict)}.NewReader2(bytes.NewReader(data))
		if err != nil {
			return nil, corrupt("xz", err)
		}
		part, err := readAllLimit(out[len(out):len(out):len(out)+want], rd, want, make([]byte, 1))
		if err != nil {
			return nil, corrupt("xz", err)
		}
		if len(part) != want {
			return nil, bad("block decodes to %d bytes, the index says %d", len(part), want)
		}
		for i := dist; i < len(part); i++ {
			part[i] += part[i-dist]
		}
		// xzIndex placed the padded block before the index.
		checkAt := r.pos + (int64(hsize+len(data))+3)&^3
		stored := src[checkAt : checkAt+int64(checkSize)]
		switch checkType {
		case 1:
			if crc32.ChecksumIEEE(part) != binary.LittleEndian.Uint32(stored) {
				return nil, bad("block CRC32 mismatch")
			}
		case 4:
			if crc64.Checksum(part, crc64ECMA) != binary.LittleEndian.Uint64(stored) {
				return nil, bad("block CRC64 mismatch")
			}
		case 10:
			if sum := sha256.Sum256(part); !bytes.Equal(sum[:], stored) {
				return nil, bad("block SHA-256 mismatch")
			}
		}
		out = out[:len(out)+want]
	}
	return out, nil
}

// xzDeltaBlock reads the block header h, whose filters start at offset
// at (xzBlockHeader), of a block whose filters are delta, then LZMA2, and
// returns the delta distance.
func xzDeltaBlock(h []byte, at int) (int, error) {
	flags, p := h[1], h[at:len(h)-4]
	if flags&0x3c != 0 || flags&3 != 1 {
		return 0, fmt.Errorf("xz block of %d filters: %w", flags&3+1, ErrUnsupported)
	}
	var ids [2]uint64
	var props [2]byte
	for i := range ids {
		id, n, err := uvarint(p)
		if err != nil {
			return 0, corrupt("xz", err)
		}
		p = p[n:]
		size, n, err := uvarint(p)
		if err != nil || size != 1 || len(p) < n+1 {
			return 0, fmt.Errorf("xz filter %#x with %d bytes of properties: %w", id, size, ErrUnsupported)
		}
		ids[i], props[i] = id, p[n]
		p = p[n+1:]
	}
	if ids[0] != lzmaFilterDelta || ids[1] != lzmaFilterLZMA2 {
		return 0, fmt.Errorf("xz block filters %#x, %#x, not delta then LZMA2: %w", ids[0], ids[1], ErrUnsupported)
	}
	return int(props[0]) + 1, nil
}
