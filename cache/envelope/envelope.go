// Package envelope is the one format of the values volfs keeps outside
// memory: the disk cache's files (cache/disk) and the shared tier's values
// (cache/shared). An envelope carries a payload (a decoded chunk, stored
// as given or zstd-compressed) with the key it was kept under and the
// identity of what it was made from, behind a header that states every
// length and a MAC that binds them:
//
//	offset size
//	0      4    magic, the keeper's own ("VDC3" disk, "VSC2" shared), so
//	            that one keeper never takes another's envelope
//	4      1    form: 0 stored as given, 1 zstd-compressed, 2 beside
//	            (the payload describes a file of plain bytes kept
//	            apart: FormBeside)
//	5      1    flags: 1 signed (the MAC is keyed with a secret)
//	6      2    zero
//	8      8    payload length, little-endian
//	16     4    key length, little-endian
//	20     4    identity length, little-endian
//	24     4    checksum: CRC-32C (Castagnoli) of bytes 0-23, the MAC, the
//	            key, the identity and the payload's CRC-32C, little-endian
//	28     4    zero
//	32     32   MAC: HMAC-SHA256 of bytes 0-23, the key, the identity and
//	            the payload's CRC-32C, little-endian; keyed with the
//	            secret when signed, with the empty key otherwise
//	64     k    the key
//	64+k   i    the identity
//	64+k+i      the payload
//
// The MAC covers the header (so every length, the key's included), the key
// itself and the identity: an envelope moved under another key, or cut
// short, or grown, is refused. The payload enters both the checksum and
// the MAC through its CRC-32C, which catches damage at 16-19 GB/s where
// HMAC-SHA256 runs at 1.4. The checksum needs no secret, so that damage
// (ErrCorrupt) is told apart from a value signed with another secret, or
// forged (ErrSignature): a reader may replace the one, and should leave
// the other to the nodes that can check it. Unsigned, the MAC is a
// checksum that anyone can recompute: only a secret shared by the writers
// makes an envelope trustworthy.
//
// Open checks an envelope for one key and one decoded size (or a bound)
// before a byte of its payload is used: the lengths first, against the
// most an envelope of that size can hold (MaxLen), then the MAC, then the
// key. Decode then decompresses at most the size expected.
package envelope

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/zstd"
)

// HeaderSize is the length of an envelope's header.
const HeaderSize = 64

// Forms of a payload.
const (
	FormStored = 0
	FormZstd   = 1
	// FormBeside: the payload describes the decoded bytes, kept as they
	// are in a file of their own (the disk cache's data files, which the
	// kernel can read without volfs): their length (8 bytes,
	// little-endian), CRC-32C (4 bytes, little-endian), and a note of the
	// keeper's own about the file (at most MaxNote bytes). Decode refuses
	// it: the keeper reads the file and checks it against the description
	// (Beside).
	FormBeside = 2
)

// MaxNote bounds the note of a FormBeside payload.
const MaxNote = 64

// Describe returns the FormBeside payload of data, with note.
func Describe(data, note []byte) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, 12+len(note)), uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(data, crcTable))
	return append(b, note...)
}

// Beside returns the length, CRC-32C and note that a FormBeside payload
// states.
func Beside(payload []byte) (n int64, crc uint32, note []byte, err error) {
	if len(payload) < 12 || len(payload) > 12+MaxNote || binary.LittleEndian.Uint64(payload) > 1<<62 {
		return 0, 0, nil, fmt.Errorf("%w: description of a file beside", ErrCorrupt)
	}
	return int64(binary.LittleEndian.Uint64(payload)), binary.LittleEndian.Uint32(payload[8:]), payload[12:], nil
}

// CRC returns the CRC-32C that extends crc with p (Castagnoli, as
// FormBeside's description states it).
func CRC(crc uint32, p []byte) uint32 { return crc32.Update(crc, crcTable, p) }

// MaxKey and MaxIdent bound a key and an identity.
const (
	MaxKey   = 1<<16 - 1
	MaxIdent = 1<<16 - 1
)

const (
	headOffset = 24 // the bytes the checksum and MAC begin with
	sumOffset  = 24
	macOffset  = 32
	flagSigned = 1
)

