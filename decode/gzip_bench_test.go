package decode

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"math/rand/v2"
	"testing"
)

// benchChunk is a 1 MiB chunk of image-like bytes: smooth with noise, so
// that it compresses about as well as microscopy does (2-3x).
func benchChunk() (raw, gz []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	raw = make([]byte, 1<<20)
	for i := range raw {
		raw[i] = byte(128 + 40*((i>>6)%7) + r.IntN(24))
	}
	var buf bytes.Buffer
	w, _ := stdgzip.NewWriterLevel(&buf, 6)
	w.Write(raw)
	w.Close()
	return raw, buf.Bytes()
}

// BenchmarkGunzip compares Gunzip (klauspost/compress, pooled readers, one
// exact allocation) with the standard library read into a growing buffer.
func BenchmarkGunzip(b *testing.B) {
	raw, gz := benchChunk()
	b.Run("volfs", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			out, err := Gunzip(gz, len(raw), len(raw))
			if err != nil || len(out) != len(raw) {
				b.Fatal(err)
			}
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			zr, err := stdgzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				b.Fatal(err)
			}
			out, err := io.ReadAll(zr)
			if err != nil || len(out) != len(raw) {
				b.Fatal(err)
			}
		}
	})
}
