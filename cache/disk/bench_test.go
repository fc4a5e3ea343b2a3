package disk

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/volfs/volfs/cache/envelope"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// imageChunk returns 1 MiB of uint8 EM-like data: a smooth field plus noise.
func imageChunk() []byte {
	r := rand.New(rand.NewPCG(1, 1))
	b := make([]byte, 1<<20)
	for i := range b {
		x, y := float64(i%1024), float64(i/1024)
		b[i] = byte(128 + 60*math.Sin(x/17)*math.Cos(y/23) + float64(r.IntN(5)) - 2)
	}
	return b
}

func gunzip(b *testing.B, gz []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, 1<<20)
	if _, err := io.ReadFull(r, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkDiskHit compares the ways a disk-cache hit of a gzip-6 chunk
// (1 MiB decoded) can produce the decoded bytes: decode the gzip object
// (what a cache of received objects costs beyond the read: gzip/decode),
// read it and decode it (gzip/disk), read a copy kept re-encoded with
// zstd level 1 or 3 (zstd1/disk, zstd3/disk), or read a copy kept decoded
// (raw/disk). The
// files are in the page cache after the first read, as on a warm machine.
func BenchmarkDiskHit(b *testing.B) {
	raw := imageChunk()
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, 6)
	w.Write(raw)
	w.Close()
	c, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Put("gzip", nil, gz.Bytes()); err != nil {
		b.Fatal(err)
	}
	if err := c.PutCompressed("zstd1", nil, raw); err != nil {
		b.Fatal(err)
	}
	c3, err := Open(Options{Dir: b.TempDir(), MaxBytes: 1 << 30, Level: 3})
	if err != nil {
		b.Fatal(err)
	}
	if err := c3.PutCompressed("zstd3", nil, raw); err != nil {
		b.Fatal(err)
	}
	if err := c.Put("raw", nil, raw); err != nil {
		b.Fatal(err)
	}
	sizes := map[string]int{"gzip": gz.Len(), "zstd1": len(raw), "raw": len(raw)}
	get := func(b *testing.B, key string) []byte {
		v, ok := c.Get(key, int64(sizes[key]), func([]byte) error { return nil })
		if !ok {
			b.Fatalf("%s: miss", key)
		}
		return v
	}
	for _, bc := range []struct {
		name string
		run  func(b *testing.B) []byte
	}{
		{"gzip/decode", func(b *testing.B) []byte { return gunzip(b, gz.Bytes()) }},
		{"gzip/disk", func(b *testing.B) []byte { return gunzip(b, get(b, "gzip")) }},
		{"zstd1/disk", func(b *testing.B) []byte { return get(b, "zstd1") }},
		{"zstd3/disk", func(b *testing.B) []byte {
			v, _ := c3.Get("zstd3", int64(len(raw)), func([]byte) error { return nil })
			return v
		}},
		{"raw/disk", func(b *testing.B) []byte { return get(b, "raw") }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if !bytes.Equal(bc.run(b), raw) {
				b.Fatal("wrong bytes")
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				bc.run(b)
			}
		})
	}
	b.Logf("stored: gzip-6 %d bytes, zstd-1 %d, zstd-3 %d, of %d decoded", gz.Len(), len(c.encoder.EncodeAll(raw, nil)), len(c3.encoder.EncodeAll(raw, nil)), len(raw))
}

// BenchmarkEntryCheck compares, for a 1 MiB payload, what a hit does to
// check an entry (crc-mac: the CRC-32C of the payload under an
// HMAC-SHA256 of the header, key and identity; envelope.Header) with the CRC-32C
// alone that entries carried before they had a MAC (crc) and with an
// HMAC-SHA256 over the whole payload (hmac-payload), the design the CRC
// replaced.
func BenchmarkEntryCheck(b *testing.B) {
	payload := imageChunk()
	secret := make([]byte, secretSize)
	head := make([]byte, 24)
	key := []byte("gs://bucket/volume/4_4_40/0-64_0-64_0-64")
	ident := []byte("gs://bucket/volume/4_4_40/0-64_0-64_0-64\x00g1733000000000000/1048576")
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"crc", func() { crc32.Checksum(payload, crcTable) }},
		{"crc-mac", func() { envelope.Header(magic, secret, string(key), ident, formStored, payload) }},
		{"hmac-payload", func() {
			mac := hmac.New(sha256.New, secret)
			for _, p := range [][]byte{head, key, ident, payload} {
				mac.Write(p)
			}
			mac.Sum(nil)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
		})
	}
}
