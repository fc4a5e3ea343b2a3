package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
)

// ErrNoBacking is wrapped by Backing's refusals of a file whose bytes do
// not sit complete in a file of the source: the reader is served as
// before, through the tree.
var ErrNoBacking = errors.New("no backing file")

// Backing returns an open file whose bytes are, exactly, the bytes of f as
// the tree shows them, for a reader to read without the tree (FUSE
// passthrough); the caller closes it. Only a chunk of a local source whose
// array stores its chunks verbatim (decode.Array.Verbatim: no codec, no
// filter, no shard, proven from the metadata) has one, and only when the
// object at the chunk's own key is a regular file under the root
// (fetcher.File.Open) of exactly the chunk's decoded size, checked with
// fstat on the open descriptor. Everything else (views,
// derived files, remote sources, a missing chunk, a chunk stored under a
// transport-encoded twin, a size that differs: a corrupt chunk the tree
// reports as EIO) is refused with an error wrapping ErrNoBacking, or the
// source's error.
//
// The descriptor pins the file it opened: a source file replaced by a
// rename while it is open goes on serving the old file's bytes whole (and,
// since the kernel backs an inode by one file at a time, so do opens made
// while it is registered); a
// file rewritten in place is not something a local source may do while
// mounted (docs/RELIABILITY.md).
func (t *Tree) Backing(ctx context.Context, f File) (*os.File, error) {
	c, ok := f.(*chunkFile)
	if !ok || !c.a.Verbatim() {
		return nil, fmt.Errorf("fs: %w: not a verbatim chunk", ErrNoBacking)
	}
	src, ok := t.src.(*fetcher.File)
	if !ok {
		return nil, fmt.Errorf("fs: %w: not a local source", ErrNoBacking)
	}
	if err := t.checkMeta(ctx, c.a); err != nil {
		return nil, fmt.Errorf("fs: %w: %w", ErrNoBacking, err)
	}
	fh, _, err := src.Open(ctx, c.key)
	if err != nil {
		return nil, err
	}
	fi, err := fh.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Size() != c.size) {
		err = fmt.Errorf("fs: %s: %w: %d bytes stored, %d decoded", c.key, ErrNoBacking, fi.Size(), c.size)
	}
	if err != nil {
		fh.Close()
		return nil, err
	}
	t.pass.source.Add(1)
	return fh, nil
}

// DiskBacking returns the data file of the plain entry that the disk cache
// (Options.Disk) keeps for the chunk f (cache.Disk.KeepPlain,
// disk.Cache.OpenPlain), open, for a reader to read without the tree
// (FUSE passthrough); the caller closes it. The entry is served only as
// a read of the tree would serve it: of the chunk's decoded size, its
// identity record accepted by the tier's check against the source
// (identities.check, the read's time bound), and its bytes checked whole
// against the entry's CRC-32C once per process and data file (else by the
// file's identity). Anything else (views, derived files, a chunk with no
// entry, or one kept compressed) is refused with an error wrapping
// ErrNoBacking; a stale or corrupt entry is deleted on the way.
//
// The descriptor pins the data file it opened: the cache never writes one
// in place, so an entry evicted or replaced while it is open (unlinked,
// or another file renamed over its name) goes on serving the version this
// call checked, whole.
func (t *Tree) DiskBacking(ctx context.Context, f File) (*os.File, error) {
	c, ok := f.(*chunkFile)
	if !ok {
		return nil, fmt.Errorf("fs: %w: not a chunk", ErrNoBacking)
	}
	d := t.opts.Disk
	if d == nil {
		return nil, fmt.Errorf("fs: %w: no disk cache", ErrNoBacking)
	}
	rctx, cancel := t.readContext(ctx)
	defer cancel()
	if err := t.checkMeta(rctx, c.a); err != nil {
		return nil, fmt.Errorf("fs: %w: %w", ErrNoBacking, err)
	}
	fh, ok := d.OpenPlain(t.tierKey(c.a, c.key), c.size, func(ident []byte) error {
		return t.ids.check(rctx, ident, cache.TrustOwn)
	})
	if !ok {
		return nil, fmt.Errorf("fs: %s: %w: no plain entry in the disk cache", c.key, ErrNoBacking)
	}
	t.pass.disk.Add(1)
	return fh, nil
}

// passStats counts the reads the tree answered and the backing files it
// handed out: with passthrough, a file read by the kernel from its backing
// file costs no read at all. Safe for concurrent use.
type passStats struct {
	reads, source, disk atomic.Int64
	// chunkParts counts the windows of ranged parts opened for large
	// verbatim chunks (chunkparts.go).
	chunkParts atomic.Int64
}

var (
	readsDesc      = prometheus.NewDesc("volfs_file_reads_total", "Reads of files the tree answered (FUSE read requests): a file passed through is read by the kernel without any.", nil, nil)
	chunkPartsDesc = prometheus.NewDesc("volfs_chunk_windows_total", "Large verbatim chunks of a remote source opened to be read in ranged parts, many in flight, rather than loaded whole: one per chunk and version.", nil, nil)
	backingDesc    = prometheus.NewDesc("volfs_passthrough_backing_total", "Backing files handed to FUSE passthrough at an open, by where the bytes are read from: a verbatim local source file, or the data file of a disk cache entry.", []string{"from"}, nil)
)

// Describe implements prometheus.Collector.
func (s *passStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- readsDesc
	ch <- backingDesc
	ch <- chunkPartsDesc
}

// Collect implements prometheus.Collector.
func (s *passStats) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(readsDesc, prometheus.CounterValue, float64(s.reads.Load()))
	ch <- prometheus.MustNewConstMetric(backingDesc, prometheus.CounterValue, float64(s.source.Load()), "source")
	ch <- prometheus.MustNewConstMetric(backingDesc, prometheus.CounterValue, float64(s.disk.Load()), "disk")
	ch <- prometheus.MustNewConstMetric(chunkPartsDesc, prometheus.CounterValue, float64(s.chunkParts.Load()))
}
