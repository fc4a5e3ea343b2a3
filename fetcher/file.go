package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// CheckKey reports whether key is a clean relative key (see the package
// documentation). It returns an error wrapping ErrInvalidKey, with the key
// quoted, for an empty key, an absolute key, an empty, "." or ".." element,
// a backslash (a separator on Windows and a trap in URLs) or a NUL byte.
// Every Fetcher calls it before any I/O; the empty prefix that List accepts
// for the root is the caller's special case.
func CheckKey(key string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
	}
	switch {
	case key == "":
		return bad("empty")
	case key[0] == '/':
		return bad("absolute")
	case strings.ContainsAny(key, "\\\x00"):
		return bad("backslash or NUL")
	}
	for elem := range strings.SplitSeq(key, "/") {
		switch elem {
		case "":
			return bad("empty element")
		case ".", "..":
			return bad(fmt.Sprintf("%q element", elem))
		}
	}
	return nil
}

// File is a Fetcher over a directory on local disk. A key names the path
// below the root; symbolic links are followed wherever they point, since the
// tree is the user's own. Directories are not objects: Get, GetRange and
// Stat of a directory return ErrNotExist. A context is checked before each
// call; a read that has started runs to its end.
type File struct {
	root string // absolute and clean
}

// NewFile returns a File fetcher rooted at root, which must be an existing
// directory.
func NewFile(root string) (*File, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fetcher: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("fetcher: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fetcher: %s is not a directory", abs)
	}
	return &File{root: abs}, nil
}

// Root returns the absolute, clean directory that f reads.
func (f *File) Root() string { return f.root }

// String returns "file://" followed by the absolute root.
func (f *File) String() string { return "file://" + filepath.ToSlash(f.root) }

// Get returns the whole file at key, which must be a regular file of at
// most limit bytes. ContentEncoding is always "".
func (f *File) Get(ctx context.Context, key string, limit int64) (Object, error) {
	p, err := f.path(ctx, key)
	if err != nil {
		return Object{}, err
	}
	fh, fi, err := openRegular(p)
	if err != nil {
		return Object{}, err
	}
	defer fh.Close()
	if fi.Size() > limit {
		return Object{}, fmt.Errorf("fetcher: read %s: %d bytes: %w (limit %d)", p, fi.Size(), ErrTooLarge, limit)
	}
	// The file may grow after the stat: read at most one byte past the
	// limit, so that growth is seen without reading it all.
	data := make([]byte, 0, fi.Size()+1)
	for int64(len(data)) <= limit {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := fh.Read(data[len(data):min(int64(cap(data)), limit+1)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return Object{Data: data}, nil
		}
		if err != nil {
			return Object{}, fileError("read", p, err)
		}
	}
	return Object{}, fmt.Errorf("fetcher: read %s: more than %d bytes: %w", p, limit, ErrTooLarge)
}

// openRegular opens the file at p for reading, refusing anything but a
// regular file (a FIFO, a device such as /dev/zero, a socket) with an error
// wrapping ErrNotExist: such a file holds no object. O_NONBLOCK keeps the
// open of a FIFO from waiting for a writer; it does not change reads of a
// regular file.
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fileError("open", p, err)
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, fileError("stat", p, err)
	}
	if !fi.Mode().IsRegular() {
		fh.Close()
		return nil, nil, fileError("open", p, fmt.Errorf("%s is not a regular file: %w", fi.Mode().Type(), ErrNotExist))
	}
	return fh, fi, nil
}

// GetRange reads length bytes at offset with one ReadAt; a zero length
// returns an empty slice without I/O, as HTTP does.
func (f *File) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := checkRange(offset, length); err != nil {
		return nil, err
	}
	p, err := f.path(ctx, key)
	if err != nil {
		return nil, err
	}
	if length == 0 {
		return []byte{}, nil
	}
	fh, fi, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	// Sizing the buffer from the file, not from length, keeps a caller that
	// asks for "everything from offset" from allocating a huge buffer.
	buf := make([]byte, min(length, max(fi.Size()-offset, 0)))
	n, err := fh.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, fileError("read", p, err)
	}
	return buf[:n], nil
}

// Stat returns the size of the regular file at key.
func (f *File) Stat(ctx context.Context, key string) (int64, error) {
	p, err := f.path(ctx, key)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, fileError("stat", p, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fileError("stat", p, fmt.Errorf("%s is not a regular file: %w", fi.Mode().Type(), ErrNotExist))
	}
	return fi.Size(), nil
}

// List returns the entries of the directory prefix. A symbolic link is
// described by its target; a dangling link, and a name that no key can
// address (one holding a backslash, say), are left out because nothing
// could read them. Directories have Size -1.
func (f *File) List(ctx context.Context, prefix string) ([]Entry, error) {
	dir := f.root
	if prefix != "" {
		p, err := f.path(ctx, prefix)
		if err != nil {
			return nil, err
		}
		dir = p
	} else if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fetcher: %s: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fileError("list", dir, err)
	}
	entries := make([]Entry, 0, len(des))
	for _, de := range des {
		if CheckKey(de.Name()) != nil {
			continue
		}
		fi, err := de.Info()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			fi, err = os.Stat(filepath.Join(dir, de.Name()))
		}
		if err != nil {
			continue
		}
		e := Entry{Name: de.Name(), IsDir: fi.IsDir(), Size: fi.Size()}
		if e.IsDir {
			e.Size = -1
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// path checks key and ctx and returns the key's path on disk.
func (f *File) path(ctx context.Context, key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	p := filepath.Join(f.root, filepath.FromSlash(key))
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("fetcher: %s: %w", p, err)
	}
	return p, nil
}

// fileError classifies an error from package os. ENOTDIR (a key that runs
// through a file) and EISDIR (a key that names a directory) mean that no
// object has that key.
func fileError(op, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR):
		err = ErrNotExist
	case errors.Is(err, fs.ErrPermission):
		err = ErrPermission
	default:
		// The *PathError would repeat op and path.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
	}
	return fmt.Errorf("fetcher: %s %s: %w", op, path, err)
}

// checkRange refuses a negative offset or length, a caller's bug.
func checkRange(offset, length int64) error {
	if offset < 0 || length < 0 {
		return fmt.Errorf("fetcher: invalid range: offset %d, length %d", offset, length)
	}
	return nil
}
