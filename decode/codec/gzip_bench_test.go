package codec

import (
	"bytes"
	stdflate "compress/flate"
	stdgzip "compress/gzip"
	"io"
	"math"
	"math/rand/v2"
	"testing"

	kflate "github.com/klauspost/compress/flate"
	kgzip "github.com/klauspost/compress/gzip"
)

// imageChunk1M is a 1 MiB chunk of image-like bytes: smooth with a
// little noise, so that it compresses about as well as much microscopy
// does (2-3x): many matches.
func imageChunk1M() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 1<<20)
	for i := range raw {
		raw[i] = byte(128 + 40*((i>>6)%7) + r.IntN(24))
	}
	return raw
}

// emChunk4M is a 4 MiB uint8 chunk like workload W1's EM data: a smooth
// 2-D field under strong noise, which gzip -6 shrinks only to about 89%
// (W1's chunks: 93%), so that decoding is nearly all literals.
func emChunk4M() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 4<<20)
	for i := range raw {
		x, y := float64(i%2048), float64(i/2048)
		f := 128 + 50*math.Sin(x/37)*math.Cos(y/23)
		n := 0
		for range 4 {
			n += r.IntN(41) - 20
		}
		raw[i] = byte(max(0, min(255, int(f)+n)))
	}
	return raw
}

// BenchmarkGunzip compares, on gzip -6 streams of the two chunks above,
// volfs's gunzip (inflate plus CRC-32, into a reused buffer, as the chunk
// cache decodes) with klauspost/compress's gzip reader (pooled and reset,
// what volfs used before) and the standard library's; the deflate-*
// variants decode the raw DEFLATE stream alone, without the checksum.
func BenchmarkGunzip(b *testing.B) {
	for _, in := range []struct {
		name string
		raw  []byte
	}{{"em4M", emChunk4M()}, {"image1M", imageChunk1M()}} {
		raw := in.raw
		var gz, fl bytes.Buffer
		gw, _ := stdgzip.NewWriterLevel(&gz, 6)
		gw.Write(raw)
		gw.Close()
		fw, _ := stdflate.NewWriter(&fl, 6)
		fw.Write(raw)
		fw.Close()
		out := make([]byte, len(raw))
		run := func(name string, decode func() (int, error)) {
			b.Run(in.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					n, err := decode()
					if err != nil || n != len(raw) {
						b.Fatalf("%d bytes, %v", n, err)
					}
				}
			})
		}
		run("volfs", func() (int, error) {
			got, err := gunzip(out, gz.Bytes(), len(raw), len(raw))
			return len(got), err
		})
		kz, _ := kgzip.NewReader(bytes.NewReader(gz.Bytes()))
		var kr bytes.Reader
		run("klauspost", func() (int, error) {
			kr.Reset(gz.Bytes())
			if err := kz.Reset(&kr); err != nil {
				return 0, err
			}
			return io.ReadFull(kz, out)
		})
		run("stdlib", func() (int, error) {
			zr, err := stdgzip.NewReader(bytes.NewReader(gz.Bytes()))
			if err != nil {
				return 0, err
			}
			return io.ReadFull(zr, out)
		})
		run("deflate-volfs", func() (int, error) {
			n, _, err := inflate(out, fl.Bytes())
			return n, err
		})
		kf := kflate.NewReader(nil)
		run("deflate-klauspost", func() (int, error) {
			kr.Reset(fl.Bytes())
			if err := kf.(kflate.Resetter).Reset(&kr, nil); err != nil {
				return 0, err
			}
			return io.ReadFull(kf, out)
		})
	}
}
