package codec

// A DEFLATE (RFC 1951) decoder for the one case volfs has: the whole
// compressed stream in memory and an output buffer as large as the output
// may be. With no streaming there is no window to keep and nothing to copy
// out: matches are copied within the caller's buffer, 8 bytes at a time.
//
// Huffman codes decode with one table lookup per symbol. A table entry packs
// everything the decoder needs about the symbol, so that the hot loop looks
// up, shifts the bit buffer by the entry's low byte and acts:
//
//	bits  0-7   bits to consume: the codeword's length (in this table), plus
//	            the symbol's extra bits for a length or a distance; for a
//	            subtable pointer, the primary table's index bits
//	bits  8-11  the codeword's length in this table (where extra bits start);
//	            for a subtable pointer, the subtable's index bits
//	bits 12-15  flags: entryLiteral, entryExc (not a literal, length or
//	            distance), entrySub, entryEOB; entryExc alone is an invalid
//	            code or symbol
//	bits 16-31  the literal byte, length base, distance base or subtable start
//
// Codewords longer than the primary table's index (11 bits for literals and
// lengths, 8 for distances) continue in a subtable sized, as zlib sizes its
// own, to the codes that share the prefix.
//
// The bit buffer is a uint64 filled from the low end, refilled in the fast
// loop by one unaligned 8-byte load while 15 or more input bytes remain:
// after a refill it holds 56 to 63 bits, enough for a length and a distance
// with all their extra bits (48). Bits above the count are either zero or
// the next input bits, so a refill may OR a load over them. Near the end of
// the input, refills add bytes one at a time and zero bytes past the end;
// a stream that consumes any of those is truncated.
//
// The file runs past 600 lines on purpose: it is one algorithm whose table
// building, block parsing and hot loop share the entry format above and
// its invariants; split, a reader would hold three files open to check one
// of them.

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"sync"
)

const (
	litlenBits  = 11 // primary index bits of the literal/length table
	distBits    = 8  // primary index bits of the distance table
	precodeBits = 7  // code-length codes are at most 7 bits: no subtables

	// Table sizes: the most entries a complete code can need with these
	// primary sizes and subtables sized as buildTable sizes them (zlib's
	// "enough" bound for 288 and 32 symbols of at most 15 bits).
	litlenTableSize = 2342
	distTableSize   = 402

	maxLitlenSyms = 288 // 286 valid, 2 more in the fixed code
	maxDistSyms   = 32  // 30 valid, 2 more in the fixed code
	maxMatch      = 258

	// fastOutMargin is the output room the fast loop needs per iteration:
	// two literals, a maximal match and the 7 bytes a word copy may write
	// past the match.
	fastOutMargin = 2 + maxMatch + 8
	// fastInMargin is the input the fast loop needs per iteration: two
	// refills of 8-byte loads, the first advancing at most 7 bytes.
	fastInMargin = 15
)

const (
	entryLiteral = 1 << 15
	entryExc     = 1 << 14
	entrySub     = 1 << 13
	entryEOB     = 1 << 12
)

// Errors of inflate. errInflateFull is not corruption in itself: the
// caller's buffer was too small for the stream.
var (
	errInflateTruncated = errors.New("deflate: truncated stream")
	errInflateFull      = errors.New("deflate: stream decodes to more than the output buffer")
	errInflateCodes     = errors.New("deflate: bad Huffman code lengths")
	errInflateSymbol    = errors.New("deflate: invalid code")
	errInflateDistance  = errors.New("deflate: distance before the start of the output")
	errInflateBlock     = errors.New("deflate: invalid block type")
	errInflateStored    = errors.New("deflate: stored block length does not match its complement")
)

// Symbol templates: what each symbol's table entry holds besides the
// codeword length (buildTable adds it to bits 0-7 and 8-11).
var (
	litlenSyms  [maxLitlenSyms]uint32
	distSyms    [maxDistSyms]uint32
	precodeSyms [19]uint32
)

