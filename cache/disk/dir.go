package disk

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The cache's directory: how it is opened and checked (see "The
// directory" in the package doc), how its files are named, read and
// scanned at Open, and its secret.

// openOwnDir creates parent if needed, then the cache's own directory in
// it, and returns that directory's path and an open descriptor of it,
// checked as ownedDir says.
func openOwnDir(parent string) (string, int, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", -1, fmt.Errorf("disk: %w", err)
	}
	pfd, err := unix.Open(parent, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("disk: open %s: %w", parent, err)
	}
	defer unix.Close(pfd)
	name := "volfs-" + strconv.Itoa(os.Geteuid())
	dir := filepath.Join(parent, name)
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil && err != unix.EEXIST {
		return "", -1, fmt.Errorf("disk: mkdir %s: %w", dir, err)
	}
	fd, err := openDirAt(pfd, name, dir)
	if err != nil {
		return "", -1, err
	}
	return dir, fd, nil
}

// openDirAt opens the directory name in the directory dirfd without
// following a symbolic link, and checks it with ownedDir; path names it in
// errors.
func openDirAt(dirfd int, name, path string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	var st unix.Stat_t
	if err == unix.ENOTDIR && unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		err = unix.ELOOP
	}
	switch {
	case err == unix.ELOOP:
		return -1, fmt.Errorf("%w: %s is a symbolic link: refusing it; remove it, or choose another --cache-dir", ErrUnsafeDir, path)
	case err == unix.ENOTDIR:
		return -1, fmt.Errorf("%w: %s is not a directory: refusing it; remove it, or choose another --cache-dir", ErrUnsafeDir, path)
	case err != nil:
		return -1, fmt.Errorf("disk: open %s: %w", path, err)
	}
	if err := ownedDir(fd, path); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// ownedDir refuses the open directory fd unless the process's user owns it
// and neither its group nor others can write to it.
func ownedDir(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("disk: stat %s: %w", path, err)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%w: %s belongs to uid %d, not to this user (uid %d): refusing it, since its owner could plant entries; choose another --cache-dir",
			ErrUnsafeDir, path, st.Uid, uid)
	}
	if perm := st.Mode & 0o7777; perm&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by its group or by others (mode %04o): refusing it, as ssh refuses such a directory; run chmod 700 %s, or choose another --cache-dir",
			ErrUnsafeDir, path, perm, path)
	}
	return nil
}

// loadSecret returns the key of the entries' MACs, from the file secret,
// which it makes when missing (or when it is not a regular file of
// secretSize bytes only its owner can read): the first writer wins, and
// every process of the user that shares the directory reads the same one.
func (c *Cache) loadSecret() ([]byte, error) {
	path := filepath.Join(c.dir, secretName)
	for range 3 {
		b, err := readFileAt(c.fd, secretName, secretSize, func(st *unix.Stat_t) bool {
			return st.Size == secretSize && st.Uid == uint32(os.Geteuid()) && st.Mode&0o077 == 0
		})
		if err == nil {
			return b, nil
		}
		if err != unix.ENOENT {
			// Damaged or tampered with: replace it (its entries then fail
			// their MACs and go).
			if err := unix.Unlinkat(c.fd, secretName, 0); err != nil && err != unix.ENOENT {
				return nil, fmt.Errorf("disk: remove %s: %w", path, err)
			}
		}
		secret := make([]byte, secretSize)
		rand.Read(secret)
		tmp, err := c.writeTemp(c.fd, secret)
		if err != nil {
			return nil, fmt.Errorf("disk: write %s: %w", path, err)
		}
		err = unix.Linkat(c.fd, tmp, c.fd, secretName, 0)
		unix.Unlinkat(c.fd, tmp, 0)
		if err != nil && err != unix.EEXIST {
			return nil, fmt.Errorf("disk: write %s: %w", path, err)
		}
	}
	return nil, fmt.Errorf("disk: %s: cannot make a secret that reads back", path)
}

// readFileAt reads the file name of the directory dirfd, which must be a
// regular file (opened without following a link or blocking) that ok
// accepts, of at most max bytes. It returns unix.ENOENT when there is no
// such name, and another error when the file is not acceptable.
func readFileAt(dirfd int, name string, max int64, ok func(*unix.Stat_t) bool) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > max || !ok(&st) {
		return nil, errNotAcceptable
	}
	b := make([]byte, st.Size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// scan indexes the entries under the cache's directory, oldest access
// first evicted beyond the bound, and deletes the temporary files that
// processes now gone left behind. It looks only at names the cache makes:
// anything else is left as it is.
func (c *Cache) scan() error {
	type found struct {
		item
		mtime time.Time
	}
	var files []found
	subs, err := readDirNames(c.fd)
	if err != nil {
		return fmt.Errorf("disk: reading %s: %w", c.dir, err)
	}
	for _, sub := range subs {
		if !isHex(sub, 2) {
			c.removeOrphan(c.fd, sub) // the secret's temporary file
			continue
		}
		sfd, err := openDirAt(c.fd, sub, filepath.Join(c.dir, sub))
		if err != nil {
			continue // not the cache's: never read
		}
		names, err := readDirNames(sfd)
		entries := map[string]int{} // index in files, by entry name
		data := map[string]int64{}  // sizes of data files, by their entry's name
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			switch {
			case strings.HasSuffix(name, fileSuffix) && isHex(strings.TrimSuffix(name, fileSuffix), 62):
				entries[name] = len(files)
				files = append(files, found{item{name: sub + "/" + name, size: st.Size}, time.Unix(st.Mtim.Unix())})
			case strings.HasSuffix(name, dataSuffix) && isHex(strings.TrimSuffix(name, dataSuffix), 62):
				data[strings.TrimSuffix(name, dataSuffix)+fileSuffix] = st.Size
			default:
				c.removeOrphan(sfd, name)
			}
		}
		// A data file counts with its entry (a plain one: see "Plain
		// entries"); one without an entry is what a crash between the
		// two renames of PutPlain left, or an eviction cut short.
		for name, size := range data {
			if i, ok := entries[name]; ok {
				files[i].size += size
				files[i].plain = true
			} else {
				unix.Unlinkat(sfd, strings.TrimSuffix(name, fileSuffix)+dataSuffix, 0)
			}
		}
		unix.Close(sfd)
		if err != nil {
			return fmt.Errorf("disk: reading %s: %w", filepath.Join(c.dir, sub), err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.After(files[j].mtime) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		c.items[f.name] = c.order.PushBack(&item{name: f.name, size: f.size, plain: f.plain})
		c.used += f.size
	}
	c.evict()
	return nil
}

// removeOrphan deletes name from the directory dirfd when it is a
// temporary file of the cache, of this user, whose process is gone.
func (c *Cache) removeOrphan(dirfd int, name string) {
	var st unix.Stat_t
	if !isOrphanTemp(name) || unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		return
	}
	unix.Unlinkat(dirfd, name, 0)
}

// readDirNames returns the names in the open directory dirfd.
func readDirNames(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// isHex reports whether s is n lowercase hexadecimal digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// tempName returns a new temporary file name of this process.
func tempName() string {
	var r [8]byte
	rand.Read(r[:])
	return tempPrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(r[:])
}

// isOrphanTemp reports whether name is a temporary file name of the cache
// whose process is gone.
func isOrphanTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	p, r, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	if !ok || err != nil || pid <= 0 || !isHex(r, 16) {
		return false
	}
	return unix.Kill(pid, 0) == unix.ESRCH
}

// fileName returns the relative file name of key.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return h[:2] + "/" + h[2:] + fileSuffix
}
