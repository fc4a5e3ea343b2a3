package disk

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/volfs/volfs/cache/envelope"
)

// Plain entries
//
// PutPlain keeps an entry in two files: its bytes as they are, in a data
// file "ab/cdef....dat", and beside it the entry's usual file, an envelope
// whose payload (envelope.FormBeside) states the data file's length and
// CRC-32C under the entry's MAC. A data file holds nothing but the bytes,
// from offset 0, so that the kernel can read it in volfs's place (FUSE
// passthrough: OpenPlain hands out a descriptor of it). Both files count
// against MaxBytes, as one entry.
//
// A data file is written like every file, to a temporary name and renamed
// into place, and never written again: a later entry for the key is a new
// file renamed over it, and eviction unlinks it. A descriptor opened before
// either so goes on reading the bytes it was opened on, whole. The data
// file is renamed into place before the envelope that describes it; a
// reader that meets a data file that does not match its envelope (between
// the two renames of another process, or damage) takes the entry as
// corrupt, and a miss.
//
// OpenPlain checks a data file by its identity (device, inode, size,
// change time, by fstat of the descriptor it hands out): the envelope
// notes the identity of the file written, with the kernel's boot ID, and
// a file that still has it within the same boot is the file written. The
// change time moves with any write or rename of the inode, and no file of
// the cache is written in place. After a reboot (files are not synced: a
// power loss may leave a renamed file of garbage), or for a file of
// another identity, OpenPlain reads the file whole and compares its
// length and CRC-32C with the envelope's, once per process: it then
// remembers the identity checked. A file damaged by a disk's fault after
// its check is not seen before the next reboot or check: the trust the
// kernel's own page cache gets.

const dataSuffix = ".dat"

// dataName is the name of the data file beside the entry file name.
func dataName(name string) string { return strings.TrimSuffix(name, fileSuffix) + dataSuffix }

// fileID identifies one file, as written: a file replaced or written to
// has another.
type fileID struct {
	dev, ino    uint64
	size        int64
	ctime, csec int64
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctim.Nsec, csec: st.Ctim.Sec}
}

// PutPlain stores data for key, made from what ident identifies, as a
// plain entry (see "Plain entries"), replacing what was there. It is
// otherwise Put.
func (c *Cache) PutPlain(key string, ident, data []byte) error {
	return c.putBeside(key, ident, nil, formBeside, data)
}

// besideSize is the length of a plain entry's payload: the description
// of its data file (envelope.Describe) with the note of its identity.
const besideSize = 12 + noteSize

// noteSize is the length of note's note: the boot ID, then the device,
// inode, change time (seconds, nanoseconds), 8 bytes each.
const noteSize = 16 + 4*8

// note is the note of the data file id written during this boot of the
// kernel (bootID), as the entry's description keeps it.
func note(id fileID) []byte {
	b := append(make([]byte, 0, noteSize), bootID[:]...)
	for _, v := range []uint64{id.dev, id.ino, uint64(id.csec), uint64(id.ctime)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// bootID identifies this boot of the kernel (zero when it cannot be
// read: then no note matches, and every data file is checked whole).
var bootID = func() (id [16]byte) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id
	}
	h, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err == nil && len(h) == 16 {
		copy(id[:], h)
	}
	return id
}()

// Plain reports whether the entry of key, as this process last saw it, is
// plain (PutPlain); false when there is none.
func (c *Cache) Plain(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[fileName(key)]
	return ok && el.Value.(*item).plain
}

