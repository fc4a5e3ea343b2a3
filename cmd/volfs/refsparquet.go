package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/refs"
)

// openParquetSet opens source as a Parquet reference set when its
// .zmetadata says it is one (it names record_size). ok is false when
// source is not one, and the caller opens it as any other source. sniff
// is mayBeParquetSet's.
func openParquetSet(ctx context.Context, c *cli.Context, source string, sniff bool, opts fetcher.Options, log *slog.Logger) (f fetcher.Fetcher, ok bool, err error) {
	var allow []string
	for _, a := range strings.Split(c.String("refs-allow"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			allow = append(allow, a)
		}
	}
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, opts) }
	set, err := refs.LoadParquet(ctx, source, refs.Options{Open: open, Allow: allow, Log: log, Sniff: sniff})
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
// set's directory (try): a local directory holding a .zmetadata, or an
// http(s), gs:// or s3:// URL with a last path element. sniff is set for
// a URL whose last element does not end in ".parq" or ".parquet" (the
// names kerchunk and VirtualiZarr give them): it is most often an
// ordinary directory source, and only the first 256 KiB of its
// .zmetadata, read in one request, may take it for a set
// (refs.Options.Sniff) — the one request such a source pays for the look.
func mayBeParquetSet(source string) (try, sniff bool) {
	if isLocal(source) {
		p := strings.TrimPrefix(source, "file://")
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			return false, false
		}
		st, err := os.Stat(filepath.Join(p, ".zmetadata"))
		return err == nil && st.Mode().IsRegular(), false
	}
	u, ok := remoteSetURL(source)
	name := strings.ToLower(path.Base(strings.TrimSuffix(u.Path, "/")))
	if !ok || name == "/" || name == "." {
		return false, false
	}
	return true, !strings.HasSuffix(name, ".parq") && !strings.HasSuffix(name, ".parquet")
}
