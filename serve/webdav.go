package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/net/webdav"

	"github.com/volfs/volfs/fs"
)

// propfind answers a WebDAV PROPFIND of the tree path p through the webdav
// handler. A listing of a whole subtree (Depth: infinity, which an absent
// Depth means) of a directory is refused as RFC 4918 allows
// (propfind-finite-depth): it would open every volume below.
func (s *Server) propfind(w *response, r *http.Request, p string) {
	if depth := strings.TrimSpace(r.Header.Get("Depth")); depth != "0" && depth != "1" {
		n, err := s.tree.Resolve(r.Context(), p)
		if err != nil {
			s.fail(w, r, s.status(r.Context(), err, "lookup", p))
			return
		}
		if n.IsDir() {
			w.Header().Set("Content-Type", "application/xml; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?>`+"\n"+`<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>`+"\n")
			return
		}
	}
	s.dav.ServeHTTP(w, r)
}

// davFS is the tree as a read-only webdav.FileSystem. Every change is
// os.ErrPermission (403), though the server answers the methods that
// would ask for one with 405 before they reach it.
type davFS struct{ s *Server }

func (d davFS) Mkdir(context.Context, string, os.FileMode) error { return os.ErrPermission }
func (d davFS) RemoveAll(context.Context, string) error          { return os.ErrPermission }
func (d davFS) Rename(context.Context, string, string) error     { return os.ErrPermission }

// resolve returns the node at the webdav name (slash-rooted, cleaned by
// the webdav package) with its tree path, its errors mapped to what the
// webdav package answers: os.ErrNotExist is 404, os.ErrPermission 403.
func (d davFS) resolve(ctx context.Context, name string) (fs.Node, string, error) {
	p := strings.Trim(path.Clean("/"+name), "/")
	n, err := d.s.tree.Resolve(ctx, p)
	if err != nil {
		switch d.s.status(ctx, err, "lookup", p) {
		case http.StatusNotFound:
			return nil, p, fmt.Errorf("serve: /%s: %w", p, os.ErrNotExist)
		case http.StatusForbidden:
			return nil, p, fmt.Errorf("serve: /%s: %w", p, os.ErrPermission)
		}
		return nil, p, err
	}
	return n, p, nil
}

func (d davFS) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	n, p, err := d.resolve(ctx, name)
	if err != nil {
		return nil, err
	}
	return d.info(p, n), nil
}

func (d davFS) OpenFile(ctx context.Context, name string, flag int, _ os.FileMode) (webdav.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, os.ErrPermission
	}
	n, p, err := d.resolve(ctx, name)
	if err != nil {
		return nil, err
	}
	return &davFile{fs: d, p: p, n: n, ctx: ctx}, nil
}

// info returns the os.FileInfo of the node n at tree path p.
func (d davFS) info(p string, n fs.Node) *fileInfo {
	fi := &fileInfo{s: d.s, p: p, dir: n.IsDir()}
	if f, ok := n.(fs.File); ok {
		fi.size = f.Size()
	}
	return fi
}

// fileInfo is the os.FileInfo of a node. It also gives the webdav package
// the node's ETag (the one GET sends) and content type, which it would
// otherwise make by reading the file's first bytes.
type fileInfo struct {
	s    *Server
	p    string
	dir  bool
	size int64
}

func (fi *fileInfo) Name() string {
	if fi.p == "" {
		return "/"
	}
	return path.Base(fi.p)
}
func (fi *fileInfo) Size() int64 { return fi.size }
func (fi *fileInfo) Mode() iofs.FileMode {
	if fi.dir {
		return iofs.ModeDir | 0o555
	}
	return 0o444
}
func (fi *fileInfo) ModTime() time.Time { return fi.s.modTime() }
func (fi *fileInfo) IsDir() bool        { return fi.dir }
func (fi *fileInfo) Sys() any           { return nil }

// ETag implements webdav.ETager.
func (fi *fileInfo) ETag(context.Context) (string, error) {
	if fi.dir {
		return "", webdav.ErrNotImplemented
	}
	return fi.s.etag(fi.p, fi.size), nil
}

// ContentType implements webdav.ContentTyper.
func (fi *fileInfo) ContentType(context.Context) (string, error) {
	if fi.dir {
		return "", webdav.ErrNotImplemented
	}
	return contentType(fi.p), nil
}

// davFile is an open node. Reads are for the webdav package's own use;
// GET is answered by Server.file.
type davFile struct {
	fs  davFS
	p   string
	n   fs.Node
	ctx context.Context // the request's, which the file does not outlive
	h   *fs.Handle      // opened by the first Read: a PROPFIND opens files only to stat them
	off int64
	dir int64 // entries of a directory already returned by Readdir
}

func (f *davFile) Close() error                      { return nil }
func (f *davFile) Write([]byte) (int, error)         { return 0, os.ErrPermission }
func (f *davFile) Stat() (os.FileInfo, error)        { return f.fs.info(f.p, f.n), nil }
func (f *davFile) String() string                    { return "/" + f.p }
func (f *davFile) ReadFrom(io.Reader) (int64, error) { return 0, os.ErrPermission }

func (f *davFile) Read(p []byte) (int, error) {
	file, ok := f.n.(fs.File)
	if !ok {
		return 0, fmt.Errorf("serve: /%s: is a directory", f.p)
	}
	if f.h == nil {
		h, err := f.fs.s.tree.Open(f.ctx, file, f.p, 0)
		if err != nil {
			return 0, err
		}
		f.h = h
	}
	if f.off >= f.h.Size() {
		return 0, io.EOF
	}
	n, err := f.h.ReadAt(f.ctx, p, f.off)
	f.off += int64(n)
	if err == nil && n == 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (f *davFile) Seek(off int64, whence int) (int64, error) {
	file, ok := f.n.(fs.File)
	if !ok {
		return 0, fmt.Errorf("serve: /%s: is a directory", f.p)
	}
	switch whence {
	case io.SeekCurrent:
		off += f.off
	case io.SeekEnd:
		off += file.Size()
	}
	if off < 0 {
		return 0, errors.New("serve: seek before the start")
	}
	f.off = off
	return off, nil
}

// Readdir returns the next count entries (all of them when count <= 0).
// Only their names and kinds are right: the webdav package, its one
// caller, stats each child by its path for the rest, and a lookup here
// would do that work twice.
func (f *davFile) Readdir(count int) ([]os.FileInfo, error) {
	d, ok := f.n.(fs.Dir)
	if !ok {
		return nil, fmt.Errorf("serve: /%s: not a directory", f.p)
	}
	l, err := d.List(f.ctx)
	if err != nil {
		return nil, err
	}
	end := l.Len()
	if count > 0 {
		if f.dir >= end {
			return nil, io.EOF
		}
		end = min(end, f.dir+int64(count))
	}
	var out []os.FileInfo
	for ; f.dir < end; f.dir++ {
		name, isDir := l.Entry(f.dir)
		out = append(out, &fileInfo{s: f.fs.s, p: path.Join(f.p, name), dir: isDir})
	}
	return out, nil
}