var (
	// ErrCorrupt is wrapped by Open's and Decode's errors for an envelope
	// that is damaged, cut, of another key, size or keeper: never served.
	ErrCorrupt = errors.New("envelope: corrupt")
	// ErrSignature is wrapped by Open's error for an envelope that is
	// sound but not signed with the secret given (signed with another, or
	// not signed, or signed when no secret was given).
	ErrSignature = errors.New("envelope: not signed with this secret")
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// The shared zstd coders: EncodeAll and DecodeAll are safe for concurrent
// use. DecodeAll stops at the capacity of the buffer it is given.
var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true))
)

// Header returns the header of the envelope of key, ident and payload in
// form, signed with secret when it is not empty. The envelope is the
// header followed by key, ident and payload (Seal makes it in one piece).
func Header(magic string, secret []byte, key string, ident []byte, form byte, payload []byte) [HeaderSize]byte {
	var h [HeaderSize]byte
	copy(h[:4], magic)
	h[4] = form
	if len(secret) > 0 {
		h[5] = flagSigned
	}
	binary.LittleEndian.PutUint64(h[8:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(key)))
	binary.LittleEndian.PutUint32(h[20:], uint32(len(ident)))
	pc := crc32.Checksum(payload, crcTable)
	copy(h[macOffset:], mac(secret, h[:headOffset], []byte(key), ident, pc))
	binary.LittleEndian.PutUint32(h[sumOffset:], checksum(h[:headOffset], h[macOffset:], []byte(key), ident, pc))
	return h
}

// Seal returns the envelope of key, ident and payload in form.
func Seal(magic string, secret []byte, key string, ident []byte, form byte, payload []byte) []byte {
	h := Header(magic, secret, key, ident, form, payload)
	v := make([]byte, 0, HeaderSize+len(key)+len(ident)+len(payload))
	v = append(v, h[:]...)
	v = append(v, key...)
	v = append(v, ident...)
	return append(v, payload...)
}

// Compress returns data in the smaller of its forms: zstd at the fastest
// level, or stored as given when zstd does not make it smaller.
func Compress(data []byte) (form byte, payload []byte) {
	z := encoder.EncodeAll(data, make([]byte, 0, len(data)/2+64))
	if len(z) >= len(data) {
		return FormStored, data
	}
	return FormZstd, z
}

// PayloadBound is the most bytes a payload of form may take when it holds
// size decoded bytes: zstd's worst case is raw blocks, 3 bytes of header
// per 128 KiB, plus a frame header and checksum.
func PayloadBound(form byte, size int64) int64 {
	switch form {
	case FormStored:
		return size
	case FormBeside:
		return 12 + MaxNote
	}
	return size + size>>10 + 64
}

// MaxLen is the most bytes an envelope of key can take when its payload
// holds size decoded bytes: what a reader may accept to read at all.
func MaxLen(key string, size int64) int64 {
	return HeaderSize + int64(len(key)) + MaxIdent + PayloadBound(FormZstd, size)
}

