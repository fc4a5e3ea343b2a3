// Package fs is the mounted tree of volfs: how a source's objects become
// directories, how a stored chunk becomes a file of decoded voxels, and how
// go-fuse serves both.
//
// # The tree
//
// A Tree is built on a fetcher.Fetcher. It is plain Go, independent of FUSE:
// `volfs cat` and the in-process tests walk it directly, and the FUSE adapter
// (Mount) is a thin layer of go-fuse nodes over it. A tree has three kinds of
// directory:
//
//   - a source directory shows the objects under a prefix as they are
//     (pass-through), from the source's listing;
//   - a volume directory is a directory that holds a volume's metadata file
//     (precomputed "info"). It shows the metadata rewritten for the
//     uncompressed layout under the metadata's own name, the original under
//     that name plus ".orig" (e.g. "info.orig"), one array directory per
//     array (a precomputed scale), and every other object as it is;
//   - an array directory lists every chunk key of the array's grid,
//     computed from the metadata without touching the source: a grid of a
//     million chunks costs nothing until a name is looked up or listed, and
//     the listing is generated as it is read.
//
// # How a chunk becomes a file
//
// A chunk file's size is the chunk's decoded size, known from the metadata,
// so stat never fetches. A read maps its byte range to the chunk and asks the
// cache (package cache) for the decoded bytes; on a miss exactly one load
// runs, shared by every reader of that chunk: fetch the object (or its ".gz"
// sibling), remove any transport gzip, decode, check the size, insert. The
// read then copies out of (or, under FUSE, hands go-fuse a slice of) the
// cached bytes, which are never modified.
//
// Chunks live in one cache.Store per tree: a byte-bounded cache in
// memory plus one pool of Options.Workers loaders shared by batches and
// prefetches, so that a single read loads inline and a read-ahead never
// starts more loads than the pool has workers. With Options.Disk, a load
// first looks in the disk cache, and keeps what it loaded from the origin
// there (Tree.loader says in which form and why).
//
// # Read-ahead and file handles
//
// A chunk file's open returns a handle; the first read through it is the
// reading process's touch of that chunk, which drives read-ahead across
// chunk files (readahead.go explains the order followed and the caps).
// Read-ahead state belongs to the process, not to the handle, because
// programs open one handle per chunk file.
//
// # Inode numbers
//
// Every node has a stable inode number (inoTable): st_ino does not change
// when the kernel forgets a node and looks it up again, and concurrent
// lookups of one name share one go-fuse inode.
//
// A chunk the source does not have reads as the fill value (zeros) at its
// full size, as zarr and tensorstore do; with Options.Missing set to
// MissingError it is ENOENT instead, reported by open.
//
// # Errors
//
// Every failure reaches the kernel through one function, errno: not found
// is ENOENT, a cancelled request EINTR, anything else EIO with one log line
// that names the path and the cause (the object, its source and why). A
// corrupt chunk is an EIO for that chunk only: the error is not cached, its
// neighbours read normally, and the mount stays up. A panic in a handler is
// logged and becomes EIO.
//
// # Cancellation
//
// A reader interrupted by a signal makes the kernel interrupt its request;
// go-fuse cancels the request's context, the read returns EINTR at once,
// and the chunk's load is cancelled if no other reader waits for it. Reads
// that the kernel makes for its own read-ahead (most reads of a file through
// the page cache) belong to no process: they run to the end, bounded by the
// fetcher's retries and stall timeout.
//
// # Caching and the kernel
//
// Data under a source is treated as immutable: files are opened with
// FOPEN_KEEP_CACHE so the page cache survives close, entries and attributes
// are cached for an hour, and negative lookups for ten minutes.
//
// # Deadlocks
//
// The process that serves a mount must never read from it: a FUSE request
// that waits for the same server deadlocks. Tests read through
// subprocesses (cat, dd, python3).
package fs
