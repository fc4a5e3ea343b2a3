package fetcher

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		source string
		want   string // String() of the fetcher, or a part of the error
		ok     bool
	}{
		{"http://h/vol", "http://h/vol", true},
		{"HTTPS://h/vol/", "https://h/vol", true},
		{dir, "file://" + filepath.ToSlash(dir), true},
		{"file://" + dir, "file://" + filepath.ToSlash(dir), true},
		{"file://localhost" + dir, "file://" + filepath.ToSlash(dir), true},
		{"file://remote" + dir, "local directory", false},
		{"file://", "local directory", false},
		{filepath.Join(dir, "missing"), "no such file", false},
		{"gs://bucket/vol", "gs://bucket/vol", true},
		{"GS://bucket/vol/", "gs://bucket/vol", true},
		{"gs://bucket", "gs://bucket", true},
		{"gs://", "want gs://BUCKET", false},
		{"gs://bucket/a/../b", "bad prefix", false},
		{"s3://bucket/vol", "s3://bucket/vol", true},
		{"S3://bucket/vol/", "s3://bucket/vol", true},
		{"s3://", "want s3://BUCKET", false},
		{"s3://bucket/a/../b", "bad prefix", false},
		{"ftp://h/vol", `unsupported scheme "ftp"`, false},
	} {
		// Anonymous: no test looks for credentials.
		f, err := Open(tc.source, Options{GCS: GCSOptions{Anonymous: true}})
		switch {
		case tc.ok && (err != nil || f.String() != tc.want):
			t.Errorf("Open(%q): got %v, %v, want %v", tc.source, f, err, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Open(%q): got %v, want an error containing %q", tc.source, err, tc.want)
		case !tc.ok && f != nil:
			t.Errorf("Open(%q): got fetcher %#v with the error, want nil", tc.source, f)
		}
	}
}

// TestOpenBadPort: a URL whose port cannot exist fails at once, with no
// request and no retry.
func TestOpenBadPort(t *testing.T) {
	for _, src := range []string{"http://127.0.0.1:99999/x", "https://example.org:0/x"} {
		start := time.Now()
		_, err := Open(src, Options{})
		if err == nil || !strings.Contains(err.Error(), "is not a port") {
			t.Errorf("Open(%q): got %v, want an error about the port", src, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Open(%q) took %v, want at once", src, d)
		}
	}
}