// Open checks raw, an envelope of magic, against key and a payload that
// decodes to size bytes (at most size bytes when upTo), and returns its
// identity, payload and form. A signed envelope is checked under secret;
// with no secret only unsigned envelopes are accepted, and with one only
// those signed with it (ErrSignature otherwise). The slices returned alias
// raw.
func Open(magic string, secret []byte, key string, size int64, raw []byte) (ident, payload []byte, form byte, err error) {
	if len(raw) < HeaderSize || string(raw[:4]) != magic || raw[6] != 0 || raw[7] != 0 {
		return nil, nil, 0, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	form = raw[4]
	n := binary.LittleEndian.Uint64(raw[8:])
	klen := uint64(binary.LittleEndian.Uint32(raw[16:]))
	ilen := uint64(binary.LittleEndian.Uint32(raw[20:]))
	if form > FormBeside || raw[5]&^flagSigned != 0 || size < 0 ||
		klen != uint64(len(key)) || ilen > MaxIdent ||
		n > uint64(PayloadBound(form, size)) || uint64(len(raw)) != HeaderSize+klen+ilen+n {
		return nil, nil, 0, fmt.Errorf("%w: lengths", ErrCorrupt)
	}
	body := raw[HeaderSize:]
	key2, ident, payload := body[:klen], body[klen:klen+ilen], body[klen+ilen:]
	pc := crc32.Checksum(payload, crcTable)
	if binary.LittleEndian.Uint32(raw[sumOffset:]) != checksum(raw[:headOffset], raw[macOffset:HeaderSize], key2, ident, pc) ||
		raw[28]|raw[29]|raw[30]|raw[31] != 0 {
		return nil, nil, 0, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	signed := raw[5]&flagSigned != 0
	if signed != (len(secret) > 0) {
		return nil, nil, 0, signatureError(signed)
	}
	if !hmac.Equal(mac(secret, raw[:headOffset], key2, ident, pc), raw[macOffset:HeaderSize]) {
		return nil, nil, 0, fmt.Errorf("%w: MAC", ErrSignature)
	}
	if string(key2) != key {
		// A collision of the keeper's hash of keys: another key's.
		return nil, nil, 0, fmt.Errorf("%w: key", ErrCorrupt)
	}
	return ident, payload, form, nil
}

func signatureError(signed bool) error {
	if signed {
		return fmt.Errorf("%w: signed, and no secret to check it", ErrSignature)
	}
	return fmt.Errorf("%w: not signed", ErrSignature)
}

// mac is the envelope's MAC of the header's first bytes head, the key, the
// identity and the payload's CRC-32C pc, keyed with secret.
func mac(secret, head, key, ident []byte, pc uint32) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(head)
	m.Write(key)
	m.Write(ident)
	m.Write(binary.LittleEndian.AppendUint32(nil, pc))
	return m.Sum(nil)
}

// checksum is the envelope's checksum of the header's first bytes head,
// its MAC, the key, the identity and the payload's CRC-32C pc.
func checksum(head, mac, key, ident []byte, pc uint32) uint32 {
	c := crc32.Update(0, crcTable, head)
	c = crc32.Update(c, crcTable, mac)
	c = crc32.Update(c, crcTable, key)
	c = crc32.Update(c, crcTable, ident)
	return crc32.Update(c, crcTable, binary.LittleEndian.AppendUint32(nil, pc))
}

// Decode returns the size bytes that payload of form holds.
func Decode(form byte, payload []byte, size int64) ([]byte, error) {
	switch form {
	case FormStored:
		if int64(len(payload)) != size {
			return nil, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(payload), size)
		}
		return payload, nil
	case FormZstd:
		// The frame states its size unless it is tiny (klauspost leaves
		// it out below 256 bytes).
		var h zstd.Header
		if err := h.Decode(payload); err != nil || h.HasFCS && h.FrameContentSize != uint64(size) {
			return nil, fmt.Errorf("%w: zstd frame of another size", ErrCorrupt)
		}
		// One byte more than wanted, so that a longer frame is seen.
		out, err := decoder.DecodeAll(payload, make([]byte, 0, size+1))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		if int64(len(out)) != size {
			return nil, fmt.Errorf("%w: %d bytes decompressed, want %d", ErrCorrupt, len(out), size)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: form %d", ErrCorrupt, form)
}

// DecodeUpTo returns the bytes that payload of form holds, refusing more
// than bound.
func DecodeUpTo(form byte, payload []byte, bound int64) ([]byte, error) {
	switch form {
	case FormStored:
		if int64(len(payload)) > bound {
			return nil, fmt.Errorf("%w: %d bytes, at most %d wanted", ErrCorrupt, len(payload), bound)
		}
		return payload, nil
	case FormZstd:
		var h zstd.Header
		if err := h.Decode(payload); err != nil || h.HasFCS && h.FrameContentSize > uint64(bound) {
			return nil, fmt.Errorf("%w: zstd frame over %d bytes", ErrCorrupt, bound)
		}
		// Room for one byte more than the frame states (or than a tiny
		// frame without a stated size holds), so that a longer one fails.
		room := min(bound+1, 1<<20)
		if h.HasFCS {
			room = int64(h.FrameContentSize) + 1
		}
		out, err := decoder.DecodeAll(payload, make([]byte, 0, room))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		if int64(len(out)) > bound || h.HasFCS && uint64(len(out)) != h.FrameContentSize {
			return nil, fmt.Errorf("%w: %d bytes decompressed, at most %d wanted", ErrCorrupt, len(out), bound)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: form %d", ErrCorrupt, form)
}
