package codec

import (
	"bytes"
	stdflate "compress/flate"
	stdgzip "compress/gzip"
	stdzlib "compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	kflate "github.com/klauspost/compress/flate"

	"github.com/volfs/volfs/internal/testenv"
)

// inflateInputs returns named test inputs: empty, tiny, text, random,
// repetitive, image-like, and sizes around the boundaries that matter to a
// DEFLATE decoder (a maximal match, the 32 KiB window, stored blocks'
// 64 KiB, several MiB).
func inflateInputs(t testing.TB) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	text := func(n int) []byte {
		words := []string{"volfs ", "chunk ", "zarr ", "the ", "of ", "deflate ", "huffman\n", "a ", "E", "x"}
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.Bytes()[:n]
	}
	image := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(128 + 40*((i>>6)%7) + r.IntN(24))
		}
		return b
	}
	in := map[string][]byte{
		"empty":  {},
		"one":    {'x'},
		"zeros1": make([]byte, 1),
		"abc":    []byte("abcabcabcabcabcabcabcabcabc"),
		"zeros":  make([]byte, 100000),
		"text1M": text(1 << 20),
		"image":  image(3<<20 + 12345),
		"rand":   random(200000),
	}
	for _, n := range []int{2, 7, 8, 9, 257, 258, 259, 32767, 32768, 32769, 65535, 65536, 65537} {
		in[fmt.Sprintf("text%d", n)] = text(n)
		in[fmt.Sprintf("rand%d", n)] = random(n)
	}
	// Short periods exercise the overlapping copies (distance < 8).
	for p := 1; p <= 9; p++ {
		in[fmt.Sprintf("period%d", p)] = bytes.Repeat(random(p), 5000/p+3)
	}
	// A random 32 KiB block repeated: matches at the largest distance.
	block := random(32768)
	in["far"] = append(append(append([]byte{}, block...), block...), block[:1000]...)
	// Mixed: runs of random, text and zeros, so that one stream has
	// stored, fixed and dynamic blocks.
	var mixed []byte
	for i := range 40 {
		switch i % 4 {
		case 0:
			mixed = append(mixed, random(r.IntN(20000))...)
		case 1:
			mixed = append(mixed, text(r.IntN(20000))...)
		case 2:
			mixed = append(mixed, make([]byte, r.IntN(3000))...)
		default:
			mixed = append(mixed, text(r.IntN(40))...)
		}
	}
	in["mixed"] = mixed
	return in
}