// OpenPlain returns the data file of the plain entry kept for key, open
// for reading, when it holds exactly size bytes and check accepts its
// identity, as Get would return them: the file's bytes are then the
// entry's, checked (see "Plain entries"). The caller closes it. It counts
// as a hit; an entry that is not plain, or none, is left as it is and
// counted by the Get that a caller falling back makes (Plain tells them
// apart), so that one read counts one miss; a corrupt or stale one is
// deleted as Get deletes it.
func (c *Cache) OpenPlain(key string, size int64, check func(ident []byte) error) (*os.File, bool) {
	name := fileName(key)
	c.mu.Lock()
	el, ok := c.items[name]
	known := ok && el.Value.(*item).compressed
	c.mu.Unlock()
	if known {
		// Kept compressed, as this process knows: not read twice.
		c.pass(name, nil)
		return nil, false
	}
	sfd, err := unix.Openat(c.fd, name[:2], unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.pass(name, err)
		return nil, false
	}
	defer unix.Close(sfd)
	ident, payload, form, err := c.read(sfd, name, key, size)
	if err == nil && form != formBeside {
		c.pass(name, nil)
		return nil, false
	}
	var n int64
	var sum uint32
	var noted []byte
	if err == nil {
		n, sum, noted, err = besideOf(payload, size, size)
	}
	if err == nil {
		if err = check(ident); errors.Is(err, ErrStale) {
			c.remove(name, func(s *Stats) { s.Stale++ })
			return nil, false
		}
	}
	var f *os.File
	var id fileID
	if err == nil {
		f, id, err = c.openData(sfd, name, n)
	}
	if err == nil && !bytes.Equal(noted, note(id)) && !c.verified(name, id) {
		err = checkData(f, n, sum)
	}
	switch {
	case err == nil:
	case errors.Is(err, errCorrupt):
		if f != nil {
			f.Close()
		}
		c.remove(name, func(s *Stats) { s.Corrupt++ })
		c.refused(name, err)
		return nil, false
	default:
		if f != nil {
			f.Close()
		}
		c.pass(name, err)
		return nil, false
	}
	c.hit(sfd, name, int64(headerSize+len(key)+len(ident)+len(payload))+n, true, func(it *item) { it.verified = id })
	return f, true
}

