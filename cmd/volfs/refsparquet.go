package main

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/refs"
)

// openParquetSet opens source as a Parquet reference set when its
// .zmetadata says it is one (it names record_size). ok is false when
// source is not one, and the caller opens it as any other source.
func openParquetSet(ctx context.Context, c *cli.Context, source string, opts fetcher.Options, log *slog.Logger) (f fetcher.Fetcher, ok bool, err error) {
	var allow []string
	for _, a := range strings.Split(c.String("refs-allow"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			allow = append(allow, a)
		}
	}
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, opts) }
	set, err := refs.LoadParquet(ctx, source, refs.Options{Open: open, Allow: allow, Log: log})
	switch {
	case err == nil:
		log.Info("reference set (Parquet)", "source", source)
		return set, true, nil
	case errors.Is(err, refs.ErrNotReferenceSet), errors.Is(err, fetcher.ErrNotExist), errors.Is(err, fetcher.ErrTooLarge):
		// A .zmetadata too large for a reference set's is a consolidated
		// Zarr group's.
		return nil, false, nil
	}
	return nil, true, err
}

// mayBeParquetSet reports whether source could name a Parquet reference
// set's directory: a local directory holding a .zmetadata, or an http(s)
// URL whose last element ends in ".parq" or ".parquet" (kerchunk and
// VirtualiZarr name them so; sniffing every http directory would cost a
// request per mount that directory sources never needed).
func mayBeParquetSet(source string) bool {
	if isLocal(source) {
		p := strings.TrimPrefix(source, "file://")
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return false
		}
		st, err := os.Stat(filepath.Join(p, ".zmetadata"))
		return err == nil && st.Mode().IsRegular()
	}
	l := strings.ToLower(source)
	if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
		return false
	}
	if u, err := url.Parse(l); err == nil {
		l = u.Path
	}
	l = strings.TrimSuffix(l, "/")
	return strings.HasSuffix(l, ".parq") || strings.HasSuffix(l, ".parquet")
}
