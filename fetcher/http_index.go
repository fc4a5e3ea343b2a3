package fetcher

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// List reads the HTML directory index at the URL of prefix plus "/", as Go's
// http.FileServer, Python's http.server, nginx autoindex and Apache serve
// it: the links that name a direct child are the entries, a trailing slash
// marks a directory, and Size is always -1. A 404 or a reply that is not
// text/html returns ErrNotSupported, since a server without indexes says
// nothing about whether the prefix exists.
func (h *HTTP) List(ctx context.Context, prefix string) ([]Entry, error) {
	dir := ""
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, err
		}
		dir = prefix + "/"
	}
	header := http.Header{"Accept": {"text/html"}, "Accept-Encoding": {"identity"}}
	var entries []Entry
	err := h.do(ctx, "GET", h.url(dir), header, upTo(h.opts.MaxObjectSize), func(resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusNotFound, http.StatusGone:
			return fmt.Errorf("%s: no directory index: %w", resp.Status, ErrNotSupported)
		default:
			return statusError(resp)
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/html" {
			return fmt.Errorf("reply is %q, not a directory index: %w", mt, ErrNotSupported)
		}
		if enc := contentEncoding(resp); enc != "" {
			return fmt.Errorf("directory index has Content-Encoding %q", enc)
		}
		var err error
		entries, err = parseIndex(io.LimitReader(resp.Body, h.opts.MaxObjectSize), resp.Request.URL)
		return err
	})
	return entries, err
}

// maxIndexToken bounds one token (a tag with its attributes, a run of
// text) of a directory index: a row of any server's index is a few
// hundred bytes.
const maxIndexToken = 1 << 20

// parseIndex returns the direct children of dir that the links of an HTML
// directory index name, each once. An index is bounded as an S3 listing
// is (S3MaxListEntries, S3MaxListBytes of names) and each of its tokens by
// maxIndexToken: past them it is refused (ErrTooLarge), not held.
func parseIndex(r io.Reader, dir *url.URL) ([]Entry, error) {
	var entries []Entry
	seen := make(map[string]bool)
	names := 0
	z := html.NewTokenizer(r)
	z.SetMaxBuf(maxIndexToken)
	for {
		switch z.Next() {
		case html.ErrorToken:
			switch err := z.Err(); {
			case err == html.ErrBufferExceeded:
				return nil, fmt.Errorf("directory index with a token of more than %d bytes: %w", maxIndexToken, ErrTooLarge)
			case err != io.EOF:
				return nil, bodyError(err)
			}
			return entries, nil
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if string(name) != "a" {
				continue
			}
			for more {
				var key, val []byte
				key, val, more = z.TagAttr()
				if string(key) != "href" {
					continue
				}
				if e, ok := indexEntry(dir, string(val)); ok && !seen[e.Name] {
					seen[e.Name] = true
					entries = append(entries, e)
					if names += len(e.Name); len(entries) > S3MaxListEntries || names > S3MaxListBytes {
						return nil, fmt.Errorf("directory index of more than %d entries or %d bytes of names: %w", S3MaxListEntries, S3MaxListBytes, ErrTooLarge)
					}
				}
			}
		}
	}
}

// indexEntry returns the direct child of dir that href names, if any:
// links to parents, to other hosts or deeper paths, sort links ("?C=N")
// and anchors name none.
func indexEntry(dir *url.URL, href string) (Entry, bool) {
	ref, err := url.Parse(href)
	if err != nil {
		return Entry{}, false
	}
	u := dir.ResolveReference(ref)
	if u.Scheme != dir.Scheme || !strings.EqualFold(u.Host, dir.Host) || u.RawQuery != "" || u.Fragment != "" {
		return Entry{}, false
	}
	rest, ok := strings.CutPrefix(u.Path, dir.Path)
	name, isDir := strings.CutSuffix(rest, "/")
	if !ok || !strings.HasSuffix(dir.Path, "/") || strings.Contains(name, "/") || CheckKey(name) != nil {
		return Entry{}, false
	}
	return Entry{Name: name, IsDir: isDir, Size: -1}, true
}
