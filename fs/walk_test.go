package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// TestWalkBounded: a walk examines at most maxEntries entries and counts
// those it left, and the directories among them; it never enumerates the
// grid of an array that is its own directory.
func TestWalkBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		if err := os.MkdirAll(filepath.Join(dir, "many", fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "huge"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format": 2, "shape": [1048576, 1048576], "chunks": [1, 1], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`
	if err := os.WriteFile(filepath.Join(dir, "huge", ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := fetcher.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := New(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	tests := []struct {
		max         int64
		wantEntries int64
		wantDirs    int64
	}{
		// Root: huge, many (2); huge: .zarray (1); many: 0..9 (10).
		{max: 100},
		{max: 8, wantEntries: 5, wantDirs: 5},
		// huge, then its .zarray is left, then many.
		{max: 1, wantEntries: 2, wantDirs: 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			found := false
			skipped, err := tree.WalkBounded(context.Background(), 6, tc.max, func(_ string, v *decode.Volume, _ error) {
				found = found || v != nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if skipped.Entries != tc.wantEntries || skipped.Dirs != tc.wantDirs {
				t.Errorf("skipped %+v, want %d entries, %d directories", skipped, tc.wantEntries, tc.wantDirs)
			}
			if tc.max == 100 && !found {
				t.Error("the array was not found")
			}
		})
	}
}
