package fetcher

import (
	"fmt"
	"net/url"
	"strings"
)

// Options configures the fetchers that Open makes.
type Options struct {
	HTTP HTTPOptions
	File FileOptions
	GCS  GCSOptions
	S3   S3Options
}

// Open returns the Fetcher for source: a gs://bucket[/prefix] URL, an
// s3://bucket[/prefix] URL, an
// http:// or https:// URL, a file:// URL, or a plain path. Any other
// scheme is refused. A neuroglancer-style format prefix
// ("precomputed://", "zarr://", ...) must be stripped by the caller.
func Open(source string, opts Options) (Fetcher, error) {
	scheme, _, ok := strings.Cut(source, "://")
	if !ok || strings.ContainsAny(scheme, `/\`) {
		return newFile(source, opts.File)
	}
	switch strings.ToLower(scheme) {
	case "http", "https":
		h, err := NewHTTP(source, opts.HTTP)
		if err != nil {
			return nil, err
		}
		return h, nil
	case "file":
		u, err := url.Parse(source)
		if err != nil {
			return nil, err
		}
		if u.Host != "" && u.Host != "localhost" || u.Path == "" {
			return nil, fmt.Errorf("%q does not name a local directory", source)
		}
		return newFile(u.Path, opts.File)
	case "gs":
		g, err := NewGCS("gs://"+source[len("gs://"):], opts.GCS)
		if err != nil {
			return nil, err
		}
		return g, nil
	case "s3":
		s, err := NewS3("s3://"+source[len("s3://"):], opts.S3)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("%q: %w %q", source, ErrUnsupportedScheme, scheme)
}

// newFile is NewFileWith returning a nil interface, not a typed nil, on
// error.
func newFile(root string, opts FileOptions) (Fetcher, error) {
	f, err := NewFileWith(root, opts)
	if err != nil {
		return nil, err
	}
	return f, nil
}
