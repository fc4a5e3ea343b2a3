package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// TestViewHandleOneVersionPerChunk: a view's handle reads each chunk at
// one version. Once memory has let a chunk go and the chunk was rewritten,
// the handle's next read of its region fails with ESTALE
// (fetcher.ErrChanged), one log line naming the chunk, rather than put
// the new bytes beside the old ones it read; a new handle reads the new
// version. Before, the handle read the new bytes.
func TestViewHandleOneVersionPerChunk(t *testing.T) {
	ctx := context.Background()
	dir := writeFiles(t, layerFiles(t))
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := New(ctx, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const view = "layer/s0/volume.raw"
	n, err := tree.Resolve(ctx, view)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(File)
	read := func(h *Handle) ([]byte, error) {
		return h.Read(ctx, make([]byte, f.Size()), 0)
	}
	h, err := tree.Open(ctx, f, view, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	old, err := read(h)
	if err != nil {
		t.Fatal(err)
	}

	c, err := tree.Resolve(ctx, "layer/s0/0-4_0-4_0-2")
	if err != nil {
		t.Fatal(err)
	}
	fresh := chunk0()
	for i := range fresh {
		fresh[i] ^= 0xff
	}
	if err := os.WriteFile(filepath.Join(dir, "layer/s0/0-4_0-4_0-2.gz"), gz(t, fresh), 0o644); err != nil {
		t.Fatal(err)
	}
	tree.store.Cache().Remove(c.(*chunkFile).mkey)

	if got, err := read(h); !errors.Is(err, fetcher.ErrChanged) {
		t.Errorf("the handle's read after the chunk was rewritten and loaded again: %d bytes, %v; want ESTALE", len(got), err)
	}
	h2, err := tree.Open(ctx, f, view, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if got, err := read(h2); err != nil || bytes.Equal(got, old) || got[0] != fresh[0] {
		t.Errorf("a new handle: %v, %v; want the new version (first byte %d)", got, err, fresh[0])
	}
}

// TestRecordCurrentAsksBounded: the open of a view whose record names more
// chunks that would ask the source (past the TTL, not in memory) than
// maxRecordAsks drops the view's pages rather than wait for a Stat per
// chunk; one with fewer checks them.
func TestRecordCurrentAsksBounded(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		chunks int
		want   bool
	}{{maxRecordAsks, true}, {maxRecordAsks + 1, false}} {
		files := map[string][]byte{"arr/.zarray": fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d, 1, 1], "chunks": [1, 1, 1], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, tc.chunks)}
		for i := range tc.chunks {
			files[fmt.Sprintf("arr/%d.0.0", i)] = []byte{byte(i)}
		}
		src, err := fetcher.Open(writeFiles(t, files), fetcher.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tree, err := New(ctx, src, Options{MetadataTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		n, err := tree.Resolve(ctx, "arr/volume.raw")
		if err != nil {
			t.Fatal(err)
		}
		f := n.(File)
		h, err := tree.Open(ctx, f, "arr/volume.raw", 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Read(ctx, make([]byte, f.Size()), 0); err != nil {
			t.Fatal(err)
		}
		h.Close()
		if !tree.RecordCurrent(ctx, h.rec) {
			t.Errorf("%d chunks in memory: not current", tc.chunks)
		}
		for i := range tc.chunks {
			c, err := tree.Resolve(ctx, fmt.Sprintf("arr/%d.0.0", i))
			if err != nil {
				t.Fatal(err)
			}
			tree.store.Cache().Remove(c.(*chunkFile).mkey)
		}
		if got := tree.RecordCurrent(ctx, h.rec); got != tc.want {
			t.Errorf("%d chunks memory let go: current %v, want %v", tc.chunks, got, tc.want)
		}
	}
}
