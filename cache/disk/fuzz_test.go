package disk

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

var fuzzSecret = bytes.Repeat([]byte{0x5a}, secretSize)

// file builds a cache file for key, identity and payload in the documented
// layout, independently of put.
func file(key, ident string, form byte, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("VDC2")
	b.Write([]byte{form, 0, 0, 0})
	binary.Write(&b, binary.LittleEndian, uint64(len(payload)))
	binary.Write(&b, binary.LittleEndian, uint32(len(key)))
	binary.Write(&b, binary.LittleEndian, uint32(len(ident)))
	mac := hmac.New(sha256.New, fuzzSecret)
	mac.Write(b.Bytes())
	mac.Write([]byte(key + ident))
	binary.Write(mac, binary.LittleEndian, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	b.Write(mac.Sum(nil))
	b.WriteString(key + ident)
	b.Write(payload)
	return b.Bytes()
}

// FuzzParse feeds parse arbitrary files: it must never panic, and whatever
// it accepts must be the file's own identity and payload for that key.
func FuzzParse(f *testing.F) {
	f.Add("k", int64(7), file("k", "id", formStored, []byte("payload")))
	f.Add("k", int64(1), file("k", "", formZstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78}))
	f.Add("k", int64(0), file("other", "id", formStored, nil))
	f.Add("", int64(0), []byte("VDC2"))
	f.Fuzz(func(t *testing.T, key string, size int64, raw []byte) {
		ident, payload, form, err := parse(fuzzSecret, key, size, raw)
		if err != nil {
			return
		}
		if got := file(key, string(ident), form, payload); !bytes.Equal(got, raw) {
			t.Errorf("accepted a file that is not the one made for its key, identity and payload")
		}
		if data, err := unpack(form, payload, size, size); err == nil && int64(len(data)) != size {
			t.Errorf("unpacked %d bytes, want %d", len(data), size)
		}
	})
}
