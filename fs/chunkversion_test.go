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

// openRead opens the file at p as a front end does and reads it whole
// through the handle, which it returns open.
func openRead(t *testing.T, tree *Tree, p string) (*Handle, []byte) {
	t.Helper()
	n, err := tree.Resolve(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tree.Open(context.Background(), n.(File), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, h.Size())
	k, err := h.ReadAt(context.Background(), buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, buf[:k]
}

// TestMemoryIdentityTTL: a chunk held in memory is checked against its
// object's identity once it has been held longer than the metadata TTL,
// at a handle's first read, as a disk entry is; with a TTL of 0, never.
// A handle reads the version its first read found, whatever memory
// holds later, and Current tells whether a handle opened now would read
// a given version.
func TestMemoryIdentityTTL(t *testing.T) {
	const key = "layer/s0/0-4_0-4_0-2"
	rewritten := bytes.Repeat([]byte{0xee}, len(chunk0()))
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		want      []byte // a read after the rewrite and the TTL
		wantStats int64
	}{
		{"never with 0", 0, chunk0(), 0},
		{"past the TTL", 100 * time.Millisecond, rewritten, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string][]byte{"layer/info": []byte(testInfo), key: chunk0()})
			src, err := fetcher.Open(dir, fetcher.Options{})
			if err != nil {
				t.Fatal(err)
			}
			counted := &statCounter{Fetcher: src}
			tree, err := New(context.Background(), counted, Options{MetadataTTL: tc.ttl})
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			old, got := openRead(t, tree, key)
			defer old.Close()
			v1, ok := old.Version()
			if !bytes.Equal(got, chunk0()) || !ok {
				t.Fatalf("first read: %v, version known %v", got, ok)
			}
			tmp := filepath.Join(dir, "tmp")
			if err := os.WriteFile(tmp, rewritten, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, key)); err != nil {
				t.Fatal(err)
			}
			// Within the TTL: memory's copy, unchecked.
			if h, got := openRead(t, tree, key); !bytes.Equal(got, chunk0()) {
				t.Errorf("within the TTL: %v, want the old version", got)
			} else {
				h.Close()
			}
			time.Sleep(2 * tc.ttl)
			n, _ := tree.Resolve(context.Background(), key)
			if cur, want := tree.Current(context.Background(), n.(File), v1), tc.ttl == 0; cur != want {
				t.Errorf("Current of the old version past the TTL: %v, want %v", cur, want)
			}
			h, got := openRead(t, tree, key)
			defer h.Close()
			if !bytes.Equal(got, tc.want) {
				t.Errorf("after the rewrite and the TTL: %v, want %v", got, tc.want)
			}
			if v2, _ := h.Version(); (v2 == v1) != (tc.ttl == 0) {
				t.Errorf("versions before and after: equal %v, want %v", v2 == v1, tc.ttl == 0)
			}
			if got := counted.stats.Load(); got < tc.wantStats || tc.wantStats == 0 && got != 0 {
				t.Errorf("Stats: %d, want %d", got, tc.wantStats)
			}
			// The handle opened first reads its version still.
			buf := make([]byte, old.Size())
			if k, err := old.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf[:k], chunk0()) {
				t.Errorf("the first handle after the rewrite: %v, %v, want the old version", buf[:k], err)
			}
		})
	}
}

// TestHandleHoldsBounded: handles hold their chunks within a budget (the
// memory cache's size): a handle whose chunk does not fit holds its
// version only, reads the chunk as the store has it while it is of that
// version, and ESTALE once it is not, never the new version's bytes; the
// budget is given back at Close.
func TestHandleHoldsBounded(t *testing.T) {
	const info = `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1,
 "type": "image", "scales": [{"key": "s0", "size": [32, 4, 2], "voxel_offset": [0, 0, 0],
 "resolution": [1, 1, 1], "chunk_sizes": [[4, 4, 2]], "encoding": "raw"}]}`
	files := map[string][]byte{"layer/info": []byte(info)}
	var keys []string
	for i := range 8 {
		k := fmt.Sprintf("layer/s0/%d-%d_0-4_0-2", 4*i, 4*i+4)
		files[k] = bytes.Repeat([]byte{byte(i + 1)}, 32)
		keys = append(keys, k)
	}
	dir := writeFiles(t, files)
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := New(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	tree.holds.max = 3 * 32 // three chunks
	var hs []*Handle
	for i, k := range keys {
		h, got := openRead(t, tree, k)
		hs = append(hs, h)
		if !bytes.Equal(got, files[k]) {
			t.Fatalf("%s: %v, want chunk %d", k, got, i+1)
		}
	}
	if used := tree.holds.used.Load(); used != 3*32 {
		t.Fatalf("handles hold %d bytes, want the budget's 96", used)
	}
	// Every chunk rewritten, and memory's copies dropped: the three
	// handles that hold their chunks read the old bytes, the others
	// ESTALE.
	for i, k := range keys {
		if err := os.WriteFile(filepath.Join(dir, "tmp"), bytes.Repeat([]byte{byte(100 + i)}, 32), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "tmp"), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
		tree.store.Cache().Remove(chunkAt(t, tree, k).mkey)
	}
	for i, h := range hs {
		buf := make([]byte, 32)
		k, err := h.ReadAt(context.Background(), buf, 0)
		switch {
		case i < 3 && (err != nil || !bytes.Equal(buf[:k], files[keys[i]])):
			t.Errorf("handle %d, holding its chunk: %v, %v, want the old bytes", i, buf[:k], err)
		case i >= 3 && !errors.Is(err, fetcher.ErrChanged):
			t.Errorf("handle %d, holding its version only: %v, %v, want ErrChanged", i, buf[:k], err)
		}
	}
	for _, h := range hs {
		h.Close()
	}
	if used := tree.holds.used.Load(); used != 0 {
		t.Fatalf("closed handles hold %d bytes", used)
	}
}

// chunkAt returns the chunk file at p of tree.
func chunkAt(t *testing.T, tree *Tree, p string) *chunkFile {
	t.Helper()
	n, err := tree.Resolve(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return n.(*chunkFile)
}