// deflateStd compresses with compress/flate at level, writing the input in
// pieces with a Flush between them when flushEvery > 0, so that the stream
// has many blocks of each kind.
func deflateStd(t testing.TB, raw []byte, level, flushEvery int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := stdflate.NewWriter(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	for p := raw; len(p) > 0; {
		n := len(p)
		if flushEvery > 0 {
			n = min(n, flushEvery)
		}
		w.Write(p[:n])
		p = p[n:]
		if flushEvery > 0 {
			w.Flush()
		}
	}
	w.Close()
	return buf.Bytes()
}

// deflateKlauspost compresses with klauspost/compress/flate at level.
func deflateKlauspost(t testing.TB, raw []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := kflate.NewWriter(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	w.Close()
	return buf.Bytes()
}

// checkInflate decodes the raw stream z with inflate into a buffer of
// exactly len(want) bytes, then into one a byte short, and checks the
// bytes, the length of the stream it reports (z may have a tail) and the
// refusal.
func checkInflate(t *testing.T, name string, z, want []byte, tail int) {
	t.Helper()
	out := make([]byte, len(want))
	n, used, err := inflate(out, z)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if n != len(want) || !bytes.Equal(out[:n], want) {
		t.Errorf("%s: decoded %d bytes, want %d (equal prefix: %v)", name, n, len(want), bytes.Equal(out[:min(n, len(want))], want[:min(n, len(want))]))
	}
	if used != len(z)-tail {
		t.Errorf("%s: stream of %d bytes, reported %d", name, len(z)-tail, used)
	}
	if len(want) > 0 && len(want) < 1<<20 {
		if _, _, err := inflate(make([]byte, len(want)-1), z); err != errInflateFull {
			t.Errorf("%s: into a buffer one byte short: %v, want errInflateFull", name, err)
		}
	}
}

// TestInflateDifferential decodes streams written by compress/flate and
// klauspost/compress at every level, including stored (0) and
// Huffman-only (-2), and checks the result against the input.
func TestInflateDifferential(t *testing.T) {
	inputs := inflateInputs(t)
	for name, raw := range inputs {
		for _, level := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2} {
			if len(raw) > 70000 && level != 0 && level != 6 && level != -2 {
				continue // keep the test fast: big inputs at a few levels
			}
			z := deflateStd(t, raw, level, 0)
			checkInflate(t, fmt.Sprintf("%s/std%d", name, level), z, raw, 0)
			// A tail after the stream is not part of it.
			checkInflate(t, fmt.Sprintf("%s/std%d+tail", name, level), append(z[:len(z):len(z)], "tail bytes"...), raw, 10)
			z = deflateKlauspost(t, raw, level)
			checkInflate(t, fmt.Sprintf("%s/klauspost%d", name, level), z, raw, 0)
		}
		// Flushes make blocks of every kind, with matches across them.
		for _, every := range []int{1, 100, 5000} {
			if len(raw)/every > 3000 {
				continue
			}
			z := deflateStd(t, raw, 6, every)
			checkInflate(t, fmt.Sprintf("%s/flush%d", name, every), z, raw, 0)
		}
	}
}

// TestInflateConcatenatedBlocks joins non-final streams from different
// encoders and levels into one: stored, fixed and dynamic blocks follow
// each other at arbitrary bit positions.
func TestInflateConcatenatedBlocks(t *testing.T) {
	inputs := inflateInputs(t)
	var z, want []byte
	i := 0
	for _, name := range []string{"text257", "rand9", "abc", "period3", "zeros", "text32769", "rand65537", "one", "far", "empty", "text2"} {
		raw := inputs[name]
		var buf bytes.Buffer
		w, _ := stdflate.NewWriter(&buf, []int{0, 1, 6, 9, -2}[i%5])
		i++
		w.Write(raw)
		w.Flush() // ends non-final, on a byte boundary
		z = append(z, buf.Bytes()...)
		want = append(want, raw...)
	}
	z = append(z, deflateStd(t, []byte("the end"), 6, 0)...)
	want = append(want, "the end"...)
	checkInflate(t, "concatenated", z, want, 0)
}

// bitWriter writes an LSB-first bit stream, as DEFLATE packs it.
type bitWriter struct {
	buf   []byte
	nbits uint
}

func (w *bitWriter) bits(v uint32, n uint) {
	for range n {
		if w.nbits%8 == 0 {
			w.buf = append(w.buf, 0)
		}
		w.buf[len(w.buf)-1] |= byte(v&1) << (w.nbits % 8)
		v >>= 1
		w.nbits++
	}
}

// code writes a Huffman codeword of n bits, MSB first.
func (w *bitWriter) code(c uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.bits(c>>uint(i)&1, 1)
	}
}

// fixedLiteral writes symbol s (< 288) in the fixed literal/length code.
func (w *bitWriter) fixedSym(s int) {
	switch {
	case s < 144:
		w.code(uint32(0x30+s), 8)
	case s < 256:
		w.code(uint32(0x190+s-144), 9)
	case s < 280:
		w.code(uint32(s-256), 7)
	default:
		w.code(uint32(0xc0+s-280), 8)
	}
}

