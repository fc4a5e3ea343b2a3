package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/refs"
)

// refsFlagTable lists the flags of reference-set sources, rows of
// flagTable.
func refsFlagTable() []flagDef {
	return []flagDef{
		{onSource, &cli.StringFlag{Name: "refs-allow", Usage: "reference-set sources: further roots (URLs or local directories, comma-separated) that the set's targets may lie under; by default only the reference file's own directory on its scheme, host and port"}},
	}
}

// openSource opens source with opts: as a kerchunk reference set when it
// is a local regular file or an http(s), gs:// or s3:// URL of an object
// whose content is a reference set (detected by content), else as a
// directory source.
func openSource(ctx context.Context, c *cli.Context, source string, opts fetcher.Options, log *slog.Logger) (fetcher.Fetcher, error) {
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, opts) }
	if try, sniff := mayBeParquetSet(source); try {
		if f, ok, err := openParquetSet(ctx, c, source, sniff, opts, log); ok {
			if err != nil {
				return nil, fmt.Errorf("reference set %s: %w", source, err)
			}
			return f, nil
		}
	}
	try, sniff := mayBeReferenceSet(source)
	if !try {
		return open(source)
	}
	var allow []string
	for _, a := range strings.Split(c.String("refs-allow"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			allow = append(allow, a)
		}
	}
	f, err := refs.Load(ctx, source, refs.Options{Open: open, Allow: allow, Log: log, Sniff: sniff})
	switch {
	case err == nil:
		log.Info("reference set", "source", source, "keys", f.Manifest().Len(), "targets", len(f.Manifest().URLs()))
		return f, nil
	case errors.Is(err, refs.ErrNotReferenceSet) && !isLocal(source):
		return open(source)
	case errors.Is(err, fetcher.ErrNotExist) && !isLocal(source):
		return open(source)
	case errors.Is(err, refs.ErrNotReferenceSet):
		// A local file that is not a reference set: say what a SOURCE
		// may be, as for any other file given as one.
		return nil, fmt.Errorf("%s is a file, not a directory, nor a kerchunk reference set; %s", strings.TrimPrefix(source, "file://"), sourceKinds)
	}
	return nil, fmt.Errorf("reference set %s: %w", source, err)
}

// mayBeReferenceSet reports whether source could name one reference file
// (try): a local regular file, or an http(s), gs:// or s3:// URL with a
// last path element. sniff is set for a URL whose name does not end in
// ".json": it names a directory source as often as a reference file, and
// only a strict look at its first bytes, in one small request, may take
// it for a reference set (refs.Options.Sniff).
func mayBeReferenceSet(source string) (try, sniff bool) {
	if isLocal(source) {
		st, err := os.Stat(strings.TrimPrefix(source, "file://"))
		return err == nil && st.Mode().IsRegular(), false
	}
	u, ok := remoteSetURL(source)
	name := path.Base(u.Path)
	if !ok || strings.HasSuffix(u.Path, "/") || name == "/" || name == "." {
		return false, false
	}
	return true, !strings.HasSuffix(strings.ToLower(name), ".json")
}

// remoteSetURL parses source as a URL of a scheme a reference set may be
// read from (http, https, gs, s3) with a path; false for any other.
func remoteSetURL(source string) (*url.URL, bool) {
	u, err := url.Parse(source)
	if err != nil {
		return &url.URL{}, false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "gs", "s3":
		return u, u.Path != ""
	}
	return u, false
}

func isLocal(source string) bool {
	scheme, _, ok := strings.Cut(source, "://")
	return !ok || strings.ContainsAny(scheme, `/\`) || strings.EqualFold(scheme, "file")
}
