package disk

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// file builds a cache file for key and payload in the documented layout,
// independently of put.
func file(key string, form byte, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("VDC1")
	b.Write([]byte{form, 0, 0, 0})
	binary.Write(&b, binary.LittleEndian, uint64(len(payload)))
	sum := crc32.Update(crc32.Checksum([]byte(key), crcTable), crcTable, payload)
	binary.Write(&b, binary.LittleEndian, sum)
	binary.Write(&b, binary.LittleEndian, uint16(len(key)))
	b.WriteString(key)
	b.Write(payload)
	return b.Bytes()
}

// FuzzParse feeds parse arbitrary files: it must never panic, and whatever
// it accepts as stored must be exactly the file's payload for that key.
func FuzzParse(f *testing.F) {
	f.Add("k", file("k", formStored, []byte("payload")))
	f.Add("k", file("k", formZstd, []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x01, 0x09, 0x00, 0x00, 0x78}))
	f.Add("k", file("other", formStored, nil))
	f.Add("", []byte("VDC1"))
	f.Fuzz(func(t *testing.T, key string, raw []byte) {
		data, err := parse(key, raw)
		if err != nil || len(raw) < headerSize || raw[4] != formStored {
			return
		}
		if want := raw[headerSize+len(key):]; !bytes.Equal(data, want) {
			t.Errorf("accepted %d bytes, want the payload of %d", len(data), len(want))
		}
	})
}