func init() {
	lengthBase := [29]uint32{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra := [29]uint32{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase := [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	for s := range 256 {
		litlenSyms[s] = entryLiteral | uint32(s)<<16
	}
	litlenSyms[256] = entryExc | entryEOB
	for i := range lengthBase {
		litlenSyms[257+i] = lengthBase[i]<<16 | lengthExtra[i]
	}
	litlenSyms[286], litlenSyms[287] = entryExc, entryExc
	for i := range distBase {
		distSyms[i] = distBase[i]<<16 | uint32(max(i/2-1, 0))
	}
	distSyms[30], distSyms[31] = entryExc, entryExc
	for s := range precodeSyms {
		precodeSyms[s] = uint32(s) << 16
	}
}

// inflateTables holds the decoding tables of one dynamic block.
type inflateTables struct {
	litlen  [litlenTableSize]uint32
	dist    [distTableSize]uint32
	precode [1 << precodeBits]uint32
	lens    [maxLitlenSyms + maxDistSyms]uint8
}

// inflateTablesPool holds inflateTables (12 KB) between streams.
var inflateTablesPool = sync.Pool{New: func() any { return new(inflateTables) }}

// fixedTables are the tables of the fixed Huffman code (RFC 1951 3.2.6).
var fixedTables = sync.OnceValue(func() *inflateTables {
	t := new(inflateTables)
	var lens [maxLitlenSyms]uint8
	for s := range lens {
		switch {
		case s < 144:
			lens[s] = 8
		case s < 256:
			lens[s] = 9
		case s < 280:
			lens[s] = 7
		default:
			lens[s] = 8
		}
	}
	var dlens [maxDistSyms]uint8
	for s := range dlens {
		dlens[s] = 5
	}
	if !buildTable(t.litlen[:], litlenBits, lens[:], litlenSyms[:]) || !buildTable(t.dist[:], distBits, dlens[:], distSyms[:]) {
		panic("decode: the fixed Huffman code does not build")
	}
	return t
})

// buildTable fills table, whose primary part has 1<<tableBits entries,
// with the decoding table of the canonical Huffman code whose codeword
// lengths are lens (0: symbol unused); syms holds each symbol's entry
// template. It reports false for an over-subscribed or incomplete code,
// except the two incomplete codes that compress/flate and zlib accept: no
// codeword at all, and a single codeword of one bit. Their unused codewords
// decode to invalid entries.
func buildTable(table []uint32, tableBits uint, lens []uint8, syms []uint32) bool {
	var count [16]int
	for _, l := range lens {
		count[l&15]++
	}
	count[0] = 0
	left, maxLen := 1, 0
	for l := 1; l <= 15; l++ {
		left = left<<1 - count[l]
		if left < 0 {
			return false // over-subscribed
		}
		if count[l] != 0 {
			maxLen = l
		}
	}
	primary := table[:1<<tableBits]
	if left != 0 {
		if maxLen != 0 && (maxLen != 1 || count[1] != 1) {
			return false
		}
		if maxLen == 0 {
			for i := range primary {
				primary[i] = entryExc
			}
			return true
		}
	}

	// Symbols sorted by codeword length, then by value: canonical order.
	var offs [17]int
	for l := 1; l <= 15; l++ {
		offs[l+1] = offs[l] + count[l]
	}
	var sorted [maxLitlenSyms]uint16
	for s, l := range lens {
		if l != 0 {
			sorted[offs[l]] = uint16(s)
			offs[l]++
		}
	}

	next := len(primary) // where the next subtable starts
	mask := 1<<tableBits - 1
	prefix, subStart, subBits := -1, 0, uint(0)
	code, i := 0, 0 // the next codeword, MSB first as RFC 1951 writes it
	// The codewords of at most tableBits bits, as libdeflate builds
	// them: those of length l are written once each into the first 1<<l
	// entries, which are then copied to double them before the next
	// length, so that an entry repeats every 1<<l entries at the cost of
	// one memmove per length instead of a strided store per copy. An
	// entry not yet set when copied is either a longer codeword's,
	// written at each of its places when its own length comes, or, in
	// the one-codeword code, unused: entryExc from the start.
	primary[0], primary[1] = entryExc, entryExc
	l, short := 1, min(maxLen, int(tableBits))
	for ; l <= short; l++ {
		if l > 1 {
			copy(primary[1<<(l-1):1<<l], primary[:1<<(l-1)])
		}
		for ; count[l] > 0; count[l]-- {
			s := sorted[i]
			i++
			// The stream holds codewords MSB first in an LSB-first bit
			// stream: the table is indexed by the reversed codeword.
			rev := int(bits.Reverse16(uint16(code)) >> (16 - l))
			code++
			primary[rev] = syms[s] + uint32(l)<<8 + uint32(l)
		}
		code <<= 1
	}
	for n := 1 << short; n < len(primary); n <<= 1 {
		copy(primary[n:2*n], primary[:n])
	}
	// Longer codewords: a subtable per tableBits-bit prefix.
	for ; l <= maxLen; l++ {
		for ; count[l] > 0; count[l]-- {
			s := sorted[i]
			i++
			rev := int(bits.Reverse16(uint16(code)) >> (16 - l))
			code++
			if rev&mask != prefix {
				// A new prefix: size its subtable to hold every
				// remaining codeword that starts with it.
				prefix = rev & mask
				subBits = uint(l) - tableBits
				room := 1 << subBits
				for subBits+tableBits < uint(maxLen) {
					room -= count[subBits+tableBits]
					if room <= 0 {
						break
					}
					subBits++
					room <<= 1
				}
				subStart = next
				next += 1 << subBits
				if next > len(table) {
					return false // cannot happen for a complete code
				}
				primary[prefix] = entryExc | entrySub | uint32(subStart)<<16 | uint32(subBits)<<8 | uint32(tableBits)
			}
			sl := uint(l) - tableBits
			e := syms[s] + uint32(sl)<<8 + uint32(sl)
			sub := table[subStart : subStart+1<<subBits]
			for j := rev >> tableBits; j < len(sub); j += 1 << sl {
				sub[j] = e
			}
		}
		code <<= 1
	}
	return true
}

// inflateState is the input side of one inflate call: the bit buffer and
// where it stands in src.
type inflateState struct {
	src      []byte
	in       int    // next byte of src to load
	overread int    // zero bytes loaded past the end of src
	bitbuf   uint64 // bits not yet consumed, first in the low bits
	bitsleft uint   // how many; bits above are zero or the next input bits
	t        *inflateTables
}

// refill fills the bit buffer to 56 bits or more, byte by byte, with zero
// bytes past the end of the input. It fails once any of those has been
// consumed, which a buffer of 56 to 63 bits reveals by holding fewer bits
// than were invented.
func (s *inflateState) refill() error {
	for s.bitsleft < 56 {
		if s.in < len(s.src) {
			s.bitbuf |= uint64(s.src[s.in]) << s.bitsleft
			s.in++
		} else {
			s.overread++
		}
		s.bitsleft += 8
	}
	if uint(s.overread)*8 > s.bitsleft {
		return errInflateTruncated
	}
	return nil
}

// bits returns the next n bits (n <= 32) and consumes them; the buffer
// must hold them.
func (s *inflateState) bits(n uint) uint32 {
	v := uint32(s.bitbuf & (1<<n - 1))
	s.bitbuf >>= n
	s.bitsleft -= n
	return v
}

// inflate decodes the raw DEFLATE stream at the start of src into out,
// from out[0], and returns how many bytes it wrote and how many bytes of
// src the stream takes (through the byte holding its last bit: a
// container's trailer starts at src[used]). Bytes of out past n may have
// been overwritten. Matches cannot reach before out[0]. A stream that
// decodes to more than len(out) bytes fails with errInflateFull; any other
// error is a corrupt or truncated stream. It never reads outside src nor
// writes outside out.
func inflate(out, src []byte) (n, used int, err error) {
	t := inflateTablesPool.Get().(*inflateTables)
	defer inflateTablesPool.Put(t)
	s := inflateState{src: src, t: t}
	o := 0
	for {
		if err := s.refill(); err != nil {
			return 0, 0, err
		}
		final := s.bits(1)
		var lt *[litlenTableSize]uint32
		var dt *[distTableSize]uint32
		switch s.bits(2) {
		case 0:
			if o, err = s.storedBlock(out, o); err != nil {
				return 0, 0, err
			}
		case 1:
			f := fixedTables()
			lt, dt = &f.litlen, &f.dist
		case 2:
			if err := s.dynamicHeader(); err != nil {
				return 0, 0, err
			}
			lt, dt = &t.litlen, &t.dist
		default:
			return 0, 0, errInflateBlock
		}
		if lt != nil {
			if o, err = s.huffmanBlock(out, o, lt, dt); err != nil {
				return 0, 0, err
			}
		}
		if final == 1 {
			break
		}
	}
	if uint(s.overread)*8 > s.bitsleft {
		return 0, 0, errInflateTruncated
	}
	return o, s.in + s.overread - int(s.bitsleft/8), nil
}

// storedBlock copies a stored block's bytes to out[o:] and returns the
// new end of the output.
func (s *inflateState) storedBlock(out []byte, o int) (int, error) {
	s.bits(s.bitsleft & 7) // to a byte boundary
	if err := s.refill(); err != nil {
		return 0, err
	}
	n, nn := int(s.bits(16)), s.bits(16)
	if uint16(n) != ^uint16(nn) {
		return 0, errInflateStored
	}
	// Give back the whole bytes left in the buffer, then copy directly.
	pos := s.in - (int(s.bitsleft/8) - s.overread)
	if pos > s.in {
		return 0, errInflateTruncated
	}
	s.bitbuf, s.bitsleft, s.overread = 0, 0, 0
	if n > len(s.src)-pos {
		return 0, errInflateTruncated
	}
	if n > len(out)-o {
		return 0, errInflateFull
	}
	copy(out[o:], s.src[pos:pos+n])
	s.in = pos + n
	return o + n, nil
}

// precodeOrder is the order of the code-length code's lengths (RFC 1951
// 3.2.7).
var precodeOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// dynamicHeader reads a dynamic block's code definitions into s.t's
// literal/length and distance tables.
func (s *inflateState) dynamicHeader() error {
	t := s.t
	if err := s.refill(); err != nil {
		return err
	}
	nlit := int(s.bits(5)) + 257
	ndist := int(s.bits(5)) + 1
	nclen := int(s.bits(4)) + 4
	if nlit > 286 || ndist > 30 {
		return errInflateCodes
	}
	var clens [19]uint8
	for i := range nclen {
		if s.bitsleft < 3 {
			if err := s.refill(); err != nil {
				return err
			}
		}
		clens[precodeOrder[i]] = uint8(s.bits(3))
	}
	if !buildTable(t.precode[:], precodeBits, clens[:], precodeSyms[:]) {
		return errInflateCodes
	}
	lens := t.lens[:nlit+ndist]
	for i := 0; i < len(lens); {
		if s.bitsleft < precodeBits+7 {
			if err := s.refill(); err != nil {
				return err
			}
		}
		e := t.precode[s.bitbuf&(1<<precodeBits-1)]
		if e&entryExc != 0 {
			return errInflateSymbol
		}
		s.bits(uint(e & 0xff))
		sym := e >> 16
		if sym < 16 {
			lens[i] = uint8(sym)
			i++
			continue
		}
		var v uint8
		var rep int
		switch sym {
		case 16:
			if i == 0 {
				return errInflateCodes
			}
			v, rep = lens[i-1], 3+int(s.bits(2))
		case 17:
			rep = 3 + int(s.bits(3))
		default:
			rep = 11 + int(s.bits(7))
		}
		if rep > len(lens)-i {
			return errInflateCodes
		}
		for range rep {
			lens[i] = v
			i++
		}
	}
	if lens[256] == 0 {
		return errInflateCodes // a block that cannot end
	}
	if !buildTable(t.litlen[:], litlenBits, lens[:nlit], litlenSyms[:]) ||
		!buildTable(t.dist[:], distBits, lens[nlit:], distSyms[:]) {
		return errInflateCodes
	}
	return nil
}

// huffmanBlock decodes the symbols of a Huffman-coded block with the
// given tables into out[o:] and returns the new end of the output.
func (s *inflateState) huffmanBlock(out []byte, o int, lt *[litlenTableSize]uint32, dt *[distTableSize]uint32) (int, error) {
	// The state lives in locals, which the compiler keeps in registers.
	src, in := s.src, s.in
	bitbuf, bitsleft := s.bitbuf, uint8(s.bitsleft)
	// Fast loop: room for two literals and a match, input for two
	// 8-byte loads, so that nothing but the distance needs checking.
	for in <= len(src)-fastInMargin && o <= len(out)-fastOutMargin {
		bitbuf |= binary.LittleEndian.Uint64(src[in:]) << (bitsleft & 63)
		in += int((63 - bitsleft) >> 3)
		bitsleft |= 56

		e := lt[bitbuf&(1<<litlenBits-1)]
		if e&entryLiteral != 0 {
			// Up to three literals of at most 15 bits from one refill.
			bitbuf >>= e & 63
			bitsleft -= uint8(e)
			out[o] = byte(e >> 16)
			o++
			e = lt[bitbuf&(1<<litlenBits-1)]
			if e&entryLiteral != 0 {
				bitbuf >>= e & 63
				bitsleft -= uint8(e)
				out[o] = byte(e >> 16)
				o++
				e = lt[bitbuf&(1<<litlenBits-1)]
				if e&entryLiteral != 0 {
					bitbuf >>= e & 63
					bitsleft -= uint8(e)
					out[o] = byte(e >> 16)
					o++
					continue
				}
			}
			// e is still the entry of the next bits: a refill only
			// adds bits above them.
			bitbuf |= binary.LittleEndian.Uint64(src[in:]) << (bitsleft & 63)
			in += int((63 - bitsleft) >> 3)
			bitsleft |= 56
		}
		if e&entryExc != 0 {
			if e&entrySub == 0 {
				if e&entryEOB == 0 {
					return 0, errInflateSymbol
				}
				bitbuf >>= e & 63
				bitsleft -= uint8(e)
				s.in, s.bitbuf, s.bitsleft = in, bitbuf, uint(bitsleft)
				return o, nil
			}
			bitbuf >>= litlenBits
			bitsleft -= litlenBits
			e = lt[(e>>16)+uint32(bitbuf&(1<<((e>>8)&15)-1))]
			if e&entryLiteral != 0 {
				bitbuf >>= e & 63
				bitsleft -= uint8(e)
				out[o] = byte(e >> 16)
				o++
				continue
			}
			if e&entryExc != 0 {
				if e&entryEOB == 0 {
					return 0, errInflateSymbol
				}
				bitbuf >>= e & 63
				bitsleft -= uint8(e)
				s.in, s.bitbuf, s.bitsleft = in, bitbuf, uint(bitsleft)
				return o, nil
			}
		}
		// A length: at most 15+5 bits, which leaves at least 36 for the
		// distance's 15+13.
		saved := bitbuf
		bitbuf >>= e & 63
		bitsleft -= uint8(e)
		length := int(e>>16) + int((saved&(1<<(e&63)-1))>>((e>>8)&15))

		d := dt[bitbuf&(1<<distBits-1)]
		if d&entryExc != 0 {
			if d&entrySub == 0 {
				return 0, errInflateSymbol
			}
			bitbuf >>= distBits
			bitsleft -= distBits
			d = dt[(d>>16)+uint32(bitbuf&(1<<((d>>8)&15)-1))]
			if d&entryExc != 0 {
				return 0, errInflateSymbol
			}
		}
		saved = bitbuf
		bitbuf >>= d & 63
		bitsleft -= uint8(d)
		dist := int(d>>16) + int((saved&(1<<(d&63)-1))>>((d>>8)&15))
		if dist > o {
			return 0, errInflateDistance
		}

		// Copy 8 bytes at a time, up to 7 past the match (the margin
		// has room). From dist >= 8 back, each load reads bytes
		// already written; closer, each step advances by dist bytes,
		// whose source is all written.
		from := o - dist
		switch {
		case dist >= 8:
			for n := 0; n < length; n += 8 {
				binary.LittleEndian.PutUint64(out[o+n:], binary.LittleEndian.Uint64(out[from+n:]))
			}
		case dist == 1:
			v := uint64(out[from]) * 0x0101010101010101
			for n := 0; n < length; n += 8 {
				binary.LittleEndian.PutUint64(out[o+n:], v)
			}
		default:
			for n := 0; n < length; n += dist {
				binary.LittleEndian.PutUint64(out[o+n:], binary.LittleEndian.Uint64(out[from+n:]))
			}
		}
		o += length
	}
	s.in, s.bitbuf, s.bitsleft = in, bitbuf, uint(bitsleft)
	return s.huffmanBlockSlow(out, o, lt, dt)
}

// huffmanBlockSlow is huffmanBlock near the end of the input or of the
// output: one symbol at a time, every write checked.
func (s *inflateState) huffmanBlockSlow(out []byte, o int, lt *[litlenTableSize]uint32, dt *[distTableSize]uint32) (int, error) {
	for {
		if err := s.refill(); err != nil {
			return 0, err
		}
		e := lt[s.bitbuf&(1<<litlenBits-1)]
		if e&entrySub != 0 {
			s.bits(litlenBits)
			e = lt[(e>>16)+uint32(s.bitbuf&(1<<((e>>8)&15)-1))]
		}
		if e&entryLiteral != 0 {
			if o >= len(out) {
				return 0, errInflateFull
			}
			s.bits(uint(e & 63))
			out[o] = byte(e >> 16)
			o++
			continue
		}
		if e&entryExc != 0 {
			if e&entryEOB == 0 {
				return 0, errInflateSymbol
			}
			s.bits(uint(e & 63))
			return o, nil
		}
		cl := (e >> 8) & 15
		length := int(e>>16) + int(s.bits(uint(e&63))>>cl)

		d := dt[s.bitbuf&(1<<distBits-1)]
		if d&entrySub != 0 {
			s.bits(distBits)
			d = dt[(d>>16)+uint32(s.bitbuf&(1<<((d>>8)&15)-1))]
		}
		if d&entryExc != 0 {
			return 0, errInflateSymbol
		}
		cl = (d >> 8) & 15
		dist := int(d>>16) + int(s.bits(uint(d&63))>>cl)
		if dist > o {
			return 0, errInflateDistance
		}
		if length > len(out)-o {
			return 0, errInflateFull
		}
		for i := range length {
			out[o+i] = out[o-dist+i]
		}
		o += length
	}
}
