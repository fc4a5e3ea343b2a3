// Package disk keeps objects in files under a directory, bounded in bytes,
// across restarts: the on-disk cache of decoded chunks (--cache-dir),
// each kept zstd-compressed whatever its source codec.
//
// # The directory
//
// The directory given (--cache-dir, which may be a home directory or
// /var/tmp) is not the cache's: the cache keeps its files in a directory
// of its own inside it, "volfs-UID" (UID the process's effective user),
// which it creates with mode 0700. As OpenSSH reads the directories of its
// keys (secure_path), the cache refuses that directory when it is a
// symbolic link, belongs to another user, or can be written by group or
// others; it opens it once and does every later operation relative to that
// descriptor, so that renaming or replacing a path component afterwards
// changes nothing. Nothing outside it is read, written or deleted.
//
// Inside, a key is one file (a plain entry's data file beside it: see
// PutPlain), named by the SHA-256 of the key under a
// two-hex-digit subdirectory (so no key can leave the directory, and no
// directory grows past a few thousand entries), beside a file "secret" of
// 32 random bytes (mode 0600) made at the first Open. Entries and
// subdirectories are opened without following symbolic links (O_NOFOLLOW),
// entries without blocking (O_NONBLOCK), and used only when they are
// regular files (subdirectories: directories of the user, not writable by
// group or others) of the size their header states, which must fit what
// the caller expects: a FIFO, a device, a link to /dev/zero or a huge
// sparse file at an entry's name is a miss, read no further.
//
// # Files
//
// A file is an envelope (cache/envelope) of magic "VDC3", signed with the
// secret: a header stating every length, the key, the identity and the
// payload, under a checksum and an HMAC-SHA256 of the header, key,
// identity and the payload's CRC-32C. Files of earlier versions ("VDC2",
// whose header was shorter) are misses, deleted as corrupt.
//
// The identity is the caller's description of what the payload was made
// from (for volfs, the identity of each source object read: fetcher.Identity).
// Get hands it to the caller's check before the payload is used, so that an
// entry made from another version of the source is dropped (ErrStale).
// The MAC covers the key and the identity with the payload: a file copied
// from another key's name, or written by anyone who does not hold the
// secret (a well-formed entry planted by hand), is refused as corrupt,
// like a damaged one. The payload enters the MAC through its CRC-32C, which
// catches damage at 16-19 GB/s where HMAC-SHA256 runs at 1.4 (checking a
// 1 MiB entry takes 0.07 ms instead of 0.74, in a raw hit of 0.32:
// BenchmarkEntryCheck, BenchmarkDiskHit): forging a payload with the same
// CRC needs the genuine entry, and whoever can read entries in a directory
// of mode 0700 can read the secret too.
//
// A file is written to a temporary name ("tmp-PID-RANDOM") in the same
// directory and renamed into place, so a reader sees a whole file or none,
// and a crash leaves at most a temporary file, deleted at a later Open once
// the process PID names is gone. Files are not synced: after a power loss a
// renamed file may hold garbage, which the MAC catches. A file whose MAC,
// length, form or key does not match is corrupt: Get deletes it and reports
// a miss, so the caller fetches the object again.
//
// # Bounds and order
//
// The cache holds at most MaxBytes of files, evicting the least recently
// used. Access order is kept in memory and in each file's modification
// time (a hit sets it to now), so that Open rebuilds the order from the
// directory after a restart.
//
// Hold changes the rule for a process that fills the cache to keep what
// it wrote (`volfs warm`): from the call on, an entry written or read is
// held, and a Put that could make room only by evicting a held entry
// fails with ErrFull instead, so that a fill larger than the cache keeps
// its first MaxBytes and says which entries did not fit, rather than
// evicting its own earlier entries in a loop and reporting them kept.
//
// # Re-encoding
//
// PutCompressed stores the payload compressed with zstd (level 1 unless
// Options.Level says otherwise), for callers that keep a slow-to-decode chunk (gzip, jpeg) in
// decoded form: reading and decompressing it is several times faster than
// decoding the original (BenchmarkDiskHit). PutPlain keeps them as they
// are in a data file of their own beside the entry, which OpenPlain hands
// out for the kernel to read (FUSE passthrough; see "Plain entries" in
// plain.go). Get returns the bytes given to Put, PutCompressed or PutPlain
// either way.
//
// All methods are safe for concurrent use, also by several processes of
// one user on one directory as far as atomic renames go (each process
// keeps its own byte count). Linux only.
package disk

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/volfs/volfs/cache/envelope"
)

