package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nginxServer serves dir with the ETag nginx makes, the modification time
// in seconds and the size ("5f1c2d3e-1a2b"), so that pinned reads send
// If-Match and two files of one size and time share an ETag.
func nginxServer(t *testing.T, dir string) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/")))); err == nil && fi.Mode().IsRegular() {
			w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.ModTime().Unix(), fi.Size()))
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// copyFile copies src to dst and gives dst src's modification time.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestReferenceSetTargetRewritten: an HDF5 file rewritten in place under
// its reference set (new values; the shuffle-only array's chunks keep
// their places and sizes, so its references do not change) reads as the
// new values through a second mount with the same --cache-dir, never as
// the decode the disk tier kept: for a local set, for one served over
// HTTP with nginx's ETags, and for a set rewritten to point at another
// file whose ETag reads the same as the first's (the same size and
// modification second): a chunk's identity names its target file, not
// only the target's version.
func TestReferenceSetTargetRewritten(t *testing.T) {
	requireH5py(t)
	for _, kind := range []string{"file", "http", "http-retargeted"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			h5 := filepath.Join(dir, "data.h5")
			run(t, python, "testdata/refsrewrite.py", "write", dir, "0")
			layout := func() map[string][2]int64 {
				var l map[string][2]int64
				b, err := os.ReadFile(filepath.Join(dir, "layout.json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				return l
			}
			before := layout()
			source := filepath.Join(dir, "refs.json")
			if kind != "file" {
				source = nginxServer(t, dir) + "/refs.json"
			}
			then := time.Now().Add(-time.Hour).Truncate(time.Second)
			setMtime(t, h5, then)
			if kind == "http-retargeted" {
				copyFile(t, h5, filepath.Join(dir, "b.h5"))
			}
			cacheDir := t.TempDir()
			mount := func() *serving {
				return startVolfs(t, "mount", "--cache-dir", cacheDir, "--cache-size", "16MiB", source)
			}
			s := mount()
			run(t, python, "testdata/refsrewrite.py", "verify", dir, s.mnt)
			stopVolfs(t, s)

			name := "data.h5"
			switch kind {
			case "file":
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1")
			case "http":
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1")
				// nginx's ETag holds whole seconds.
				setMtime(t, h5, then.Add(2*time.Second))
			case "http-retargeted":
				name = "b.h5"
				run(t, python, "testdata/refsrewrite.py", "write", dir, "1", name)
				setMtime(t, filepath.Join(dir, name), then)
				a, _ := os.Stat(h5)
				b, _ := os.Stat(filepath.Join(dir, name))
				if a.Size() != b.Size() {
					t.Fatalf("b.h5 has %d bytes, data.h5 %d: the test needs one ETag for both", b.Size(), a.Size())
				}
			}
			after := layout()
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("the rewrite moved %s from %v to %v; the test needs it in place", k, v, after[k])
				}
			}
			s = mount()
			if out, err := runErr(python, "testdata/refsrewrite.py", "verify", dir, s.mnt, name); err != nil {
				t.Errorf("after the rewrite, the second mount reads old values: %v\n%s", err, out)
			}
			stopVolfs(t, s)
		})
	}
}
