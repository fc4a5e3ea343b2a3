package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// bufs holds the reply buffers, blockSize each.
var bufs = sync.Pool{New: func() any { b := make([]byte, blockSize); return &b }}

// get answers GET and HEAD of the tree path p.
func (s *Server) get(w *response, r *http.Request, p string) {
	ctx := r.Context()
	n, err := s.tree.Resolve(ctx, p)
	if err != nil {
		s.fail(w, r, s.status(ctx, err, "lookup", p))
		return
	}
	slash := strings.HasSuffix(r.URL.Path, "/")
	if d, ok := n.(fs.Dir); ok {
		if !slash {
			redirect(w, r, path.Base(r.URL.Path)+"/")
			return
		}
		s.list(w, r, p, d)
		return
	}
	if slash && p != "" {
		redirect(w, r, "../"+path.Base(p))
		return
	}
	s.file(w, r, p, n.(fs.File))
}

// redirect sends r to the relative URL to, keeping its query, as
// http.FileServer does for a directory named without its slash.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	loc := (&url.URL{Path: to}).String()
	if q := r.URL.RawQuery; q != "" {
		loc += "?" + q
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusMovedPermanently)
}

// fail answers a request that failed before its body with code. The
// headers of the file's bytes are dropped, and the error is marked for no
// cache to keep: a transient failure must not stick in a browser's cache.
func (s *Server) fail(w *response, r *http.Request, code int) {
	if code == statusClientGone {
		w.code = code
		return
	}
	h := w.Header()
	for _, k := range []string{"ETag", "Last-Modified", "Accept-Ranges", "Content-Length"} {
		h.Del(k)
	}
	h.Set("Cache-Control", "no-store")
	http.Error(w, fmt.Sprintf("%d %s", code, strings.ToLower(http.StatusText(code))), code)
}

// file answers the bytes of f, the file at p: whole, or one range of them.
//
// A file whose ETag names the version of its bytes (validators.versioned)
// is sent only with the bytes of that version. The tag is made before the
// bytes are read, from the version the tree knows then, while the bytes
// may come from a load that meets a newer one (the chunk had left memory
// and its object was rewritten): so the version is asked again once the
// first block is read, which is when such a load has run and learnt what
// it read. When it moved, nothing has been sent yet and the request is
// answered again from the start with the new tag (its If-Range and
// If-None-Match judged against it); when it moves again, it is 502 (as the
// mount's ESTALE), never the new bytes under the tag of the old. Any
// other file's strong tag moves with the changes the tree sees
// (fs.Tree.Changes) and is checked the same way, so that a view's first
// block, which may load a rewritten chunk, is not sent under the tag of
// the bytes before it.
func (s *Server) file(w *response, r *http.Request, p string, f fs.File) {
	ctx := r.Context()
	for attempt := 1; ; attempt++ {
		rp, ok := s.openFile(w, r, p, f)
		if !ok {
			return
		}
		if rp.v.strong && r.Method != http.MethodHead && rp.readErr == nil {
			if now, _ := s.validators(ctx, p, f, true); now.etag != rp.v.etag {
				rp.release()
				if attempt < 2 {
					s.log.Debug("a chunk changed while it was read: answering again", "path", "/"+p, "etag", rp.v.etag, "now", now.etag)
					continue
				}
				err := fmt.Errorf("serve: %s: %w: its version moved from %s to %s while it was read", p, fetcher.ErrChanged, rp.v.etag, now.etag)
				s.fail(w, r, s.status(ctx, err, "read", p))
				return
			}
		}
		defer rp.release()
		s.send(w, r, p, rp)
		return
	}
}

// reply is a file's reply up to its first block: the validators it
// carries, the status and span it answers, the open handle, and the first
// block read (for a GET).
type reply struct {
	v       validators
	code    int
	off, n  int64
	hd      *fs.Handle
	buf     []byte
	bp      *[]byte // buf's pool entry
	k       int     // bytes of the first block in buf
	readErr error   // the first block's error
}

// release closes rp's handle and gives its buffer back.
func (rp *reply) release() {
	rp.hd.Close()
	if rp.bp != nil {
		bufs.Put(rp.bp)
	}
}

