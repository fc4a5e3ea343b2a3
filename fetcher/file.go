package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/volfs/volfs/internal/mem"
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

// FileOptions configures a File fetcher.
type FileOptions struct {
	// FollowSymlinks follows symbolic links wherever they point. Without
	// it, the fetcher is confined to the root: a link is followed only
	// when its target, resolved, lies under the root, and an object
	// reached through a link that leaves the source (to /etc/shadow, say,
	// or a scale directory on another disk) is refused with ErrPermission,
	// so that a source cannot hand out files its owner could not put in
	// it. Such an object exists, so it is never reported missing.
	FollowSymlinks bool
	// Log receives one line, the first time a link is not followed,
	// saying how to allow it; nil means slog.Default().
	Log *slog.Logger
	// Exclude names directories that are never read, wherever links
	// lead, even with FollowSymlinks: the mountpoint that serves the
	// source, which the server must never read.
	Exclude []string
}

// File is a Fetcher over a directory on local disk. A key names the path
// below the root; symbolic links are followed as FileOptions says. Only
// regular files are objects: Get, GetRange and Stat of a directory return
// ErrNotExist, and of a FIFO, a device or a socket ErrNotRegular (which
// wraps ErrNotExist), without reading it (a FIFO or a
// device is never opened for reading, except when a rename races the
// check; even then the open does not block). A context is checked before
// each call; a read that has started runs to its end.
type File struct {
	root    string // absolute and clean, as given
	real    string // root with its symbolic links resolved
	follow  bool
	exclude []string // resolved FileOptions.Exclude
	log     *slog.Logger
	warned  atomic.Bool // a link not followed has been logged
	m       Metrics     // Conns stays 0: no connection is opened
}

// NewFile returns a File fetcher rooted at root, which must be an existing
// directory, with the default FileOptions.
func NewFile(root string) (*File, error) { return NewFileWith(root, FileOptions{}) }

// NewFileWith returns a File fetcher rooted at root, which must be an
// existing directory.
func NewFileWith(root string, opts FileOptions) (*File, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is %w", abs, ErrNotDirectory)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	f := &File{root: abs, real: real, follow: opts.FollowSymlinks, log: log}
	for _, x := range opts.Exclude {
		if x, err = filepath.Abs(x); err == nil {
			x, err = filepath.EvalSymlinks(x)
		}
		if err != nil {
			return nil, err
		}
		f.exclude = append(f.exclude, x)
	}
	return f, nil
}

// Root returns the absolute, clean directory that f reads.
func (f *File) Root() string { return f.root }

// Stats returns f's counters (Statser): every Get, GetRange, Stat and List
// with its outcome, and the bytes read. Conns is 0.
func (f *File) Stats() Stats { return f.m.Stats() }

// count counts the end of one call that read n bytes, by its error.
func (f *File) count(n int, err error) {
	if err == nil {
		f.m.AddBytes(int64(n))
	}
	f.m.Done(err)
}

// String returns "file://" followed by the absolute root.
func (f *File) String() string { return "file://" + filepath.ToSlash(f.root) }

// Get returns the whole file at key, which must be a regular file of at
// most limit bytes. ContentEncoding is always "".
func (f *File) Get(ctx context.Context, key string, limit int64) (obj Object, err error) {
	defer func() { f.count(len(obj.Data), err) }()
	p, err := f.path(ctx, key)
	if err != nil {
		return Object{}, err
	}
	fh, fi, err := f.openRegular(p)
	if err != nil {
		return Object{}, err
	}
	defer fh.Close()
	if fi.Size() > limit {
		return Object{}, fmt.Errorf("read %s: %d bytes: %w (limit %d)", p, fi.Size(), ErrTooLarge, limit)
	}
	// The file may grow after the stat: read at most one byte past the
	// limit, so that growth is seen without reading it all.
	data := mem.Get(int(fi.Size()) + 1)[:0]
	for int64(len(data)) <= limit {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := fh.Read(data[len(data):min(int64(cap(data)), limit+1)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return Object{Data: data, ID: readIdentity(fh, fi)}, nil
		}
		if err != nil {
			return Object{}, fileError("read", p, err)
		}
	}
	return Object{}, fmt.Errorf("read %s: more than %d bytes: %w", p, limit, ErrTooLarge)
}

// openRegular opens the file at p for reading, refusing anything but a
// regular file (a FIFO, a device such as /dev/zero, a socket) with an error
// wrapping ErrNotExist: such a file holds no object. The type is checked
// before the open, so that no device is opened, and again on the open
// file, against a rename in between. O_NONBLOCK keeps even that open of a
// FIFO from waiting for a writer; it does not change reads of a regular
// file. Unless f follows every symbolic link, the open file must lie under
// the root: checked on the descriptor, so that no swap of a link between
// check and open can escape.
func (f *File) openRegular(p string) (*os.File, fs.FileInfo, error) {
	if _, err := f.resolve(p); err != nil {
		return nil, nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, fileError("stat", p, err)
	}
	if err := regular(fi); err != nil {
		return nil, nil, fileError("open", p, err)
	}
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fileError("open", p, err)
	}
	if fi, err = fh.Stat(); err != nil {
		fh.Close()
		return nil, nil, fileError("stat", p, err)
	}
	if err := regular(fi); err != nil {
		fh.Close()
		return nil, nil, fileError("open", p, err)
	}
	if err := f.checkOpen(fh, p); err != nil {
		fh.Close()
		return nil, nil, err
	}
	return fh, fi, nil
}