const (
	magic      = "VDC3"
	headerSize = envelope.HeaderSize
	fileSuffix = ".vdc"
	tempPrefix = "tmp-"
	secretName = "secret"
	secretSize = 32

	formStored = envelope.FormStored
	formZstd   = envelope.FormZstd
	formBeside = envelope.FormBeside

	maxKey   = envelope.MaxKey
	maxIdent = envelope.MaxIdent
)

// ErrStale is what a Get check returns (wrapped or not) for an entry made
// from something that has changed since: Get then deletes the entry.
var ErrStale = errors.New("disk: entry made from another version of its source")

// ErrUnsafeDir is wrapped by Open's error when the cache's directory is not
// safe to use: a symbolic link, another user's, or writable by others.
var ErrUnsafeDir = errors.New("disk: unsafe cache directory")

// ErrFull is returned by a Put that, after Hold, could make room only by
// evicting entries held (see "Bounds and order").
var ErrFull = errors.New("disk: the cache is full of entries this process keeps (raise --disk-cache-size)")

// Options configures a Cache.
type Options struct {
	// Dir holds the cache's own directory, "volfs-UID"; it is created if
	// missing.
	Dir string
	// MaxBytes bounds the bytes of files held. It must be positive.
	MaxBytes int64
	// Level is the zstd level of PutCompressed, as the zstd tool numbers
	// them; zero means 1. klauspost's level 1 stores a block raw when
	// entropy coding alone would save little, which is the case of noisy
	// image data (BenchmarkDiskHit): level 3 compresses it, at a slower
	// write and the same read speed.
	Level int
	// Log receives the warnings of files refused and writes failed (see
	// "What a Cache logs"); nil means slog.Default().
	Log *slog.Logger
}

// Stats counts what a Cache did since Open.
type Stats struct {
	Hits, Misses, Puts, Evictions int64
	// Corrupt counts files found damaged, forged or of the wrong type, and
	// deleted.
	Corrupt int64
	// Stale counts entries whose check said ErrStale, deleted.
	Stale int64
	// Errors counts writes and deletions that failed.
	Errors int64
	// Bytes and Files are held now.
	Bytes, Files int64
}

// Cache is an on-disk cache of objects.
type Cache struct {
	dir     string // the cache's own directory, for messages
	fd      int    // open descriptor of dir: every file operation is relative to it
	secret  []byte // the key of the entries' MACs
	max     int64
	encoder *zstd.Encoder // EncodeAll is safe for concurrent use
	log     *slog.Logger
	warned  warnings

	// LOCK ORDERING: mu is never held during file I/O except the
	// deletions of evicted files' names, which are quick.
	mu    sync.Mutex
	order *list.List               // GUARDED_BY(mu); of *item, most recent at the front
	items map[string]*list.Element // GUARDED_BY(mu); by file name
	used  int64                    // GUARDED_BY(mu)
	stats Stats                    // GUARDED_BY(mu)
	// seq numbers the writes and hits; holdFrom, once Hold was called,
	// is the first one held (0: nothing is held).
	seq, holdFrom uint64 // GUARDED_BY(mu)
}

type item struct {
	name string // relative path of the file: "ab/cdef....vdc"
	size int64  // of the file, and of its data file when plain
	seq  uint64 // the write or hit that last touched it
	// plain says the entry's bytes are in a data file beside it
	// (PutPlain); verified is the data file last checked whole by this
	// process (OpenPlain), zero when none.
	plain    bool
	verified fileID
	// compressed says this process read or wrote the entry and it was
	// not plain.
	compressed bool
}

