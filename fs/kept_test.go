package fs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/fetcher"
)

// TestMetadataOnDisk: a tree with a disk cache keeps the metadata and
// listings it read; a second tree, with the origin gone (its listener
// closed), is built from them and finds its chunk, logging once that the
// origin cannot be reached; one whose origin answers 403 or 404 is not.
func TestMetadataOnDisk(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [64, 64, 64], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1], "chunk_sizes": [[32, 32, 32]], "encoding": "raw"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32 // 0: serve the files
	files := http.FileServer(http.Dir(src))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	d, err := disk.Open(disk.Options{Dir: t.TempDir(), MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	src1, err := fetcher.Open(srv.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 2, BaseBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*Tree, *syncBuf, error) {
		log := &syncBuf{}
		tr, err := New(ctx, src1, Options{Disk: cache.NewDisk(d), Log: slog.New(slog.NewTextHandler(log, nil))})
		return tr, log, err
	}
	tr, _, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Resolve(ctx, "s0/0-32_0-32_0-32"); err != nil {
		t.Fatalf("origin up: %v", err)
	}
	tr.Close()

	// In order: each origin's answer is the copy the next case finds.
	for _, tc := range []struct {
		name   string
		status int // -1: the listener closed
		volume bool
		is     error
	}{
		{"403", http.StatusForbidden, false, fetcher.ErrPermission},
		{"503", http.StatusServiceUnavailable, true, nil},
		// The origin says the info and the listing are gone: their
		// copies say so from now on.
		{"404", http.StatusNotFound, false, nil},
		{"up again", 0, true, nil},
		{"gone", -1, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.status == -1 {
				srv.Close()
			}
			status.Store(int32(tc.status))
			tr, log, err := open()
			if tc.is != nil {
				if err == nil || !errors.Is(err, tc.is) {
					t.Errorf("New: %v, want an error wrapping %v (the disk copy not served)", err, tc.is)
				}
				if err == nil {
					tr.Close()
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer tr.Close()
			if _, isVol := tr.Root().(*volumeDir); isVol != tc.volume {
				t.Errorf("root is a %T, want a volume: %v", tr.Root(), tc.volume)
			}
			_, err = tr.Resolve(ctx, "s0/32-64_0-32_0-32")
			if tc.volume && err != nil {
				t.Errorf("chunk file from the disk copies: %v", err)
			}
			warnings := 0
			if tc.status != http.StatusNotFound && tc.status != 0 {
				warnings = 1
			}
			if n := strings.Count(log.String(), "the origin cannot be reached"); n != warnings {
				t.Errorf("%d warnings, want %d:\n%s", n, warnings, log.String())
			}
		})
	}
}

// syncBuf is a bytes.Buffer for a logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