// openFile sets the headers of f's reply to r, evaluates its
// preconditions and Range, opens f and reads the first block; false when
// it has answered the request (304, 412, 416 or a failure to open).
func (s *Server) openFile(w *response, r *http.Request, p string, f fs.File) (*reply, bool) {
	ctx := r.Context()
	size := f.Size()
	v, _ := s.validators(ctx, p, f, true)
	h := w.Header()
	h.Set("ETag", v.etag)
	h.Set("Last-Modified", v.mod.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Del("Content-Range")
	if v.strong {
		h.Set("Cache-Control", "public, max-age=3600")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Content-Type", contentType(p))
	if code := precondition(r, v); code != 0 {
		if code == http.StatusNotModified {
			w.WriteHeader(code)
		} else {
			s.fail(w, r, code)
		}
		return nil, false
	}
	rp := &reply{v: v, n: size, code: http.StatusOK}
	if rg := r.Header.Get("Range"); rg != "" && rangeApplies(r, v) {
		off, n, ok, satisfiable := parseRange(rg, size)
		switch {
		case ok && !satisfiable:
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			s.fail(w, r, http.StatusRequestedRangeNotSatisfiable)
			return nil, false
		case ok:
			rp.code, rp.off, rp.n = http.StatusPartialContent, off, n
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size))
		}
	}
	span := rp.n // what the reply reads of the file
	if r.Method == http.MethodHead {
		span = 0
	}
	hd, err := s.tree.OpenRange(ctx, f, p, readerID(r), rp.off, span)
	if err != nil {
		s.fail(w, r, s.status(ctx, err, "open", p))
		return nil, false
	}
	rp.hd = hd
	if r.Method == http.MethodHead {
		return rp, true
	}
	// The first block is read before the status is sent, so that a file
	// that cannot be read at all gets an error status, not a cut body.
	rp.bp = bufs.Get().(*[]byte)
	rp.buf = *rp.bp
	rp.k, rp.readErr = hd.ReadAt(ctx, rp.buf[:min(int64(len(rp.buf)), rp.n)], rp.off)
	return rp, true
}