// regular refuses a file that is not a regular file: a directory with
// ErrNotExist (a key that names one holds no object), anything else (a
// FIFO, a device, a socket) with ErrNotRegular.
func regular(fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("a directory: %w", ErrNotExist)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: %w", fi.Mode().Type(), ErrNotRegular)
	}
	return nil
}

// resolve returns p with its symbolic links resolved, refusing with an
// error wrapping ErrPermission a p that resolves outside the root unless f
// follows every link, or into an excluded directory. When f follows every
// link and excludes nothing, it returns p unresolved. A p that does
// not exist is refused the same way when its nearest existing directory
// resolves outside the root: what lies behind a link that leaves the
// source is neither shown nor reported missing.
func (f *File) resolve(p string) (string, error) {
	if f.follow && len(f.exclude) == 0 {
		return p, nil
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if !f.follow && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
			for dir := filepath.Dir(p); len(dir) >= len(f.root); dir = filepath.Dir(dir) {
				if r, derr := filepath.EvalSymlinks(dir); derr == nil {
					if ierr := f.inside(dir, r); ierr != nil {
						return "", ierr
					}
					break
				}
				if dir == f.root {
					break
				}
			}
		}
		return "", fileError("resolve", p, err)
	}
	if err := f.inside(p, real); err != nil {
		return "", err
	}
	return real, nil
}

// inside refuses real, the resolved path of p, when it is not under the
// root (unless f follows every link) or is under an excluded directory,
// with an error wrapping ErrPermission; the first refusal of a link that
// leaves the root is logged.
func (f *File) inside(p, real string) error {
	for _, x := range f.exclude {
		if real == x || x == "/" || strings.HasPrefix(real, x+"/") {
			return fmt.Errorf("%s: leads to %s, inside the mountpoint %s, which volfs never reads: %w", p, real, x, ErrPermission)
		}
	}
	if f.follow || real == f.real || f.real == "/" || strings.HasPrefix(real, f.real+"/") {
		return nil
	}
	if !f.warned.Swap(true) {
		f.log.Warn("fetcher: a symbolic link leaves the source and is not followed: what it leads to reads as permission denied (EACCES); volfs confines links to the source under --allow-other, and --follow-symlinks follows them (FollowSymlinks)",
			"link", p, "target", real, "source", f.real)
	}
	return fmt.Errorf("%s: leads to %s, outside the source %s (--follow-symlinks follows it): %w",
		p, real, f.real, ErrOutsideSource)
}

