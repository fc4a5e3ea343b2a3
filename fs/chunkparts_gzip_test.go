package fs

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/volfs/volfs/fetcher"
)

// gzipOfSize returns data gzipped, with an extra header field that pads
// the stream to exactly size bytes, or fails the test.
func gzipOfSize(t *testing.T, data []byte, size int) []byte {
	t.Helper()
	gz := func(extra []byte) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		w.Extra = extra
		w.Write(data)
		w.Close()
		return b.Bytes()
	}
	pad := size - len(gz(nil)) - 2 // the field's length takes 2 bytes
	if pad < 0 || pad > 0xffff {
		t.Fatalf("gzip of %d bytes is %d, cannot pad it to %d", len(data), len(gz(nil)), size)
	}
	b := gz(make([]byte, pad))
	if len(b) != size {
		t.Fatalf("padded gzip of %d bytes, want %d", len(b), size)
	}
	return b
}

// TestChunkPartsGzipEncoded: a chunk stored at S3 with Content-Encoding:
// gzip (as CloudVolume uploads) is a transport-encoded chunk, which the
// chunk path gunzips; S3 shows its stored bytes to Stat and GetRange. So
// one whose gzip stream is exactly the chunk's decoded size (a data owner
// can pad one so) must be read whole, never served as its gzip bytes.
func TestChunkPartsGzipEncoded(t *testing.T) {
	const chunk = partsChunkMin + 4<<20
	backend := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithIntegrityCheck(false)).Server())
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	put := func(key string, data []byte, meta map[string]string) {
		t.Helper()
		if _, err := backend.PutObject("b", key, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	put("big/.zarray", fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1",
 "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, chunk, chunk), nil)
	// 32 KiB of zeros, which gzip shrinks, and the rest random, which it
	// cannot: the stream comes out a few KiB short of the chunk.
	decoded := make([]byte, chunk)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 32 << 10; i < len(decoded); i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			decoded[i+k] = byte(v >> (8 * k))
		}
	}
	put("big/0", gzipOfSize(t, decoded, chunk), map[string]string{"Content-Encoding": "gzip"})

	src, err := fetcher.NewS3("s3://b", fetcher.S3Options{Endpoint: srv.URL, Region: "us-east-1", Anonymous: true, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tree, err := New(ctx, src, Options{CacheBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	h := openBig(t, tree)
	if h.obj != nil {
		t.Error("a gzip-encoded chunk is read in parts, want it loaded whole and gunzipped")
	}
	got := make([]byte, chunk)
	for off := 0; off < chunk; off += 1 << 20 {
		if _, err := h.ReadAt(ctx, got[off:off+1<<20], int64(off)); err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
	if !bytes.Equal(got, decoded) {
		t.Errorf("the chunk file's bytes are not the gunzipped chunk (its first bytes % x)", got[:4])
	}
}
