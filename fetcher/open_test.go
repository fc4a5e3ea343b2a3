package fetcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/gcsfake"
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

// TestErrorWording: the errors of a local and of a gs:// source begin
// with the operation and the object, as an http(s):// source's do, with
// no package prefix for the command line to strip; a SOURCE that no
// fetcher serves is told by a sentinel, not by its text.
func TestErrorWording(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	_, scheme := Open("ftp://h/vol", Options{})
	_, notDir := Open(file, Options{})
	_, missing := Open(filepath.Join(dir, "missing"), Options{})
	local, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, localGet := local.Get(context.Background(), "nothere", 10)
	gs := gcsFetcher(t, gcsfake.Start(t, gcsfake.Options{}), "nobucket/p")
	_, gsGet := gs.Get(context.Background(), "k", 10)
	_, gsList := gs.List(context.Background(), "")
	for name, tc := range map[string]struct {
		err      error
		sentinel error
	}{
		"unsupported scheme": {scheme, ErrUnsupportedScheme},
		"a file as SOURCE":   {notDir, ErrNotDirectory},
		"missing SOURCE":     {missing, nil},
		"local Get":          {localGet, ErrNotExist},
		"gs Get":             {gsGet, ErrNotExist},
		"gs List":            {gsList, ErrNotExist},
	} {
		if tc.err == nil || strings.Contains(tc.err.Error(), "fetcher: ") {
			t.Errorf("%s: %v, want an error with no package prefix", name, tc.err)
		}
		if tc.sentinel != nil && !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%s: %v, want it to wrap %v", name, tc.err, tc.sentinel)
		}
	}
}