// send sends the reply rp opened (openFile): its status, then its bytes,
// block by block.
func (s *Server) send(w *response, r *http.Request, p string, rp *reply) {
	ctx := r.Context()
	h := w.Header()
	h.Set("Content-Length", strconv.FormatInt(rp.n, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(rp.code)
		return
	}
	buf, n, off := rp.buf, rp.n, rp.off
	for done := int64(0); done < n || done == 0; {
		k, err := rp.k, rp.readErr
		if done > 0 {
			k, err = rp.hd.ReadAt(ctx, buf[:min(int64(len(buf)), n-done)], off+done)
		}
		if err == nil && k == 0 && done < n {
			err = fmt.Errorf("serve: %s: ends at %d bytes, want %d", p, off+done, rp.hd.Size())
		}
		if err != nil {
			code := s.status(ctx, err, "read", p)
			if done == 0 {
				h.Del("Content-Range")
				s.fail(w, r, code)
				return
			}
			// Part of the body is sent: only a cut connection tells the
			// client that the rest is not coming (never wrong bytes).
			w.code = code
			panic(http.ErrAbortHandler)
		}
		if done == 0 {
			w.WriteHeader(rp.code)
		}
		if err := w.writeBlock(ctx, buf[:k]); err != nil {
			w.code = statusClientGone
			return
		}
		done += int64(k)
		if n == 0 {
			break
		}
	}
}

// precondition evaluates If-Match, If-None-Match and If-Modified-Since
// against the file's validators v: 0 when the request goes on, otherwise
// the status to answer (304 or 412). If-Match compares strongly: a weak
// ETag never matches it. If-Modified-Since is evaluated only where the
// date stands for the bytes (v.dates): not for a file whose ETag names its
// version, nor once the tree has seen its source change, since its
// Last-Modified is the server's start, which stays when the bytes change.
func precondition(r *http.Request, v validators) int {
	if im := r.Header.Get("If-Match"); im != "" && strings.TrimSpace(im) != "*" && (!v.strong || !etagMatch(im, v.etag)) {
		return http.StatusPreconditionFailed
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if etagMatch(inm, v.etag) {
			return http.StatusNotModified
		}
		return 0
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && v.dates {
		if t, err := http.ParseTime(ims); err == nil && !v.mod.After(t) {
			return http.StatusNotModified
		}
	}
	return 0
}

// rangeApplies evaluates If-Range: the Range header counts unless If-Range
// names another version of the file, or validators v are weak (RFC 9110
// 13.1.5: If-Range needs a strong match). A date matches only where it
// stands for the bytes (v.dates, as in precondition): otherwise only the
// ETag tells two versions apart.
func rangeApplies(r *http.Request, v validators) bool {
	ir := r.Header.Get("If-Range")
	if ir == "" {
		return true
	}
	if !v.strong {
		return false
	}
	if strings.HasPrefix(ir, `"`) {
		return ir == v.etag
	}
	t, err := http.ParseTime(ir)
	return err == nil && v.dates && t.Equal(v.mod)
}

// etagMatch reports whether the If-Match or If-None-Match list l names
// etag (weakly: a W/ prefix is ignored on both, as If-None-Match compares).
func etagMatch(l, etag string) bool {
	etag = strings.TrimPrefix(etag, "W/")
	for _, e := range strings.Split(l, ",") {
		e = strings.TrimPrefix(strings.TrimSpace(e), "W/")
		if e == "*" || e == etag {
			return true
		}
	}
	return false
}

// parseRange parses a Range header for a file of size bytes. ok is false
// when the header is to be ignored (not bytes, malformed, several ranges);
// satisfiable is false when it names no byte of the file (416).
func parseRange(h string, size int64) (off, n int64, ok, satisfiable bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, false
	}
	if first == "" {
		k, err := strconv.ParseInt(last, 10, 64)
		if err != nil || k < 0 {
			return 0, 0, false, false
		}
		if k == 0 || size == 0 {
			return 0, 0, true, false
		}
		k = min(k, size)
		return size - k, k, true, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, 0, false, false
	}
	b := size - 1
	if last != "" {
		if b, err = strconv.ParseInt(last, 10, 64); err != nil || b < a {
			return 0, 0, false, false
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, true, false
	}
	return a, b - a + 1, true, true
}

// contentType is the media type of the file at p: JSON for the metadata
// files of the formats, TIFF for sections, text for headers and notes,
// and bytes for the rest. No file of the source is ever served as HTML,
// SVG or script: a hostile object must not run in the server's origin.
func contentType(p string) string {
	base := path.Base(p)
	switch strings.ToLower(path.Ext(base)) {
	case ".json":
		return "application/json"
	case ".tif", ".tiff":
		return "image/tiff"
	case ".nhdr", ".mhd", ".txt", ".md":
		return "text/plain; charset=utf-8"
	}
	switch base {
	case "info", ".zarray", ".zattrs", ".zgroup", ".zmetadata":
		return "application/json"
	}
	return "application/octet-stream"
}

// listEntry is one child in a JSON listing.
type listEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file" or "directory"
	Size *int64 `json:"size,omitempty"`
}

// list answers the listing of d, the directory at p: an HTML index as
// http.FileServer writes it, or with ?format=json a JSON array of
// {"name", "type", "size"} (size for files only). Entries are written as
// the listing yields them, so a directory of a million chunks needs no
// more memory than one.
func (s *Server) list(w *response, r *http.Request, p string, d fs.Dir) {
	ctx := r.Context()
	l, err := d.List(ctx)
	if err != nil {
		s.fail(w, r, s.status(ctx, err, "readdir", p))
		return
	}
	h := w.Header()
	h.Set("Last-Modified", s.start.UTC().Format(http.TimeFormat))
	h.Set("Cache-Control", "no-cache")
	asJSON := r.URL.Query().Get("format") == "json"
	if asJSON {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "text/html; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := newBlockWriter(ctx, w)
	if asJSON {
		s.listJSON(ctx, bw, d, l)
	} else {
		bw.WriteString("<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n")
		for i := range l.Len() {
			name, isDir := l.Entry(i)
			if isDir {
				name += "/"
			}
			// As http.FileServer: a name with a colon must not read as a
			// scheme.
			u := url.URL{Path: name}
			fmt.Fprintf(bw, "<a href=\"%s\">%s</a>\n", htmlReplacer.Replace(u.String()), htmlReplacer.Replace(name))
			if bw.err != nil {
				break
			}
		}
		bw.WriteString("</pre>\n")
	}
	if bw.flush() != nil {
		w.code = statusClientGone
	}
}

// listJSON writes l, the listing of d, as a JSON array. A file's size
// comes from its lookup, which costs no fetch for chunk and view files;
// a child that fails its lookup is listed without a size.
func (s *Server) listJSON(ctx context.Context, bw *blockWriter, d fs.Dir, l fs.Listing) {
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // names as they are: "<" not "\u003c" (issue 30 item 7)
	bw.WriteString("[")
	for i := range l.Len() {
		name, isDir := l.Entry(i)
		e := listEntry{Name: name, Type: "file"}
		if isDir {
			e.Type = "directory"
		} else if n, err := d.Lookup(ctx, name); err == nil {
			if f, ok := n.(fs.File); ok {
				size := f.Size()
				e.Size = &size
			}
		}
		if i > 0 {
			bw.WriteString(",")
		}
		enc.Encode(e)
		if bw.err != nil || ctx.Err() != nil {
			return
		}
	}
	bw.WriteString("]\n")
}

var htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

// blockWriter gathers small writes into blocks, so that a listing is sent
// in few writes (each with its deadline, the slot given back meanwhile),
// and remembers the first error.
type blockWriter struct {
	ctx context.Context
	w   *response
	buf []byte
	err error
}

func newBlockWriter(ctx context.Context, w *response) *blockWriter {
	return &blockWriter{ctx: ctx, w: w, buf: make([]byte, 0, 64<<10)}
}

func (b *blockWriter) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= cap(b.buf)-1024 {
		b.flush()
	}
	return len(p), b.err
}

func (b *blockWriter) WriteString(s string) { b.Write([]byte(s)) }

func (b *blockWriter) flush() error {
	if b.err == nil && len(b.buf) > 0 {
		b.err = b.w.writeBlock(b.ctx, b.buf)
		b.buf = b.buf[:0]
	}
	return b.err
}
