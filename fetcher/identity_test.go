package fetcher

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/volfs/volfs/internal/gcsfake"
)

// identities returns the identities that Get, GetRange and Stat report for
// key, failing unless all three agree and are known.
func identities(t *testing.T, f Fetcher, key string) Identity {
	t.Helper()
	ctx := context.Background()
	obj, err := f.Get(ctx, key, 1<<20)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	_, rid, err := f.GetRange(ctx, key, 1, 3)
	if err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	_, sid, err := f.Stat(ctx, key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if !obj.ID.Known() || obj.ID != rid || obj.ID != sid {
		t.Fatalf("identities of %s: Get %q, GetRange %q, Stat %q: want one known identity", key, obj.ID, rid, sid)
	}
	// A listing that names versions (gs://, S3) names this one: the
	// keeping source learns identities from listings.
	entries, err := f.List(ctx, "")
	if err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatalf("List: %v", err)
	}
	for _, e := range entries {
		if e.Name == key && e.ID != "" && e.ID != sid {
			t.Errorf("identity of %s in its listing: %q, Stat %q: want the same", key, e.ID, sid)
		}
	}
	return obj.ID
}

// TestIdentity: every fetcher reports one identity for an object through
// Get, GetRange and Stat, the same while the object is unchanged, and
// another once it is rewritten with bytes of the same size.
func TestIdentity(t *testing.T) {
	before, after := bytes.Repeat([]byte{1}, 4096), bytes.Repeat([]byte{2}, 4096)
	// rewrite puts new bytes of the same size at the key and a modification
	// time a few seconds later (HTTP's Last-Modified counts seconds).
	type source struct {
		f       Fetcher
		rewrite func(t *testing.T)
	}
	fileSource := func(t *testing.T, inPlace bool) (string, func(t *testing.T)) {
		dir := writeTree(t, map[string][]byte{"k": before})
		p := filepath.Join(dir, "k")
		return dir, func(t *testing.T) {
			t.Helper()
			if inPlace {
				fh, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				fh.WriteAt(after, 0)
				fh.Close()
			} else {
				tmp := p + ".new"
				if err := os.WriteFile(tmp, after, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, p); err != nil {
					t.Fatal(err)
				}
			}
			later := time.Now().Add(5 * time.Second)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}
	}
	fileFetcher := func(t *testing.T, inPlace bool) source {
		dir, rw := fileSource(t, inPlace)
		f, err := NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		return source{f, rw}
	}
	for _, tc := range []struct {
		name string
		mk   func(t *testing.T) source
	}{
		{"file rewritten in place", func(t *testing.T) source { return fileFetcher(t, true) }},
		{"file renamed over", func(t *testing.T) source { return fileFetcher(t, false) }},
		{"http Last-Modified", func(t *testing.T) source {
			dir, rw := fileSource(t, false)
			srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
			t.Cleanup(srv.Close)
			h, err := NewHTTP(srv.URL, fastRetries)
			if err != nil {
				t.Fatal(err)
			}
			return source{h, rw}
		}},
		{"http ETag", func(t *testing.T) source {
			dir, rw := fileSource(t, false)
			files := http.FileServer(http.Dir(dir))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fi, err := os.Stat(filepath.Join(dir, r.URL.Path))
				if err == nil {
					// A weak ETag on GET, strong on HEAD: the same version.
					etag := `"` + fi.ModTime().Format(time.RFC3339Nano) + `"`
					if r.Method == http.MethodGet {
						etag = "W/" + etag
					}
					w.Header().Set("ETag", etag)
				}
				files.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			h, err := NewHTTP(srv.URL, fastRetries)
			if err != nil {
				t.Fatal(err)
			}
			return source{h, rw}
		}},
		{"gs generation", func(t *testing.T) source {
			e := gcsfake.Start(t, gcsfake.Options{Objects: []fakestorage.Object{{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: "k"}, Content: before}}})
			return source{gcsFetcher(t, e, "b"), func(t *testing.T) {
				e.Store.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "b", Name: "k"}, Content: after})
			}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.mk(t)
			first := identities(t, s.f, "k")
			if again := identities(t, s.f, "k"); again != first {
				t.Errorf("identity of an unchanged object: got %q, then %q", first, again)
			}
			s.rewrite(t)
			if got := identities(t, s.f, "k"); got == first {
				t.Errorf("identity after a rewrite of the same size: got %q again, want another", got)
			}
		})
	}
}

// TestHTTPIdentityForms: the identity an HTTP reply gives, from its ETag
// or its Last-Modified and size.
func TestHTTPIdentityForms(t *testing.T) {
	for _, tc := range []struct {
		etag, modified string
		size           int64
		want           Identity
	}{
		{`"abc"`, "", -1, `etag:"abc"`},
		{`W/"abc"`, "", -1, `etag:"abc"`},
		{`"abc-gzip"`, "", -1, `etag:"abc"`},
		{`"abc-br"`, "", 10, `etag:"abc"`},
		{"", "Mon, 02 Jan 2006 15:04:05 GMT", 10, "modified:1136214245:10"},
		{"", "Mon, 02 Jan 2006 15:04:05 GMT", -1, ""}, // size unknown
		{"", "yesterday", 10, ""},
		{"", "", 10, ""},
	} {
		h := http.Header{}
		if tc.etag != "" {
			h.Set("ETag", tc.etag)
		}
		if tc.modified != "" {
			h.Set("Last-Modified", tc.modified)
		}
		if got := httpIdentity(h, tc.size); got != tc.want {
			t.Errorf("httpIdentity(ETag %q, Last-Modified %q, size %d) = %q, want %q", tc.etag, tc.modified, tc.size, got, tc.want)
		}
	}
}