// Hold makes every entry written or read from now on held: a Put that
// could make room only by evicting one fails with ErrFull (see "Bounds
// and order"). Calls after the first do nothing.
func (c *Cache) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holdFrom == 0 {
		c.holdFrom = c.seq + 1
	}
}

// held reports whether it is held.
//
// REQUIRES: c.mu held.
func (c *Cache) held(it *item) bool { return c.holdFrom != 0 && it.seq >= c.holdFrom }

// touch gives it the next sequence number.
//
// REQUIRES: c.mu held.
func (c *Cache) touch(it *item) {
	c.seq++
	it.seq = c.seq
}

// roomFor reports whether extra more bytes fit once the entries that are
// not held are evicted, the least recently used first (held entries are
// the most recent, at the front of the order).
//
// REQUIRES: c.mu held.
func (c *Cache) roomFor(extra int64) bool {
	need := c.used + extra - c.max
	for el := c.order.Back(); need > 0 && el != nil; el = el.Prev() {
		it := el.Value.(*item)
		if c.held(it) {
			return false
		}
		need -= it.size
	}
	return need <= 0
}

// Open returns the cache in its own directory under opts.Dir (see the
// package documentation), creating it, or refusing it with an error
// wrapping ErrUnsafeDir; it rebuilds the index and access order from the
// files there and deletes the temporary files of processes that are gone.
// Files beyond MaxBytes are evicted, oldest first. The Cache holds one
// descriptor until Close.
func Open(opts Options) (*Cache, error) {
	if opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("disk: cache size %d: must be positive", opts.MaxBytes)
	}
	level := opts.Level
	if level == 0 {
		level = 1
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("disk: zstd level %d: %w", level, err)
	}
	dir, fd, err := openOwnDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cache{dir: dir, fd: fd, max: opts.MaxBytes, encoder: enc, log: logger(opts.Log), order: list.New(), items: make(map[string]*list.Element)}
	if c.secret, err = c.loadSecret(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := c.scan(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

// Dir returns the directory that holds the cache's files.
func (c *Cache) Dir() string { return c.dir }

// Close releases the directory's descriptor. The Cache must not be used
// after.
func (c *Cache) Close() error { return unix.Close(c.fd) }

var errNotAcceptable = errors.New("not a regular file of the expected size")

// Get returns the size bytes stored for key when check accepts the
// identity stored with them, and false otherwise. A file that is not a
// regular file of a length that size allows, or whose MAC, key or payload
// is wrong, is deleted and counted as corrupt without its payload being
// used; an entry check refuses with ErrStale is deleted and counted as
// stale; any other error of check is a miss that leaves the entry.
func (c *Cache) Get(key string, size int64, check func(ident []byte) error) ([]byte, bool) {
	return c.get(key, size, size, check)
}

// get is Get of an entry of size bytes, or with size -1 of any size up
// to bound (GetUpTo).
func (c *Cache) get(key string, size, bound int64, check func(ident []byte) error) ([]byte, bool) {
	name := fileName(key)
	// One descriptor of the subdirectory serves the read and the touch.
	sfd, err := unix.Openat(c.fd, name[:2], unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(sfd)
	}
	var ident, payload []byte
	var form byte
	if err == nil {
		ident, payload, form, err = c.read(sfd, name, key, bound)
	}
	if err == nil {
		if err = check(ident); errors.Is(err, ErrStale) {
			c.remove(name, func(s *Stats) { s.Stale++ })
			return nil, false
		}
	}
	var data []byte
	var beside int64 // the data file's bytes, when the entry has one
	if err == nil && form == formBeside {
		data, err = c.readBeside(sfd, name, payload, size, bound)
		beside = int64(len(data))
	} else if err == nil {
		data, err = unpack(form, payload, size, bound)
	}
	switch {
	case err == nil:
	case errors.Is(err, errCorrupt):
		c.remove(name, func(s *Stats) { s.Corrupt++ })
		c.refused(name, err)
		return nil, false
	default:
		c.miss(name, err)
		return nil, false
	}
	c.hit(sfd, name, int64(headerSize+len(key)+len(ident))+int64(len(payload))+beside, form == formBeside, nil)
	return data, true
}

// errCorrupt is wrapped by the errors of read and unpack for files that
// must go.
var errCorrupt = errors.New("disk: corrupt cache file")

// read opens the entry name of key in its subdirectory sfd without
// following links or blocking, checks its type and length before reading
// it, and returns its identity and stored payload once its MAC and key
// check out.
func (c *Cache) read(sfd int, name, key string, size int64) (ident, payload []byte, form byte, err error) {
	max := envelope.MaxLen(key, size)
	raw, err := readFileAt(sfd, name[3:], max, func(*unix.Stat_t) bool { return true })
	switch {
	case err == unix.ELOOP || err == errNotAcceptable:
		return nil, nil, 0, fmt.Errorf("%w: %s: %v", errCorrupt, name, err)
	case err != nil:
		return nil, nil, 0, err
	}
	return parse(c.secret, key, size, raw)
}

// parse checks a file against key and the payload's size (at most
// size), and returns its identity, payload and form.
func parse(secret []byte, key string, size int64, raw []byte) (ident, payload []byte, form byte, err error) {
	ident, payload, form, err = envelope.Open(magic, secret, key, size, raw)
	if err != nil {
		// A file not signed with this cache's secret is as corrupt as a
		// damaged one: only this user's processes write here.
		return nil, nil, 0, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return ident, payload, form, nil
}

// unpack returns the size bytes that payload of form holds (with size -1,
// however many it holds, up to bound).
func unpack(form byte, payload []byte, size, bound int64) ([]byte, error) {
	var out []byte
	var err error
	if size < 0 {
		out, err = envelope.DecodeUpTo(form, payload, bound)
	} else {
		out, err = envelope.Decode(form, payload, size)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return out, nil
}

// remove deletes the entry name, forgets it and counts it with count.
func (c *Cache) remove(name string, count func(*Stats)) {
	c.unlink(name, dataName(name))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Misses++
	count(&c.stats)
	if el, ok := c.items[name]; ok {
		c.drop(el)
	}
}

// Put stores data for key, made from what ident identifies, replacing what
// was there. The file appears whole or not at all. An error means the data
// is not cached; the caller may go on without it.
func (c *Cache) Put(key string, ident, data []byte) error {
	return c.put(key, ident, data, formStored)
}

// PutCompressed stores data for key compressed with zstd at Options.Level;
// Get returns data as given.
func (c *Cache) PutCompressed(key string, ident, data []byte) error {
	return c.put(key, ident, c.encoder.EncodeAll(data, make([]byte, 0, len(data)/2)), formZstd)
}

func (c *Cache) put(key string, ident, payload []byte, form byte) error {
	return c.putBeside(key, ident, payload, form, nil)
}

// putBeside is put of an entry whose payload describes data (form
// formBeside: payload nil, made once data is written to its data file),
// or of one without (data nil).
func (c *Cache) putBeside(key string, ident, payload []byte, form byte, data []byte) error {
	if len(key) > maxKey || len(ident) > maxIdent {
		return fmt.Errorf("disk: key of %d bytes or identity of %d is too long", len(key), len(ident))
	}
	plain := form == formBeside
	size := int64(headerSize+len(key)+len(ident)+len(payload)) + int64(len(data))
	if plain {
		size += besideSize
	}
	if size > c.max {
		return fmt.Errorf("disk: %s: %d bytes do not fit in a cache of %d", key, size, c.max)
	}

	name := fileName(key)
	if !c.fits(name, size) {
		return fmt.Errorf("disk: %s: %w", key, ErrFull)
	}
	var written fileID
	var err error
	if plain {
		written, err = c.writeData(name, data)
		payload = envelope.Describe(data, note(written))
	}
	if err == nil {
		hdr := envelope.Header(magic, c.secret, key, ident, form, payload)
		err = c.write(name, hdr[:], []byte(key), ident, payload)
	}
	if err == nil && !plain {
		c.unlink(dataName(name)) // of an earlier entry that had one
	}
	if err != nil {
		if written != (fileID{}) {
			// The data file is in place and its entry is not: it would
			// hold its room, counted nowhere, until the next Open, and an
			// earlier entry of the name no longer matches it.
			c.unlink(name, dataName(name))
		}
		c.mu.Lock()
		c.stats.Errors++
		if el, ok := c.items[name]; ok && written != (fileID{}) {
			c.drop(el)
		}
		c.mu.Unlock()
		err = fmt.Errorf("disk: writing %s: %w", key, err)
		c.writeFailed(err)
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[name]; !ok && c.holdFrom != 0 && !c.roomFor(size) {
		// Another Put took the room meanwhile.
		c.unlink(name, dataName(name))
		return fmt.Errorf("disk: %s: %w", key, ErrFull)
	}
	c.stats.Puts++
	if el, ok := c.items[name]; ok {
		it := el.Value.(*item)
		c.used += size - it.size
		it.size, it.plain, it.verified, it.compressed = size, plain, written, !plain
		c.touch(it)
		c.order.MoveToFront(el)
	} else {
		it := &item{name: name, size: size, plain: plain, verified: written, compressed: !plain}
		c.touch(it)
		c.items[name] = c.order.PushFront(it)
		c.used += size
	}
	c.evict()
	return nil
}

// fits reports whether an entry of size bytes named name may be written:
// always, unless Hold was called and room for a new entry could be made
// only by evicting held ones.
func (c *Cache) fits(name string, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[name]; ok || c.holdFrom == 0 {
		return true
	}
	return c.roomFor(size)
}

// write writes the parts to a temporary file in name's subdirectory and
// renames it to name.
func (c *Cache) write(name string, parts ...[]byte) error {
	sub := name[:2]
	if err := unix.Mkdirat(c.fd, sub, 0o700); err != nil && err != unix.EEXIST {
		return err
	}
	sfd, err := openDirAt(c.fd, sub, filepath.Join(c.dir, sub))
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	tmp, err := c.writeTemp(sfd, parts...)
	if err != nil {
		return err
	}
	// The access order starts at the write, to the nanosecond: the
	// kernel's own mtime ticks too coarsely to order quick puts.
	ns := time.Now().UnixNano()
	err = unix.UtimesNanoAt(sfd, tmp, []unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		err = unix.Renameat(sfd, tmp, sfd, name[3:])
	}
	if err != nil {
		unix.Unlinkat(sfd, tmp, 0)
	}
	return err
}

// writeTemp writes the parts to a new temporary file of the directory
// dirfd, only its owner can read, and returns its name.
func (c *Cache) writeTemp(dirfd int, parts ...[]byte) (string, error) {
	tmp := tempName()
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), tmp)
	for _, p := range parts {
		if err == nil {
			_, err = f.Write(p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0)
		return "", err
	}
	return tmp, nil
}

// evict deletes the least recently used files until the bound holds.
//
// REQUIRES: c.mu held.
func (c *Cache) evict() {
	for c.used > c.max {
		el := c.order.Back()
		if el == nil {
			return
		}
		it := el.Value.(*item)
		sfd, err := unix.Openat(c.fd, it.name[:2], unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Unlinkat(sfd, it.name[3:], 0)
			if it.plain {
				unix.Unlinkat(sfd, dataName(it.name)[3:], 0)
			}
			unix.Close(sfd)
		}
		if err != nil && err != unix.ENOENT {
			c.stats.Errors++
		}
		c.drop(el)
		c.stats.Evictions++
	}
}

// drop forgets a file.
//
// REQUIRES: c.mu held.
func (c *Cache) drop(el *list.Element) {
	it := el.Value.(*item)
	c.order.Remove(el)
	delete(c.items, it.name)
	c.used -= it.size
}

// Stats returns the counters and what is held now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Files = c.used, int64(len(c.items))
	return s
}