// TestInflateFixedHandmade decodes fixed-code blocks written bit by bit
// from RFC 1951's tables, independently of any encoder: the largest
// distance (32768) with the longest match (258, symbol 285), distance
// codes with extra bits, and the errors for a distance one past the
// output's start and for the symbols the fixed code has but RFC 1951
// forbids (286, 287; distances 30, 31).
func TestInflateFixedHandmade(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	prefix := make([]byte, 32768)
	for i := range prefix {
		prefix[i] = byte(r.Uint32())
	}
	w := &bitWriter{}
	w.bits(1, 1) // final
	w.bits(1, 2) // fixed
	for _, b := range prefix {
		w.fixedSym(int(b))
	}
	// Length 258 (symbol 285), distance 32768 (code 29, 13 extra bits
	// 8191): copies the prefix's first 258 bytes.
	w.fixedSym(285)
	w.code(29, 5)
	w.bits(8191, 13)
	// Length 10 (symbol 264), distance 5 (code 4, 1 extra bit 0).
	w.fixedSym(264)
	w.code(4, 5)
	w.bits(0, 1)
	// Length 227+31=258 via symbol 284 with extra 31... which RFC 1951
	// allows (zlib writes 285 instead); distance 1.
	w.fixedSym(284)
	w.bits(31, 5)
	w.code(0, 5)
	w.fixedSym(256)
	want := append([]byte{}, prefix...)
	want = append(want, prefix[:258]...)
	for range 10 {
		want = append(want, want[len(want)-5])
	}
	for range 258 {
		want = append(want, want[len(want)-1])
	}
	checkInflate(t, "handmade", w.buf, want, 0)
	if got, err := io.ReadAll(stdflate.NewReader(bytes.NewReader(w.buf))); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("compress/flate disagrees with the handmade stream: %v", err)
	}

	for name, tc := range map[string]struct {
		body func(w *bitWriter)
		err  error
	}{
		"distance past start": {func(w *bitWriter) {
			w.fixedSym('a')
			w.fixedSym(257) // length 3
			w.code(1, 5)    // distance 2
		}, errInflateDistance},
		"distance at start": {func(w *bitWriter) {
			w.fixedSym(257)
			w.code(0, 5)
		}, errInflateDistance},
		"symbol 286": {func(w *bitWriter) { w.fixedSym(286) }, errInflateSymbol},
		"symbol 287": {func(w *bitWriter) { w.fixedSym(287) }, errInflateSymbol},
		"distance 30": {func(w *bitWriter) {
			w.fixedSym('a')
			w.fixedSym(257)
			w.code(30, 5)
		}, errInflateSymbol},
		"distance 31": {func(w *bitWriter) {
			w.fixedSym('a')
			w.fixedSym(257)
			w.code(31, 5)
		}, errInflateSymbol},
		"block type 3": {func(w *bitWriter) {
			w.buf, w.nbits = nil, 0
			w.bits(1, 1)
			w.bits(3, 2)
		}, errInflateBlock},
		"stored length": {func(w *bitWriter) {
			w.buf, w.nbits = nil, 0
			w.bits(1, 1)
			w.bits(0, 2)
			w.bits(0, 5)
			w.bits(5, 16)
			w.bits(5, 16)
		}, errInflateStored},
	} {
		w := &bitWriter{}
		w.bits(1, 1)
		w.bits(1, 2)
		tc.body(w)
		for range 8 {
			w.fixedSym(256)
		}
		for _, size := range []int{0, 100, 1000} {
			if _, _, err := inflate(make([]byte, size), w.buf); err != tc.err && !(size == 0 && err == errInflateFull) {
				t.Errorf("%s, output %d: got %v, want %v", name, size, err, tc.err)
			}
		}
	}
}

// dynamicBlock writes a final dynamic block header with the given code
// lengths (no repeat codes, a precode of 4-bit codewords for the lengths
// 0-15) followed by body.
func dynamicBlock(litlen, dist []uint8, body func(w *bitWriter)) []byte {
	w := &bitWriter{}
	w.bits(1, 1)
	w.bits(2, 2)
	w.bits(uint32(len(litlen)-257), 5)
	w.bits(uint32(len(dist)-1), 5)
	w.bits(19-4, 4)
	// Precode: symbols 0-15 get 4 bits, 16-18 none: complete.
	for _, s := range precodeOrder {
		if s < 16 {
			w.bits(4, 3)
		} else {
			w.bits(0, 3)
		}
	}
	for _, l := range append(append([]uint8{}, litlen...), dist...) {
		w.code(uint32(l), 4) // the canonical code of symbol l is l
	}
	if body != nil {
		body(w)
	}
	return w.buf
}

