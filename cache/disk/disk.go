// Package disk keeps objects in files under a directory, bounded in bytes,
// across restarts: the on-disk cache of encoded chunks (--cache-dir).
//
// # Files
//
// Each key is one file, named by the SHA-256 of the key under a
// two-hex-digit subdirectory (so no key can leave the directory, and no
// directory grows past a few thousand entries). A file is a header and a
// payload:
//
//	offset size
//	0      4    magic "VDC1"
//	4      1    payload form: 0 stored as given, 1 zstd-compressed by Put
//	5      3    zero
//	8      8    payload length, little-endian
//	16     4    CRC-32C of the key, then the payload, little-endian
//	20     2    key length, little-endian
//	22     n    the key
//	22+n        the payload
//
// A file is written to a temporary name in the same directory and renamed
// into place, so a reader sees a whole file or none, and a crash leaves at
// most a temporary file, deleted at the next start. Files are not synced:
// after a power loss a renamed file may hold garbage, which the checksum
// catches. A file whose checksum,
// length or key does not match is corrupt: Get deletes it and reports a
// miss, so the caller fetches the object again.
//
// # Bounds and order
//
// The cache holds at most MaxBytes of files, evicting the least recently
// used. Access order is kept in memory and in each file's modification
// time (a hit sets it to now), so that Open rebuilds the order from the
// directory after a restart.
//
// # Re-encoding
//
// PutCompressed stores the payload compressed with zstd (level 1 unless
// Options.Level says otherwise), for callers that keep a slow-to-decode chunk (gzip, jpeg) in
// decoded form: reading and decompressing it is several times faster than
// decoding the original (BenchmarkDiskHit). Get returns the bytes given to
// Put or PutCompressed either way.
//
// All methods are safe for concurrent use, also by several processes on
// one directory as far as atomic renames go (each process keeps its own
// byte count).
package disk

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	magic      = "VDC1"
	headerSize = 22
	fileSuffix = ".vdc"
	tempSuffix = ".tmp"

	formStored = 0
	formZstd   = 1

	// maxDecoded bounds the output buffer sized from a zstd frame header.
	maxDecoded = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// The shared decoder: DecodeAll is safe for concurrent use.
var decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))

// Options configures a Cache.
type Options struct {
	// Dir holds the files; it is created if missing.
	Dir string
	// MaxBytes bounds the bytes of files held. It must be positive.
	MaxBytes int64
	// Level is the zstd level of PutCompressed, as the zstd tool numbers
	// them; zero means 1. klauspost's level 1 stores a block raw when
	// entropy coding alone would save little, which is the case of noisy
	// image data (BenchmarkDiskHit): level 3 compresses it, at a slower
	// write and the same read speed.
	Level int
}

// Stats counts what a Cache did since Open.
type Stats struct {
	Hits, Misses, Puts, Evictions int64
	// Corrupt counts files found damaged and deleted.
	Corrupt int64
	// Errors counts writes and deletions that failed.
	Errors int64
	// Bytes and Files are held now.
	Bytes, Files int64
}

// Cache is an on-disk cache of objects.
type Cache struct {
	dir     string
	max     int64
	encoder *zstd.Encoder // EncodeAll is safe for concurrent use

	// LOCK ORDERING: mu is never held during file I/O except the
	// deletions of evicted files' names, which are quick.
	mu    sync.Mutex
	order *list.List               // GUARDED_BY(mu); of *item, most recent at the front
	items map[string]*list.Element // GUARDED_BY(mu); by file name
	used  int64                    // GUARDED_BY(mu)
	stats Stats                    // GUARDED_BY(mu)
}

type item struct {
	name string // relative path of the file
	size int64
}

