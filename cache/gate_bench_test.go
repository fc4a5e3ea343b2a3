package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

const chunkBytes = 1 << 20

// imageChunk returns 1 MiB of uint8 EM-like data: a smooth field plus
// noise, which gzip-6 and zstd compress about as much as real image chunks.
func imageChunk(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, chunkBytes)
	for i := range b {
		x, y := float64(i%1024), float64(i/1024)
		v := 128 + 60*math.Sin(x/17)*math.Cos(y/23) + float64(r.IntN(5)) - 2
		b[i] = byte(v)
	}
	return b
}

// decoders returns the load work of BenchmarkGate: for each codec, a
// function that decodes one stored 1 MiB chunk into a new buffer, as
// decode/ does (klauspost gzip, one shared zstd decoder with DecodeAll);
// "raw" copies the chunk, "none" does nothing, to show the cost of the
// store and the pool alone.
func decoders(b *testing.B) []struct {
	name   string
	decode func() ([]byte, error)
} {
	b.Helper()
	raw := imageChunk(1)
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, 6)
	w.Write(raw)
	w.Close()
	enc, _ := zstd.NewWriter(nil)
	zs := enc.EncodeAll(raw, nil)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dec.Close)
	none := make([]byte, chunkBytes)
	return []struct {
		name   string
		decode func() ([]byte, error)
	}{
		{"none", func() ([]byte, error) { return none, nil }}, // the cost of the machinery alone
		{"raw", func() ([]byte, error) { return bytes.Clone(raw), nil }},
		{"gzip", func() ([]byte, error) {
			r, err := gzip.NewReader(bytes.NewReader(gz.Bytes()))
			if err != nil {
				return nil, err
			}
			out := make([]byte, chunkBytes)
			_, err = io.ReadFull(r, out)
			return out, err
		}},
		{"zstd", func() ([]byte, error) { return dec.DecodeAll(zs, make([]byte, 0, chunkBytes)) }},
	}
}

// BenchmarkGate measures a batch of k chunk loads (1 MiB decoded, real
// decodes) run inline on the caller, on the pool, and gated by
// BatchInline, with nothing cached. It is the table BatchInline cites.
//
// The machine it runs on is shared and noisy, so the three modes are not
// separate benchmarks run minutes apart: every iteration runs one batch in
// each mode, in rotating order, and the benchmark reports the mean time
// per batch of each mode (inline-ms, pool-ms, gated-ms) and their ratios,
// measured side by side under the same load.
func BenchmarkGate(b *testing.B) {
	modes := []struct {
		name string
		gate int
	}{{"inline", math.MaxInt}, {"pool", 0}, {"gated", BatchInline}}
	for _, d := range decoders(b) {
		for _, k := range []int{1, 2, 4, 8, 16, 32} {
			b.Run(fmt.Sprintf("%s/k=%d", d.name, k), func(b *testing.B) {
				s := NewStore(Options{})
				defer s.Close()
				keys := make([]string, k)
				for i := range keys {
					keys[i] = fmt.Sprint(i)
				}
				load := func(int) Loader {
					return func(context.Context) ([]byte, error) { return d.decode() }
				}
				var spent [3]time.Duration
				b.SetBytes(int64(3*k) * chunkBytes)
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					for j := range modes {
						m := (n + j) % len(modes)
						start := time.Now()
						if _, err := s.getBatch(context.Background(), keys, load, modes[m].gate); err != nil {
							b.Fatal(err)
						}
						spent[m] += time.Since(start)
					}
					n++
				}
				for m, mode := range modes {
					b.ReportMetric(float64(spent[m].Microseconds())/1e3/float64(n), mode.name+"-ms")
				}
				b.ReportMetric(float64(spent[1])/float64(spent[0]), "pool/inline")
				b.ReportMetric(float64(spent[2])/float64(spent[0]), "gated/inline")
			})
		}
	}
}