// TestInflateDynamicCodes checks the Huffman code rules on handmade
// dynamic headers: complete codes, the two incomplete codes decoders
// accept (a single one-bit code, no distance code at all), and the ones
// they refuse. compress/flate decides each case the same way.
func TestInflateDynamicCodes(t *testing.T) {
	litlen := func(lens map[int]uint8) []uint8 {
		l := make([]uint8, 258)
		for s, n := range lens {
			l[s] = n
		}
		return l
	}
	for name, tc := range map[string]struct {
		litlen, dist []uint8
		body         func(w *bitWriter)
		want         string // "" for an error
	}{
		// 'a' and EOB, one bit each; no distances.
		"two one-bit codes": {litlen(map[int]uint8{'a': 1, 256: 1}), []uint8{0}, func(w *bitWriter) {
			w.code(0, 1)
			w.code(0, 1)
			w.code(1, 1)
		}, "aa"},
		// EOB alone: one one-bit code, incomplete but accepted.
		"only EOB": {litlen(map[int]uint8{256: 1}), []uint8{0}, func(w *bitWriter) { w.code(0, 1) }, ""},
		// The unused codeword of a single-code distance tree.
		"single distance code used": {litlen(map[int]uint8{'a': 2, 256: 2, 257: 1}), []uint8{1}, func(w *bitWriter) {
			w.code(2, 2) // a
			w.code(0, 1) // length 3
			w.code(0, 1) // distance 1
			w.code(3, 2) // EOB
		}, "aaaa"},
		"single distance code, bad codeword": {litlen(map[int]uint8{'a': 2, 256: 2, 257: 1}), []uint8{1}, func(w *bitWriter) {
			w.code(2, 2)
			w.code(0, 1)
			w.code(1, 1) // the other codeword: invalid
			w.code(3, 2)
		}, "error"},
		"length with no distance code": {litlen(map[int]uint8{'a': 2, 256: 2, 257: 1}), []uint8{0}, func(w *bitWriter) {
			w.code(2, 2)
			w.code(0, 1)
			w.code(0, 1)
			w.code(3, 2)
		}, "error"},
		"incomplete litlen": {litlen(map[int]uint8{'a': 2, 256: 2}), []uint8{0}, func(w *bitWriter) { w.code(1, 2) }, "error"},
		"over-subscribed":   {litlen(map[int]uint8{'a': 1, 'b': 1, 256: 1}), []uint8{0}, func(w *bitWriter) { w.code(1, 1) }, "error"},
		"no EOB":            {litlen(map[int]uint8{'a': 1, 'b': 1}), []uint8{0}, func(w *bitWriter) { w.code(1, 1) }, "error"},
		"incomplete dist": {litlen(map[int]uint8{'a': 2, 256: 2, 257: 1}), []uint8{2, 2, 2}, func(w *bitWriter) {
			w.code(2, 2)
			w.code(0, 1)
			w.code(0, 2)
			w.code(3, 2)
		}, "error"},
		// 15-bit codewords: every subtable level in use.
		"long codes": {func() []uint8 {
			l := make([]uint8, 257)
			for s := range 14 {
				l[s] = uint8(s + 1) // lengths 1..14
			}
			l[14], l[256] = 15, 15
			return l
		}(), []uint8{0}, func(w *bitWriter) {
			// symbol s has codeword 2^(s+1)-2 of s+1 bits.
			for _, s := range []int{13, 0, 14, 5} {
				w.code(uint32(1)<<(s+1)-2, uint(min(s+1, 15)))
			}
			w.code(1<<15-1, 15) // EOB: the all-ones codeword
		}, "\x0d\x00\x0e\x05"},
	} {
		z := dynamicBlock(tc.litlen, tc.dist, tc.body)
		stdOut, stdErr := io.ReadAll(stdflate.NewReader(bytes.NewReader(z)))
		out := make([]byte, 100)
		n, _, err := inflate(out, z)
		switch {
		case tc.want == "error" && err == nil:
			t.Errorf("%s: decoded %q, want an error", name, out[:n])
		case tc.want != "error" && (err != nil || string(out[:n]) != tc.want):
			t.Errorf("%s: got %q, %v; want %q", name, out[:n], err, tc.want)
		}
		if (stdErr != nil) != (err != nil) || (err == nil && !bytes.Equal(stdOut, out[:n])) {
			t.Errorf("%s: compress/flate gives %q, %v; inflate %q, %v", name, stdOut, stdErr, out[:n], err)
		}
	}
}

// TestInflateTruncated: every prefix of a stream fails (the decoder pads
// with zero bits past the end and must notice using them), never panics
// nor returns bytes.
func TestInflateTruncated(t *testing.T) {
	inputs := inflateInputs(t)
	for _, name := range []string{"rand9", "abc", "period3", "mixed", "one", "empty", "text32769", "rand65537"} {
		raw := inputs[name]
		for _, level := range []int{0, 1, 6, -2} {
			z := deflateStd(t, raw, level, 1000)
			// Every cut of the first 300 and last 64 bytes, 100 between.
			step := max(1, len(z)/100)
			out := make([]byte, len(raw))
			for cut := 0; cut < len(z); cut++ {
				if cut > 300 && cut < len(z)-64 && cut%step != 0 {
					continue
				}
				if n, _, err := inflate(out, z[:cut]); err == nil {
					t.Fatalf("%s/%d: prefix of %d of %d bytes decoded to %d bytes", name, level, cut, len(z), n)
				}
			}
		}
	}
}

// TestGzipBitFlips flips every bit of small gzip and zlib streams (and a
// sample of a larger one's): each either fails or decodes to the original
// bytes (a flip in a header field nobody reads), never to other bytes.
func TestGzipBitFlips(t *testing.T) {
	inputs := inflateInputs(t)
	for _, name := range []string{"text2", "abc", "text257", "period7", "rand258", "text32769"} {
		raw := inputs[name]
		var gz, zl bytes.Buffer
		gw, _ := stdgzip.NewWriterLevel(&gz, 6)
		gw.Name = "name.raw"
		gw.Write(raw)
		gw.Close()
		zw, _ := stdzlib.NewWriterLevel(&zl, 6)
		zw.Write(raw)
		zw.Close()
		for codec, z := range map[string][]byte{"gzip": gz.Bytes(), "zlib": zl.Bytes()} {
			decode := mustCodec(t, codec)
			step := max(1, len(z)*8/3000)
			for bit := 0; bit < len(z)*8; bit += step {
				c := append([]byte{}, z...)
				c[bit/8] ^= 1 << (bit % 8)
				out, err := decode(nil, c, len(raw))
				if err == nil && !bytes.Equal(out, raw) {
					t.Fatalf("%s/%s: bit %d flipped decodes to other bytes without an error", name, codec, bit)
				}
				if err != nil && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s/%s: bit %d: error %v does not wrap ErrCorrupt", name, codec, bit, err)
				}
			}
		}
	}
}