// Open returns the cache in opts.Dir, rebuilding its index and access order
// from the files there and deleting temporary files left by a crash. Files
// beyond MaxBytes are evicted, oldest first.
func Open(opts Options) (*Cache, error) {
	if opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("disk: cache size %d: must be positive", opts.MaxBytes)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	level := opts.Level
	if level == 0 {
		level = 1
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("disk: zstd level %d: %w", level, err)
	}
	c := &Cache{dir: opts.Dir, max: opts.MaxBytes, encoder: enc, order: list.New(), items: make(map[string]*list.Element)}
	type found struct {
		item
		mtime time.Time
	}
	var files []found
	err = filepath.WalkDir(opts.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		name, err := filepath.Rel(opts.Dir, path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(name, tempSuffix):
			os.Remove(path)
		case strings.HasSuffix(name, fileSuffix):
			info, err := d.Info()
			if err != nil {
				return nil // deleted meanwhile
			}
			files = append(files, found{item{name, info.Size()}, info.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("disk: reading %s: %w", opts.Dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mtime.After(files[j].mtime) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		c.items[f.name] = c.order.PushBack(&item{f.name, f.size})
		c.used += f.size
	}
	c.evict()
	return c, nil
}

// fileName returns the relative file name of key.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(h[:2], h[2:]+fileSuffix)
}

// Get returns the bytes stored for key, and false if there are none or the
// file is corrupt (it is then deleted and counted).
func (c *Cache) Get(key string) ([]byte, bool) {
	name := fileName(key)
	path := filepath.Join(c.dir, name)
	raw, err := os.ReadFile(path)
	if err != nil {
		c.mu.Lock()
		c.stats.Misses++
		if el, ok := c.items[name]; ok {
			// Deleted behind our back (or by another process).
			c.drop(el)
		}
		c.mu.Unlock()
		return nil, false
	}
	data, err := parse(key, raw)
	if err != nil {
		os.Remove(path)
		c.mu.Lock()
		c.stats.Misses++
		c.stats.Corrupt++
		if el, ok := c.items[name]; ok {
			c.drop(el)
		}
		c.mu.Unlock()
		return nil, false
	}
	now := time.Now()
	os.Chtimes(path, now, now) // the access order that outlives the process
	c.mu.Lock()
	c.stats.Hits++
	if el, ok := c.items[name]; ok {
		c.order.MoveToFront(el)
	} else {
		// Written by another process sharing the directory.
		c.items[name] = c.order.PushFront(&item{name, int64(len(raw))})
		c.used += int64(len(raw))
		c.evict()
	}
	c.mu.Unlock()
	return data, true
}

// ErrCorrupt is wrapped by parse's errors.
var ErrCorrupt = errors.New("disk: corrupt cache file")

// parse checks a file's header and checksum and returns its payload,
// decompressed if Put compressed it.
func parse(key string, raw []byte) ([]byte, error) {
	if len(raw) < headerSize || string(raw[:4]) != magic {
		return nil, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	form := raw[4]
	n := binary.LittleEndian.Uint64(raw[8:])
	sum := binary.LittleEndian.Uint32(raw[16:])
	klen := int(binary.LittleEndian.Uint16(raw[20:]))
	if len(raw) < headerSize+klen || uint64(len(raw)-headerSize-klen) != n {
		return nil, fmt.Errorf("%w: length", ErrCorrupt)
	}
	k, payload := raw[headerSize:headerSize+klen], raw[headerSize+klen:]
	if crc32.Update(crc32.Checksum(k, crcTable), crcTable, payload) != sum {
		return nil, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	if string(k) != key {
		// A SHA-256 collision, or a file copied by hand: not this key's.
		return nil, fmt.Errorf("%w: key", ErrCorrupt)
	}
	switch form {
	case formStored:
		return payload, nil
	case formZstd:
		// Size the output from the frame header, so that DecodeAll
		// does not grow it step by step; the header is covered by the
		// checksum, and PutCompressed always records the size.
		var h zstd.Header
		var dst []byte
		if h.Decode(payload) == nil && h.HasFCS && h.FrameContentSize <= maxDecoded {
			dst = make([]byte, 0, h.FrameContentSize)
		}
		out, err := decoder.DecodeAll(payload, dst)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: form %d", ErrCorrupt, form)
}

// Put stores data for key, replacing what was there. The file appears
// whole or not at all. An error means the data is not cached; the caller
// may go on without it.
func (c *Cache) Put(key string, data []byte) error { return c.put(key, data, formStored) }

// PutCompressed stores data for key compressed with zstd at Options.Level;
// Get returns data as given.
func (c *Cache) PutCompressed(key string, data []byte) error {
	return c.put(key, c.encoder.EncodeAll(data, make([]byte, 0, len(data)/2)), formZstd)
}

func (c *Cache) put(key string, payload []byte, form byte) error {
	if len(key) > 1<<16-1 {
		return fmt.Errorf("disk: key of %d bytes is too long", len(key))
	}
	size := int64(headerSize + len(key) + len(payload))
	if size > c.max {
		return fmt.Errorf("disk: %s: %d bytes do not fit in a cache of %d", key, size, c.max)
	}
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	hdr[4] = form
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(hdr[16:], crc32.Update(crc32.Checksum([]byte(key), crcTable), crcTable, payload))
	binary.LittleEndian.PutUint16(hdr[20:], uint16(len(key)))

	name := fileName(key)
	path := filepath.Join(c.dir, name)
	if err := c.write(path, hdr[:], []byte(key), payload); err != nil {
		c.mu.Lock()
		c.stats.Errors++
		c.mu.Unlock()
		return fmt.Errorf("disk: writing %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Puts++
	if el, ok := c.items[name]; ok {
		it := el.Value.(*item)
		c.used += size - it.size
		it.size = size
		c.order.MoveToFront(el)
	} else {
		c.items[name] = c.order.PushFront(&item{name, size})
		c.used += size
	}
	c.evict()
	return nil
}

// write writes the parts to a temporary file beside path and renames it
// into place.
func (c *Cache) write(path string, parts ...[]byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "*"+tempSuffix)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err == nil {
			_, err = f.Write(p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The access order starts at the write, to the nanosecond: the
		// kernel's own mtime ticks too coarsely to order quick puts.
		now := time.Now()
		err = os.Chtimes(f.Name(), now, now)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
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
		if err := os.Remove(filepath.Join(c.dir, it.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