// checkOpen refuses an open file that is not under the root, unless f
// follows every link, and one under an excluded directory. The kernel names the file behind the descriptor in
// /proc/self/fd.
func (f *File) checkOpen(fh *os.File, p string) error {
	if f.follow && len(f.exclude) == 0 {
		return nil
	}
	rc, err := fh.SyscallConn()
	if err != nil {
		return fileError("open", p, err)
	}
	var real string
	var rerr error
	// Control, unlike Fd, leaves the descriptor non-blocking.
	if err := rc.Control(func(fd uintptr) {
		real, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return fileError("open", p, err)
	}
	if rerr != nil {
		return fileError("open", p, rerr)
	}
	return f.inside(p, real)
}

// GetRange reads length bytes at offset with one ReadAt; a zero length
// returns an empty slice without I/O, as HTTP does.
func (f *File) GetRange(ctx context.Context, key string, offset, length int64) (data []byte, id Identity, err error) {
	defer func() { f.count(len(data), err) }()
	if err := checkRange(offset, length); err != nil {
		return nil, "", err
	}
	p, err := f.path(ctx, key)
	if err != nil {
		return nil, "", err
	}
	if length == 0 {
		return []byte{}, "", nil
	}
	fh, fi, err := f.openRegular(p)
	if err != nil {
		return nil, "", err
	}
	defer fh.Close()
	// Sizing the buffer from the file, not from length, keeps a caller that
	// asks for "everything from offset" from allocating a huge buffer.
	buf := make([]byte, min(length, max(fi.Size()-offset, 0)))
	n, err := fh.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, "", fileError("read", p, err)
	}
	return buf[:n], readIdentity(fh, fi), nil
}

// Stat returns the size and identity of the regular file at key.
func (f *File) Stat(ctx context.Context, key string) (size int64, id Identity, err error) {
	defer func() { f.count(0, err) }()
	p, err := f.path(ctx, key)
	if err != nil {
		return 0, "", err
	}
	if _, err := f.resolve(p); err != nil {
		return 0, "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, "", fileError("stat", p, err)
	}
	if err := regular(fi); err != nil {
		return 0, "", fileError("stat", p, err)
	}
	return fi.Size(), fileIdentity(fi), nil
}

// fileIdentity is the Identity of a file: its size, modification and
// change times in nanoseconds and its inode number. The zero Identity
// when the system does not say them.
func fileIdentity(fi fs.FileInfo) Identity {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return Identity(fmt.Sprintf("file:%d:%d.%09d:%d.%09d:%d", fi.Size(),
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, st.Ino))
}

// readIdentity returns the identity of the open file fh, whose FileInfo
// was before when its bytes were read: the zero Identity when it changed
// meanwhile, since the bytes may then be of neither version.
func readIdentity(fh *os.File, before fs.FileInfo) Identity {
	after, err := fh.Stat()
	if err != nil {
		return ""
	}
	id := fileIdentity(after)
	if id != fileIdentity(before) {
		return ""
	}
	return id
}

// Mode returns the type and permission bits of the file or directory at
// key ("" for the root), following symbolic links as Get does: a link
// that Get would not follow is ErrNotExist. Like the file's bytes, its mode
// is read when asked and may change after.
func (f *File) Mode(ctx context.Context, key string) (fs.FileMode, error) {
	p := f.root
	if key != "" {
		var err error
		if p, err = f.path(ctx, key); err != nil {
			return 0, err
		}
	}
	if _, err := f.resolve(p); err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, fileError("stat", p, err)
	}
	return fi.Mode(), nil
}

// List returns the entries of the directory prefix. A symbolic link is
// described by its target's type; a link that Get would not follow is
// listed with Size -1 (reading it is ErrPermission). A dangling link and a
// name that no key can address (one holding a backslash, say) are left out
// because nothing could read them. Directories have Size -1. A FIFO,
// device or socket is listed (with its size, 0), though it reads as
// absent.
func (f *File) List(ctx context.Context, prefix string) (entries []Entry, err error) {
	defer func() { f.count(0, err) }()
	dir := f.root
	if prefix != "" {
		p, err := f.path(ctx, prefix)
		if err != nil {
			return nil, err
		}
		if _, err := f.resolve(p); err != nil {
			return nil, err
		}
		dir = p
	} else if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fileError("list", dir, err)
	}
	entries = make([]Entry, 0, len(des))
	for _, de := range des {
		if CheckKey(de.Name()) != nil {
			continue
		}
		fi, err := de.Info()
		refused := false
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			p := filepath.Join(dir, de.Name())
			if _, err = f.resolve(p); errors.Is(err, ErrPermission) {
				refused = true
			}
			if err == nil || refused {
				fi, err = os.Stat(p)
			}
		}
		if err != nil {
			continue
		}
		e := Entry{Name: de.Name(), IsDir: fi.IsDir(), Size: fi.Size()}
		if e.IsDir || refused {
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
		return "", fmt.Errorf("%s: %w", p, err)
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
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// checkRange refuses a negative offset or length, a caller's bug.
func checkRange(offset, length int64) error {
	if offset < 0 || length < 0 {
		return fmt.Errorf("invalid range: offset %d, length %d", offset, length)
	}
	return nil
}
