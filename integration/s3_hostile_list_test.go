package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestS3HostileListingMount mounts a bucket (gofakes3) behind a front
// that answers the listing of docs/ as a hostile or broken server would:
// a page said to be truncated with no continuation token, or a 200 page
// of HTML (a proxy's portal). `ls` of docs/ through the mount fails with
// an error and a log line naming the listing, never a part of the
// directory (on 0d63a2d: one name of three, no error) nor "no such
// directory" (on 0d63a2d: ENOENT); so does a lookup of a file in it.
func TestS3HostileListingMount(t *testing.T) {
	requireFUSE(t)
	backend := s3mem.New()
	inner := gofakes3.New(backend, gofakes3.WithIntegrityCheck(false)).Server()
	if err := backend.CreateBucket("fake"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		data := []byte("the file " + name + "\n")
		if _, err := backend.PutObject("fake", "docs/"+name, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"truncated", "portal"} {
		t.Run(mode, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if r.Method != "GET" || q.Get("list-type") != "2" || q.Get("prefix") != "docs/" {
					inner.ServeHTTP(w, r)
					return
				}
				switch mode {
				case "truncated":
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>fake</Name><Prefix>docs/</Prefix><IsTruncated>true</IsTruncated><Contents><Key>docs/a.txt</Key><Size>19</Size></Contents></ListBucketResult>`)
				case "portal":
					w.Header().Set("Content-Type", "text/html")
					fmt.Fprint(w, "<html><body>Please sign in to the network.</body></html>")
				}
			}))
			t.Cleanup(srv.Close)
			s3Env(t, "", "")
			s := startVolfs(t, "mount", "--endpoint-url", srv.URL, "--cache-dir", t.TempDir(), "s3://fake")
			out, err := runBounded(t, time.Minute, "ls", filepath.Join(s.mnt, "docs"))
			if err == nil || strings.Contains(out, "No such file") {
				t.Errorf("ls docs/: %v\n%s\nwant an I/O error, not a listing nor ENOENT", err, out)
			}
			// A lookup in docs/ takes its listing: it fails as ls does.
			if got, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "docs", "c.txt")); err == nil || strings.Contains(got, "No such file") {
				t.Errorf("cat docs/c.txt: %v, %q; want an I/O error", err, got)
			}
			stopVolfs(t, s)
			if log := s.stderr.String(); !strings.Contains(log, "s3://fake/docs/") {
				t.Errorf("no log line naming the listing s3://fake/docs/:\n%s", log)
			}
		})
	}
}