// TestGzipIndependent decodes gzip and zlib streams written by other
// programs: Python's gzip and zlib modules (every level and zlib strategy,
// raw, zlib and gzip wrappers, header fields set) and the gzip(1) CLI
// (levels 1 and 9, with a name, and concatenated members). Each output is
// checked against a SHA-256 of the input computed by the same program.
func TestGzipIndependent(t *testing.T) {
	python := testenv.LookPath(t, "python3", "apt-get install python3")
	// The script prints, per stream: codec, sha256 of the input, input
	// length and the stream, hex encoded.
	script := `
import gzip, zlib, hashlib, random, sys, io
random.seed(3)
def emit(codec, raw, z):
    print(codec, hashlib.sha256(raw).hexdigest(), len(raw), z.hex())
smooth = bytes((128 + 40 * ((i >> 6) % 7) + random.randrange(24)) & 255 for i in range(150000))
text = (b"The quick brown fox jumps over the lazy dog. " * 4000)[:100000]
noise = bytes(random.randrange(256) for _ in range(70000))
inputs = [b"", b"a", text, smooth, noise, text[:300] + noise[:40000] + bytes(5000) + smooth[:100000]]
strategies = [zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_FIXED]
for raw in inputs:
    for level in range(10):
        emit("gzip", raw, gzip.compress(raw, compresslevel=level, mtime=0))
        emit("zlib", raw, zlib.compress(raw, level))
    for st in strategies:
        for wbits, codec in ((-15, "raw"), (15, "zlib"), (31, "gzip"), (-9, "raw"), (9, "zlib")):
            c = zlib.compressobj(6, zlib.DEFLATED, wbits, 9, st)
            emit(codec, raw, c.compress(raw) + c.flush())
    # Small flushes: many blocks, some of them empty stored ones.
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    z = b"".join(c.compress(raw[i:i + 777]) + c.flush(zlib.Z_SYNC_FLUSH if i % 2 else zlib.Z_FULL_FLUSH) for i in range(0, len(raw), 777))
    emit("gzip", raw, z + c.flush())
# A header with FEXTRA, FNAME, FCOMMENT and FHCRC, written by hand.
raw = text[:5000]
c = zlib.compressobj(9, zlib.DEFLATED, -15)
body = c.compress(raw) + c.flush()
head = bytes([0x1f, 0x8b, 8, 2 | 4 | 8 | 16, 1, 2, 3, 4, 0, 3]) + (6).to_bytes(2, "little") + b"AB\x02\x00xy" + b"file.raw\x00" + b"a comment\x00"
head += (zlib.crc32(head) & 0xffff).to_bytes(2, "little")
emit("gzip", raw, head + body + zlib.crc32(raw).to_bytes(4, "little") + len(raw).to_bytes(4, "little"))
`
	outb, err := exec.Command(python, "-c", script).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var streams []indepStream
	for _, line := range bytes.Split(bytes.TrimSpace(outb), []byte("\n")) {
		var s indepStream
		var zhex string
		if _, err := fmt.Sscan(string(line), &s.codec, &s.sum, &s.size, &zhex); err != nil {
			t.Fatalf("bad line %.80q: %v", line, err)
		}
		s.z, _ = hex.DecodeString(zhex)
		streams = append(streams, s)
	}
	if gz, err := exec.LookPath("gzip"); err == nil {
		raw := inflateInputs(t)["text65537"]
		sum := sha256.Sum256(raw)
		// From a file, gzip(1) stores its name and time in the header.
		path := filepath.Join(t.TempDir(), "chunk.raw")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		var both []byte
		for _, args := range [][]string{{"-1", "-c", "-n"}, {"-9", "-c", "-n"}, {"-6", "-c", path}} {
			cmd := exec.Command(gz, args...)
			cmd.Stdin = bytes.NewReader(raw)
			z, err := cmd.Output()
			if err != nil {
				t.Fatalf("gzip %v: %v", args, err)
			}
			streams = append(streams, indepStream{"gzip", hex.EncodeToString(sum[:]), len(raw), z})
			both = append(both, z...)
		}
		// Three members decode as one stream, as gzip -d does.
		sum3 := sha256.Sum256(bytes.Repeat(raw, 3))
		streams = append(streams, indepStream{"gzip", hex.EncodeToString(sum3[:]), 3 * len(raw), both})
	} else {
		t.Log("gzip(1) not found: only Python's streams")
	}
	for i, s := range streams {
		var out []byte
		var err error
		switch s.codec {
		case "raw":
			out = make([]byte, s.size)
			var n int
			n, _, err = inflate(out, s.z)
			out = out[:n]
		default:
			// Decode into exactly the size, and with no size hint.
			out, err = mustCodec(t, s.codec)(nil, s.z, s.size)
			if s.codec == "gzip" && err == nil {
				var again []byte
				if again, err = Gunzip(s.z, 0, s.size); err == nil && !bytes.Equal(again, out) {
					err = errors.New("Gunzip with no hint disagrees")
				}
			}
		}
		if err != nil {
			t.Errorf("stream %d (%s, %d bytes): %v", i, s.codec, s.size, err)
			continue
		}
		if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != s.sum {
			t.Errorf("stream %d (%s, %d bytes): sha256 of the output differs", i, s.codec, s.size)
		}
	}
}

