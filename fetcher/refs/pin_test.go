package refs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestTargetPinned: a read of a key pinned to the identity a first read
// returned (fetcher.WithVersion) reaches the target pinned, as If-Match
// with the target's ETag, and a rewritten target answers ErrChanged
// rather than the new version's bytes; the identity of a key names its
// target, so two keys over two files of one ETag differ.
func TestTargetPinned(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.bin", "0123456789")
	write("b.bin", "0123456789")
	write("refs.json", `{"version": 1, "refs": {"a": ["a.bin", 2, 4], "b": ["b.bin", 2, 4], "w": ["a.bin"]}}`)
	var ifMatch atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(r.URL.Path, "/"))); err == nil {
			w.Header().Set("ETag", fmt.Sprintf(`"%x"`, sha256.Sum256(b)))
		}
		if r.Header.Get("If-Match") != "" {
			ifMatch.Add(1)
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	ctx := context.Background()
	f, err := Load(ctx, srv.URL+"/refs.json", Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]fetcher.Identity{}
	for _, key := range []string{"a", "b", "w"} {
		obj, err := f.Get(ctx, key, 100)
		if err != nil || !obj.ID.Known() {
			t.Fatalf("%s: %q %q %v", key, obj.Data, obj.ID, err)
		}
		ids[key] = obj.ID
	}
	if ids["a"] == ids["b"] {
		t.Errorf("keys over two files of one ETag share the identity %q", ids["a"])
	}
	for _, key := range []string{"a", "w"} {
		b, id, err := f.GetRange(fetcher.WithVersion(ctx, key, ids[key]), key, 0, 2)
		if err != nil || string(b) != "23" && string(b) != "01" || id != ids[key] {
			t.Errorf("%s pinned, unchanged: %q %q %v", key, b, id, err)
		}
	}
	if ifMatch.Load() != 2 {
		t.Errorf("%d pinned requests carried If-Match, want 2", ifMatch.Load())
	}
	write("a.bin", "abcdefghij")
	for _, key := range []string{"a", "w"} {
		b, _, err := f.GetRange(fetcher.WithVersion(ctx, key, ids[key]), key, 0, 2)
		if !errors.Is(err, fetcher.ErrChanged) {
			t.Errorf("%s pinned, target rewritten: %q, %v; want ErrChanged", key, b, err)
		}
	}
}
