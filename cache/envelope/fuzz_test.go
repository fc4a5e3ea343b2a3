package envelope

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// seal builds an envelope in the documented layout, independently of
// Seal.
func seal(magic string, secret []byte, key, ident string, form byte, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	flags := byte(0)
	if len(secret) > 0 {
		flags = 1
	}
	b.Write([]byte{form, flags, 0, 0})
	binary.Write(&b, binary.LittleEndian, uint64(len(payload)))
	binary.Write(&b, binary.LittleEndian, uint32(len(key)))
	binary.Write(&b, binary.LittleEndian, uint32(len(ident)))
	tab := crc32.MakeTable(crc32.Castagnoli)
	pc := binary.LittleEndian.AppendUint32(nil, crc32.Checksum(payload, tab))
	m := hmac.New(sha256.New, secret)
	m.Write(b.Bytes())
	m.Write([]byte(key + ident))
	m.Write(pc)
	mac := m.Sum(nil)
	sum := crc32.Checksum(append(append(append(bytes.Clone(b.Bytes()), mac...), key+ident...), pc...), tab)
	binary.Write(&b, binary.LittleEndian, sum)
	b.Write([]byte{0, 0, 0, 0})
	b.Write(mac)
	b.WriteString(key + ident)
	b.Write(payload)
	return b.Bytes()
}

var fuzzSecret = bytes.Repeat([]byte{0x5a}, 32)

// FuzzOpen feeds Open arbitrary envelopes, signed and not: it must never
// panic, and whatever it accepts must be the envelope made for that key,
// identity and payload; what Decode accepts has the size asked for.
func FuzzOpen(f *testing.F) {
	tinyZstd := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78}
	f.Add(true, "k", int64(7), seal("VTST", fuzzSecret, "k", "id", FormStored, []byte("payload")))
	f.Add(false, "k", int64(7), seal("VTST", nil, "k", "id", FormStored, []byte("payload")))
	f.Add(true, "k", int64(1), seal("VTST", fuzzSecret, "k", "", FormZstd, tinyZstd))
	f.Add(false, "k", int64(0), seal("VTST", nil, "other", "id", FormStored, nil))
	f.Add(true, "", int64(0), []byte("VTST"))
	f.Fuzz(func(t *testing.T, signed bool, key string, size int64, raw []byte) {
		var secret []byte
		if signed {
			secret = fuzzSecret
		}
		ident, payload, form, err := Open("VTST", secret, key, size, raw)
		if err != nil {
			return
		}
		if got := seal("VTST", secret, key, string(ident), form, payload); !bytes.Equal(got, raw) {
			t.Errorf("accepted an envelope that is not the one made for its key, identity and payload")
		}
		if data, err := Decode(form, payload, size); err == nil && int64(len(data)) != size {
			t.Errorf("decoded %d bytes, want %d", len(data), size)
		}
		if data, err := DecodeUpTo(form, payload, size); err == nil && int64(len(data)) > size {
			t.Errorf("decoded %d bytes, want at most %d", len(data), size)
		}
	})
}