type indepStream struct {
	codec, sum string
	size       int
	z          []byte
}

// TestGunzipGrows: a size hint that is short only costs a new buffer.
func TestGunzipGrows(t *testing.T) {
	raw := inflateInputs(t)["text65537"]
	var gz bytes.Buffer
	w := stdgzip.NewWriter(&gz)
	w.Write(raw)
	w.Close()
	for _, want := range []int{0, 1, 100, len(raw) - 1, len(raw), len(raw) + 1} {
		for _, trailer := range []bool{true, false} {
			z := gz.Bytes()
			if !trailer {
				// A wrong ISIZE hint is only a hint until the check.
				z = append(append([]byte{}, z...), z...) // two members: ISIZE of one
			}
			got, err := Gunzip(z, want, 2*len(raw))
			if err != nil || len(got) != len(z)/len(gz.Bytes())*len(raw) {
				t.Errorf("want %d, %d members: got %d bytes, %v", want, len(z)/len(gz.Bytes()), len(got), err)
			}
		}
	}
	if _, err := Gunzip(gz.Bytes(), 10, len(raw)-1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("limit one short: %v, want ErrCorrupt", err)
	}
}

// FuzzInflate: inflate agrees with compress/flate on any input: the same
// bytes and the same stream length, or both fail; a stream longer than
// the output buffer fails with errInflateFull.
func FuzzInflate(f *testing.F) {
	inputs := inflateInputs(f)
	for _, name := range []string{"abc", "text257", "period3", "rand9", "one", "empty"} {
		for _, level := range []int{0, 1, 9, -2} {
			f.Add(deflateStd(f, inputs[name], level, 100), 1000)
		}
	}
	f.Fuzz(func(t *testing.T, z []byte, limit int) {
		limit = max(0, min(limit, 1<<18))
		br := bytes.NewReader(z)
		want, stdErr := io.ReadAll(io.LimitReader(stdflate.NewReader(br), int64(limit)+1))
		out := make([]byte, limit)
		n, used, err := inflate(out, z)
		switch {
		case stdErr != nil:
			if err == nil {
				t.Fatalf("compress/flate fails (%v), inflate decodes %d bytes", stdErr, n)
			}
		case len(want) > limit:
			if err != nil && err != errInflateFull {
				// compress/flate may have stopped before a later error;
				// any error is right as long as nothing is returned.
				return
			}
			if err == nil {
				t.Fatalf("decoded %d bytes into %d", n, limit)
			}
		case err != nil:
			t.Fatalf("compress/flate decodes %d bytes, inflate fails: %v", len(want), err)
		case !bytes.Equal(out[:n], want):
			t.Fatalf("decoded %d bytes, compress/flate %d: they differ", n, len(want))
		case used != len(z)-br.Len():
			t.Fatalf("stream takes %d bytes, compress/flate read %d", used, len(z)-br.Len())
		}
	})
}

