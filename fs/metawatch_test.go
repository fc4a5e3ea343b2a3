package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// u2Array is the metadata of a zarr v2 array of rows×4 uint16 in chunks
// of 2×4, stored raw, in byte order order ("<" or ">").
func u2Array(rows int, order string) []byte {
	return fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d, 4], "chunks": [2, 4], "dtype": "%su2", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, rows, order)
}

// u2Chunk is chunk i of such an array: the values 100*i, 100*i+1, ...,
// decoded (little-endian, as the mount shows uint16) when order is "<",
// stored big-endian when it is ">".
func u2Chunk(i int, order string) []byte {
	b := make([]byte, 16)
	for k := range 8 {
		v := uint16(100*i + k)
		if order == ">" {
			binary.BigEndian.PutUint16(b[2*k:], v)
		} else {
			binary.LittleEndian.PutUint16(b[2*k:], v)
		}
	}
	return b
}

// TestMetadataRewritten: with a metadata TTL, an array whose metadata and
// chunks are rewritten together under the tree (a "<u2" array rewritten
// as ">u2", the same values in other bytes) has its chunks not yet in
// memory refused with ESTALE once the TTL has passed, with one log line
// naming its metadata object: never decoded under the old metadata. A
// chunk decoded before the rewrite reads as it was (the old version), and
// a view that needs a refused chunk fails whole. An append (the same
// decoding, a longer first axis) goes on reading, the new chunk bytes
// included. Within the TTL the check asks nothing; after it, one Stat.
func TestMetadataRewritten(t *testing.T) {
	const ttl = 100 * time.Millisecond
	for _, tc := range []struct {
		name    string
		rewrite map[string][]byte
		refused bool
	}{
		{"byte order", map[string][]byte{"arr/.zarray": u2Array(4, ">"), "arr/0.0": u2Chunk(0, ">"), "arr/1.0": u2Chunk(1, ">")}, true},
		{"append", map[string][]byte{"arr/.zarray": u2Array(6, "<"), "arr/1.0": u2Chunk(7, "<"), "arr/2.0": u2Chunk(2, "<")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			dir, counted, tree := u2Tree(t, Options{MetadataTTL: ttl, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			defer tree.Close()
			if got, err := readAll(t, tree, "arr/0.0"); err != nil || !bytes.Equal(got, u2Chunk(0, "<")) {
				t.Fatalf("before the rewrite: %v, %v", got, err)
			}
			if n := counted.stats.Load(); n != 0 {
				t.Errorf("within the TTL: %d Stats, want none", n)
			}
			for k, v := range tc.rewrite {
				if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(k)), v, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(2 * ttl)

			// Readers at once past the TTL share one check.
			errs := make(chan error, 8)
			for range cap(errs) {
				go func() {
					n, err := tree.Resolve(context.Background(), "arr/1.0")
					if err == nil {
						_, err = n.(File).ReadAt(context.Background(), make([]byte, 16), 0)
					}
					errs <- err
				}()
			}
			for range cap(errs) {
				if err := <-errs; tc.refused != errors.Is(err, fetcher.ErrChanged) {
					t.Errorf("a read at once with others: %v, want ESTALE %t", err, tc.refused)
				}
			}
			got, err := readAll(t, tree, "arr/1.0")
			if !tc.refused {
				if err != nil || !bytes.Equal(got, tc.rewrite["arr/1.0"]) {
					t.Fatalf("after the append: %v, %v; want %v", got, err, tc.rewrite["arr/1.0"])
				}
				if !strings.Contains(logs.String(), "grew") {
					t.Errorf("no line says the array grew:\n%s", logs.String())
				}
				if n := counted.stats.Load(); n != 1 {
					t.Errorf("past the TTL: %d Stats, want 1", n)
				}
				return
			}
			if err == nil || !errors.Is(err, fetcher.ErrChanged) {
				t.Fatalf("a chunk loaded after the rewrite: got %v, %v; want ESTALE (its bytes under the old metadata are %v)", got, err, u2Chunk(1, "<"))
			}
			if e := tree.Errno(context.Background(), err, "read", "/arr/1.0"); e != syscall.ESTALE {
				t.Errorf("errno %v, want ESTALE", e)
			}
			if got, err := readAll(t, tree, "arr/0.0"); err != nil || !bytes.Equal(got, u2Chunk(0, "<")) {
				t.Errorf("a chunk decoded before the rewrite: %v, %v; want the old version", got, err)
			}
			if _, err := readAll(t, tree, "arr/volume.raw"); !errors.Is(err, fetcher.ErrChanged) {
				t.Errorf("a view over a refused chunk: %v, want ESTALE", err)
			}
			lines := strings.Count(logs.String(), "/arr/.zarray")
			if lines != 1 || !strings.Contains(logs.String(), "remount") {
				t.Errorf("want one line naming /arr/.zarray and saying to remount, got %d:\n%s", lines, logs.String())
			}
		})
	}
}

// TestMetadataRewrittenReload: within the TTL, a chunk the tree read
// before and loads again (no room in memory) after its array was
// rewritten whole is refused at once: the load saw its object change, so
// the metadata is checked before its bytes are kept (one Stat). A chunk
// rewritten with the metadata unchanged reads as its new bytes, after the
// same one Stat.
func TestMetadataRewrittenReload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewrite map[string][]byte
		refused bool
	}{
		{"byte order", map[string][]byte{"arr/.zarray": u2Array(4, ">"), "arr/1.0": u2Chunk(1, ">")}, true},
		{"chunk only", map[string][]byte{"arr/1.0": u2Chunk(5, "<")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, counted, tree := u2Tree(t, Options{MetadataTTL: time.Hour, CacheBytes: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			defer tree.Close()
			if got, err := readAll(t, tree, "arr/1.0"); err != nil || !bytes.Equal(got, u2Chunk(1, "<")) {
				t.Fatalf("before the rewrite: %v, %v", got, err)
			}
			for k, v := range tc.rewrite {
				if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(k)), v, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := readAll(t, tree, "arr/1.0")
			switch {
			case tc.refused && !errors.Is(err, fetcher.ErrChanged):
				t.Errorf("reloaded after the rewrite: %v, %v; want ESTALE", got, err)
			case !tc.refused && (err != nil || !bytes.Equal(got, tc.rewrite["arr/1.0"])):
				t.Errorf("reloaded after the rewrite: %v, %v; want %v", got, err, tc.rewrite["arr/1.0"])
			}
			if n := counted.stats.Load(); n != 1 {
				t.Errorf("%d Stats, want 1 (the metadata's)", n)
			}
		})
	}
}

// u2Tree writes a little-endian uint16 zarr array "arr" of two chunks
// (u2Array, u2Chunk) and returns its directory, the Stat-counting source
// over it, and a tree over that source with opts.
func u2Tree(t *testing.T, opts Options) (string, *statCounter, *Tree) {
	t.Helper()
	dir := writeFiles(t, map[string][]byte{"arr/.zarray": u2Array(4, "<"), "arr/0.0": u2Chunk(0, "<"), "arr/1.0": u2Chunk(1, "<")})
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counted := &statCounter{Fetcher: src}
	tree, err := New(context.Background(), counted, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, counted, tree
}
