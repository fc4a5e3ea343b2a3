package fetcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// mkFetcher returns a Fetcher over a source that holds files (key -> body).
type mkFetcher func(t *testing.T, files map[string][]byte) Fetcher

// fastRetries keeps the back-off of failing tests short.
var fastRetries = HTTPOptions{BaseBackoff: time.Microsecond, MaxBackoff: time.Millisecond}

func TestFileContract(t *testing.T) {
	testContract(t, func(t *testing.T, files map[string][]byte) Fetcher {
		t.Helper()
		f, err := NewFile(writeTree(t, files))
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

func TestHTTPContract(t *testing.T) {
	testContract(t, func(t *testing.T, files map[string][]byte) Fetcher {
		t.Helper()
		srv := httptest.NewServer(http.FileServer(http.Dir(writeTree(t, files))))
		t.Cleanup(srv.Close)
		h, err := NewHTTP(srv.URL+"/", fastRetries)
		if err != nil {
			t.Fatal(err)
		}
		return h
	})
}

// writeTree writes files below a new temporary directory and returns it.
func writeTree(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for key, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// seq returns n bytes 0, 1, 2, ... (mod 251, so that offsets show).
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func testContract(t *testing.T, mk mkFetcher) {
	files := map[string][]byte{
		"info":          []byte(`{"type":"image"}`),
		"8_8_8/0-64":    seq(1000),
		"8_8_8/sub/x.y": []byte("deep"),
		"sp ace/x%y?#":  []byte("escaped"),
		"empty":         {},
	}
	f := mk(t, files)
	ctx := context.Background()

	t.Run("Get", func(t *testing.T) {
		for key, want := range files {
			obj, err := f.Get(ctx, key, 1<<30)
			if err != nil {
				t.Errorf("Get(%q): %v", key, err)
				continue
			}
			if !bytes.Equal(obj.Data, want) || obj.ContentEncoding != "" {
				t.Errorf("Get(%q) = %q %q, want %q", key, obj.Data, obj.ContentEncoding, want)
			}
		}
	})

	t.Run("Limit", func(t *testing.T) {
		for _, limit := range []int64{0, 999} {
			if _, err := f.Get(ctx, "8_8_8/0-64", limit); !errors.Is(err, ErrTooLarge) {
				t.Errorf("Get of 1000 bytes with limit %d: got %v, want %v", limit, err, ErrTooLarge)
			}
		}
		if obj, err := f.Get(ctx, "8_8_8/0-64", 1000); err != nil || len(obj.Data) != 1000 {
			t.Errorf("Get of 1000 bytes with limit 1000: got %d bytes, %v", len(obj.Data), err)
		}
	})

	t.Run("NotExist", func(t *testing.T) {
		for _, key := range []string{"missing", "8_8_8/missing", "info/below", "8_8_8", "8_8_8/sub"} {
			if _, err := f.Get(ctx, key, 1<<30); !errors.Is(err, ErrNotExist) {
				t.Errorf("Get(%q): got %v, want %v", key, err, ErrNotExist)
			}
			if _, _, err := f.GetRange(ctx, key, 0, 1); !errors.Is(err, ErrNotExist) {
				t.Errorf("GetRange(%q): got %v, want %v", key, err, ErrNotExist)
			}
			if _, _, err := f.Stat(ctx, key); !errors.Is(err, ErrNotExist) {
				t.Errorf("Stat(%q): got %v, want %v", key, err, ErrNotExist)
			}
		}
	})

	t.Run("GetRange", func(t *testing.T) {
		data := files["8_8_8/0-64"]
		for _, tc := range []struct {
			name           string
			offset, length int64
			want           []byte
		}{
			{"start", 0, 10, data[:10]},
			{"middle", 300, 200, data[300:500]},
			{"whole", 0, 1000, data},
			{"short at end", 990, 100, data[990:]},
			{"zero length", 5, 0, []byte{}},
			{"at end", 1000, 10, []byte{}},
			{"past end", 5000, 10, []byte{}},
		} {
			got, _, err := f.GetRange(ctx, "8_8_8/0-64", tc.offset, tc.length)
			if err != nil || !bytes.Equal(got, tc.want) || got == nil {
				t.Errorf("%s: got %d bytes, %v, want %d bytes", tc.name, len(got), err, len(tc.want))
			}
		}
	})

	t.Run("Stat", func(t *testing.T) {
		for key, data := range files {
			got, _, err := f.Stat(ctx, key)
			if err != nil || got != int64(len(data)) {
				t.Errorf("Stat(%q): got %v, %v, want %v", key, got, err, len(data))
			}
		}
	})

	t.Run("List", func(t *testing.T) {
		for _, tc := range []struct {
			prefix string
			want   []string // names, "/" after directories
		}{
			{"", []string{"8_8_8/", "empty", "info", "sp ace/"}},
			{"8_8_8", []string{"0-64", "sub/"}},
			{"8_8_8/sub", []string{"x.y"}},
			{"sp ace", []string{"x%y?#"}},
		} {
			entries, err := f.List(ctx, tc.prefix)
			if err != nil {
				t.Errorf("List(%q): %v", tc.prefix, err)
				continue
			}
			var got []string
			for _, e := range entries {
				name := e.Name
				if e.IsDir {
					name += "/"
				}
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("List(%q): got %v, want %v", tc.prefix, got, tc.want)
			}
		}
		if _, err := f.List(ctx, "info"); !errors.Is(err, ErrNotExist) {
			t.Errorf("List of a file: got %v, want %v", err, ErrNotExist)
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		for _, key := range []string{"../x", "/abs", "a/../b", "a//b", "./a", "a/", "a\\b", "a\x00b", ""} {
			if _, err := f.Get(ctx, key, 1<<30); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Get(%q): got %v, want %v", key, err, ErrInvalidKey)
			}
			if _, _, err := f.GetRange(ctx, key, 0, 1); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("GetRange(%q): got %v, want %v", key, err, ErrInvalidKey)
			}
			if _, _, err := f.Stat(ctx, key); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Stat(%q): got %v, want %v", key, err, ErrInvalidKey)
			}
			if _, err := f.List(ctx, key); key != "" && !errors.Is(err, ErrInvalidKey) {
				t.Errorf("List(%q): got %v, want %v", key, err, ErrInvalidKey)
			}
		}
	})

	t.Run("Canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := f.Get(ctx, "info", 1<<30); !errors.Is(err, context.Canceled) {
			t.Errorf("Get: got %v, want %v", err, context.Canceled)
		}
		if _, _, err := f.GetRange(ctx, "info", 0, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("GetRange: got %v, want %v", err, context.Canceled)
		}
		if _, _, err := f.Stat(ctx, "info"); !errors.Is(err, context.Canceled) {
			t.Errorf("Stat: got %v, want %v", err, context.Canceled)
		}
		if _, err := f.List(ctx, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("List: got %v, want %v", err, context.Canceled)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 32 {
			wg.Go(func() {
				for key, want := range files {
					obj, err := f.Get(ctx, key, 1<<30)
					if err == nil && !bytes.Equal(obj.Data, want) {
						err = fmt.Errorf("goroutine %d: Get(%q) returned wrong bytes", i, key)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