// TestBuildTableDirty checks buildTable against the definition of a
// canonical Huffman code (RFC 1951 3.2.2) on random complete codes and on
// the one-codeword code, built into tables that hold another code's
// entries first, as the tables pooled between streams do: every primary
// entry must be written, each codeword must lead to its symbol's entry
// (through its subtable when longer than the primary index), and the
// unused codeword of the one-codeword code must stay invalid.
func TestBuildTableDirty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	table := make([]uint32, litlenTableSize)
	const junk = entryLiteral | 'J'<<16 | 9<<8 | 9 // a valid-looking literal
	for round := range 2000 {
		// A complete code: split a random leaf until there are n.
		n := 2 + r.IntN(maxLitlenSyms-1)
		if round%7 == 0 {
			n = 2 + r.IntN(30)
		}
		leaves := []uint8{0}
		for len(leaves) < n {
			k := r.IntN(len(leaves))
			if leaves[k] == 15 {
				continue
			}
			leaves[k]++
			leaves = append(leaves, leaves[k])
		}
		lens := make([]uint8, maxLitlenSyms)
		for i, s := range r.Perm(maxLitlenSyms)[:n] {
			lens[s] = leaves[i]
		}
		checkTable(t, table, litlenBits, lens, junk)
	}
	one := make([]uint8, maxDistSyms)
	one[5] = 1
	checkTable(t, table[:distTableSize], distBits, one, junk)
	if table[1] != entryExc {
		t.Fatalf("one-codeword code: the unused codeword 1 has entry %#x, want entryExc", table[1])
	}
}

// checkTable fills table with junk, builds the code lens into it and
// checks each symbol's codeword against the canonical assignment.
func checkTable(t *testing.T, table []uint32, tableBits uint, lens []uint8, junk uint32) {
	t.Helper()
	for i := range table {
		table[i] = junk
	}
	syms := make([]uint32, len(lens))
	for s := range syms {
		syms[s] = uint32(s+1) << 16
	}
	if !buildTable(table, tableBits, lens, syms) {
		t.Fatalf("lens %v: refused", lens)
	}
	for i, e := range table[:1<<tableBits] {
		if e == junk {
			t.Fatalf("lens %v: primary entry %d not written", lens, i)
		}
	}
	// RFC 1951 3.2.2: the first codeword of each length, then symbols in
	// order.
	var count [16]int
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	var next [16]int
	code := 0
	for l := 1; l <= 15; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	mask := 1<<tableBits - 1
	for s, l := range lens {
		if l == 0 {
			continue
		}
		c := next[l]
		next[l]++
		rev := 0
		for b := range int(l) {
			rev |= (c >> (int(l) - 1 - b) & 1) << b
		}
		e := table[rev&mask]
		if uint(l) <= tableBits {
			if want := syms[s] + uint32(l)<<8 + uint32(l); e != want {
				t.Fatalf("lens %v: symbol %d (codeword %b of %d bits): entry %#x, want %#x", lens, s, c, l, e, want)
			}
			continue
		}
		if e&entrySub == 0 || e&0xff != uint32(tableBits) {
			t.Fatalf("lens %v: symbol %d: primary entry %#x is no subtable pointer", lens, s, e)
		}
		start, subBits := int(e>>16), uint(e>>8&15)
		sl := uint(l) - tableBits
		if sl > subBits {
			t.Fatalf("lens %v: symbol %d: %d bits past the primary index, subtable of %d", lens, s, sl, subBits)
		}
		got := table[start+(rev>>tableBits)&(1<<subBits-1)]
		if want := syms[s] + uint32(sl)<<8 + uint32(sl); got != want {
			t.Fatalf("lens %v: symbol %d: subtable entry %#x, want %#x", lens, s, got, want)
		}
	}
}

