package decode

import (
	"bytes"
	"compress/gzip"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestChainBombBounded: under ten gzip stages (Zarr v2 filters, Zarr v3
// bytes-to-bytes codecs) a 64 KiB chunk stored as a gzip stream of 48 MiB
// is refused after a few MiB of decoding, not after the 2^10-fold bound of
// stages that each doubled the bound after them (issue 29 item 10); a
// genuine chunk under the same ten stages loads.
func TestChainBombBounded(t *testing.T) {
	const n = 64 << 10
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		w, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	bomb := gz(make([]byte, 48<<20))
	good := bytes.Repeat([]byte{7}, n)
	stored := good
	for range 10 {
		stored = gz(stored)
	}
	v2filters := strings.TrimSuffix(strings.Repeat(`{"id": "gzip", "level": 1}, `, 10), ", ")
	v3codecs := strings.Repeat(`, {"name": "gzip", "configuration": {"level": 1}}`, 10)
	for _, tc := range []struct {
		name, good, bad string
		parse           func(dir string, meta []byte) (*Volume, error)
		meta            string
	}{
		{"zarr2", "a/0", "a/1", ParseZarr2, `{"zarr_format": 2, "shape": [131072], "chunks": [65536], "dtype": "|u1", "compressor": null,
			"fill_value": 0, "order": "C", "filters": [` + v2filters + `]}`},
		{"zarr3", "a/c/0", "a/c/1", ParseZarr3, `{"zarr_format": 3, "node_type": "array", "shape": [131072], "data_type": "uint8",
			"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [65536]}}, "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
			"codecs": [{"name": "bytes", "configuration": {"endian": "little"}}` + v3codecs + `]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.parse("a", []byte(tc.meta))
			if err != nil {
				t.Fatal(err)
			}
			a := v.Arrays[0]
			src := newMemSource(map[string][]byte{tc.good: stored, tc.bad: bomb})
			if got, err := a.Load(context.Background(), src, []int64{0}); err != nil || !bytes.Equal(got, good) {
				t.Fatalf("genuine chunk: got %v, %d bytes, want %d bytes of 7", err, len(got), n)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = a.Load(context.Background(), src, []int64{1})
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("bomb: loaded, want an error")
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("bomb: %v after %.1f MiB allocated", err, float64(alloc)/(1<<20))
			if alloc > 8<<20 {
				t.Errorf("bomb: %d MiB allocated before the refusal, want at most 8", alloc>>20)
			}
		})
	}
}