// hit counts a hit of the entry name, of size bytes (its data file's
// included) and plain when it has one, and moves it to the front of the
// access order, here and in its file's modification time (sfd is its
// subdirectory); with verify, it calls it under the lock with the entry's
// item.
func (c *Cache) hit(sfd int, name string, size int64, plain bool, verify func(*item)) {
	// The access order that outlives the process.
	now := unix.NsecToTimespec(time.Now().UnixNano())
	unix.UtimesNanoAt(sfd, name[3:], []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Hits++
	el, ok := c.items[name]
	if ok {
		c.order.MoveToFront(el)
		it := el.Value.(*item)
		c.touch(it)
		c.used += size - it.size
		it.size, it.plain, it.compressed = size, plain, !plain
	} else {
		// Written by another process sharing the directory.
		it := &item{name: name, size: size, plain: plain, compressed: !plain}
		c.touch(it)
		el = c.order.PushFront(it)
		c.items[name] = el
		c.used += size
	}
	if verify != nil {
		verify(el.Value.(*item))
	}
	c.evict()
}

// miss counts a miss of the entry name that err (if any) explains, and
// forgets the entry when its file is gone.
func (c *Cache) miss(name string, err error) {
	c.mu.Lock()
	c.stats.Misses++
	c.mu.Unlock()
	c.pass(name, err)
}

// pass forgets the entry name when err says its file is gone, counting
// nothing: OpenPlain's caller falls back to Get, which counts the read.
func (c *Cache) pass(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[name]; ok && errors.Is(err, unix.ENOENT) {
		// Deleted behind our back (or by another process).
		c.drop(el)
	}
}

// verified reports whether the data file of name, which is id, is the one
// this process last checked whole.
func (c *Cache) verified(name string, id fileID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[name]
	return ok && el.Value.(*item).verified == id
}

// besideOf returns the length and CRC-32C of the data file that payload
// describes, which must hold size bytes (with size -1, at most bound).
func besideOf(payload []byte, size, bound int64) (int64, uint32, []byte, error) {
	n, sum, noted, err := envelope.Beside(payload)
	if err == nil && (size >= 0 && n != size || n > bound) {
		err = fmt.Errorf("%d bytes beside, want %d", n, size)
	}
	if err != nil {
		return 0, 0, nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return n, sum, noted, nil
}

// openData opens the data file of name in its subdirectory sfd, without
// following a link or blocking, and returns it with its identity when it
// is a regular file of n bytes; a file of another kind or size is
// corrupt.
func (c *Cache) openData(sfd int, name string, n int64) (*os.File, fileID, error) {
	dn := dataName(name)
	fd, err := unix.Openat(sfd, dn[3:], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		// Described and gone: evicted, or never written whole.
		return nil, fileID{}, fmt.Errorf("%w: %s: no data file", errCorrupt, name)
	case err == unix.ELOOP:
		return nil, fileID{}, fmt.Errorf("%w: %s: %v", errCorrupt, dn, err)
	case err != nil:
		return nil, fileID{}, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(c.dir, dn))
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fileID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != n {
		f.Close()
		return nil, fileID{}, fmt.Errorf("%w: %s: %v", errCorrupt, dn, errNotAcceptable)
	}
	return f, idOf(&st), nil
}

// checkBuffers are the buffers checkData reads through.
var checkBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// checkData reads the n bytes of f and compares their CRC-32C with sum.
func checkData(f *os.File, n int64, sum uint32) error {
	bp := checkBuffers.Get().(*[]byte)
	defer checkBuffers.Put(bp)
	var crc uint32
	for off := int64(0); off < n; {
		k, err := f.ReadAt((*bp)[:min(int64(len(*bp)), n-off)], off)
		crc = envelope.CRC(crc, (*bp)[:k])
		off += int64(k)
		if err != nil && off < n {
			if err == io.EOF {
				err = fmt.Errorf("%w: %s: cut short", errCorrupt, f.Name())
			}
			return err
		}
	}
	if crc != sum {
		return fmt.Errorf("%w: %s: CRC-32C", errCorrupt, f.Name())
	}
	return nil
}

// readBeside returns the bytes of the data file of name (in sfd) that
// payload describes, checked against it.
func (c *Cache) readBeside(sfd int, name string, payload []byte, size, bound int64) ([]byte, error) {
	n, sum, _, err := besideOf(payload, size, bound)
	if err != nil {
		return nil, err
	}
	f, _, err := c.openData(sfd, name, n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errCorrupt, f.Name(), err)
	}
	if envelope.CRC(0, b) != sum {
		return nil, fmt.Errorf("%w: %s: CRC-32C", errCorrupt, f.Name())
	}
	return b, nil
}

// writeData writes data to the data file of name, through a temporary
// file renamed into place, and returns the identity of the file written.
func (c *Cache) writeData(name string, data []byte) (fileID, error) {
	sub := name[:2]
	if err := unix.Mkdirat(c.fd, sub, 0o700); err != nil && err != unix.EEXIST {
		return fileID{}, err
	}
	sfd, err := openDirAt(c.fd, sub, filepath.Join(c.dir, sub))
	if err != nil {
		return fileID{}, err
	}
	defer unix.Close(sfd)
	tmp := tempName()
	fd, err := unix.Openat(sfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fileID{}, err
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer f.Close()
	_, err = f.Write(data)
	if err == nil {
		ns := unix.NsecToTimespec(time.Now().UnixNano())
		err = unix.UtimesNanoAt(sfd, tmp, []unix.Timespec{ns, ns}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err == nil {
		err = unix.Renameat(sfd, tmp, sfd, dataName(name)[3:])
	}
	var st unix.Stat_t
	if err == nil {
		// After the rename, which changes the inode's change time.
		err = unix.Fstat(fd, &st)
	}
	if err != nil {
		unix.Unlinkat(sfd, tmp, 0)
		return fileID{}, err
	}
	return idOf(&st), nil
}

// unlink deletes the files names (relative paths, of one subdirectory),
// those that exist.
func (c *Cache) unlink(names ...string) {
	if sfd, err := unix.Openat(c.fd, names[0][:2], unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		for _, n := range names {
			unix.Unlinkat(sfd, n[3:], 0)
		}
		unix.Close(sfd)
	}
}