// TestInflateRandomCodes decodes streams of dynamic blocks with random
// handmade codes, each decoded into the tables the last one left (pooled),
// as compress/flate does: precodes of every shape up to 7 bits (the
// one-codeword one too), literal/length codes with lengths from 1 to 15
// (shorter than the primary index or longer), distance codes complete, of
// one codeword, or empty; bodies that use the unused codeword of a
// one-codeword code or a distance before the output's start are errors for
// both.
func TestInflateRandomCodes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// code returns random lengths, at most maxL bits, of a complete code
	// over n symbols of the nsyms (n 1: the one-bit codeword), with
	// symbols in must among them.
	code := func(nsyms, n int, maxL uint8, must ...int) []uint8 {
		leaves := []uint8{0}
		if n == 1 {
			leaves[0] = 1
		}
		for len(leaves) < n {
			k := r.IntN(len(leaves))
			if leaves[k] == maxL {
				continue
			}
			leaves[k]++
			leaves = append(leaves, leaves[k])
		}
		lens := make([]uint8, nsyms)
		perm := r.Perm(nsyms)
		for i, s := range must {
			j := 0
			for perm[j] != s {
				j++
			}
			perm[i], perm[j] = perm[j], perm[i]
		}
		for i, s := range perm[:n] {
			lens[s] = leaves[i]
		}
		return lens
	}
	// codewords are the canonical codewords of lens (RFC 1951 3.2.2).
	codewords := func(lens []uint8) []uint32 {
		var count [16]int
		for _, l := range lens {
			count[l]++
		}
		count[0] = 0
		var next [16]uint32
		c := uint32(0)
		for l := 1; l <= 15; l++ {
			c = (c + uint32(count[l-1])) << 1
			next[l] = c
		}
		cw := make([]uint32, len(lens))
		for s, l := range lens {
			if l != 0 {
				cw[s] = next[l]
				next[l]++
			}
		}
		return cw
	}
	used := func(lens []uint8) []int {
		var u []int
		for s, l := range lens {
			if l != 0 {
				u = append(u, s)
			}
		}
		return u
	}
	mismatches, decoded := 0, 0
	for round := range 3000 {
		w := &bitWriter{}
		blocks := 1 + r.IntN(3)
		for b := range blocks {
			nlit := 257 + r.IntN(30)
			ndist := 1 + r.IntN(30)
			var litlen, dist []uint8
			switch maxL := uint8(1 + r.IntN(15)); {
			case r.IntN(20) == 0:
				litlen = code(nlit, 1, 1, 256)
			default:
				n := 2 + r.IntN(min(nlit-1, 1<<maxL-1))
				litlen = code(nlit, n, maxL, 256)
			}
			switch r.IntN(4) {
			case 0:
				dist = make([]uint8, ndist) // no distance code
			case 1:
				dist = code(ndist, 1, 1)
			default:
				maxL := uint8(1 + r.IntN(15))
				dist = code(ndist, 1+r.IntN(min(ndist, 1<<maxL)), maxL)
			}
			all := append(append([]uint8{}, litlen...), dist...)
			var vals []int // the length values the precode must hold
			seen := map[int]bool{}
			for _, l := range all {
				if !seen[int(l)] {
					seen[int(l)] = true
					vals = append(vals, int(l))
				}
			}
			n := len(vals) + r.IntN(19-len(vals)+1)
			if n < 2 && r.IntN(2) == 0 {
				n = 2
			}
			pre := code(19, n, 7, vals...)
			preCW := codewords(pre)
			final := uint32(0)
			if b == blocks-1 {
				final = 1
			}
			w.bits(final, 1)
			w.bits(2, 2)
			w.bits(uint32(nlit-257), 5)
			w.bits(uint32(ndist-1), 5)
			nclen := 19
			for nclen > 4 && pre[precodeOrder[nclen-1]] == 0 {
				nclen--
			}
			w.bits(uint32(nclen-4), 4)
			for _, s := range precodeOrder[:nclen] {
				w.bits(uint32(pre[s]), 3)
			}
			for _, l := range all {
				w.code(preCW[l], uint(pre[l]))
			}
			litCW, distCW := codewords(litlen), codewords(dist)
			lits, dists := used(litlen), used(dist)
			for range r.IntN(40) {
				s := lits[r.IntN(len(lits))]
				if s == 256 {
					continue
				}
				w.code(litCW[s], uint(litlen[s]))
				if s < 256 {
					continue
				}
				if s > 264 && s < 285 {
					w.bits(r.Uint32(), uint((s-261)/4))
				}
				switch {
				case len(dists) == 0:
					// A length with no distance code: both refuse.
				case len(dists) == 1 && dist[dists[0]] == 1 && r.IntN(8) == 0:
					w.code(1, 1) // the unused codeword
				default:
					d := dists[r.IntN(len(dists))]
					w.code(distCW[d], uint(dist[d]))
					if d >= 4 {
						w.bits(r.Uint32(), uint(d/2-1))
					}
				}
			}
			w.code(litCW[256], uint(litlen[256]))
		}
		z := w.buf
		stdOut, stdErr := io.ReadAll(stdflate.NewReader(bytes.NewReader(z)))
		out := make([]byte, len(stdOut)+1<<16)
		n, _, err := inflate(out, z)
		if err == nil {
			decoded++
		}
		if (stdErr != nil) != (err != nil) || err == nil && !bytes.Equal(stdOut, out[:n]) {
			mismatches++
			if mismatches < 5 {
				t.Errorf("round %d: compress/flate gives %d bytes, %v; inflate %d bytes, %v", round, len(stdOut), stdErr, n, err)
			}
		}
	}
	if decoded < 1000 {
		t.Errorf("only %d of 3000 streams decode: the test tries too few codes", decoded)
	}
	if mismatches > 0 {
		t.Errorf("%d of 3000 streams decoded otherwise than compress/flate", mismatches)
	}
}
