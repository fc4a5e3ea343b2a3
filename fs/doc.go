// Package fs is the tree core of volfs: how a source's objects become
// directories, how a stored chunk becomes a file of decoded voxels, and how
// a read of one reaches the chunk store. Its two front ends sit beside each
// other on its exported API and know nothing of each other: package fs/fuse
// (the go-fuse adapter, `volfs mount`) and package serve (HTTP and WebDAV,
// `volfs serve`). fs imports neither, nor go-fuse, nor a tier of the chunk
// store: the tiers reach it as cache.Tier values in Options.
//
// # The tree
//
// A Tree is built on a fetcher.Fetcher. It is plain Go: `volfs cat` and the
// in-process tests walk it directly (Tree.Resolve, Dir.Lookup, Dir.List,
// File.ReadAt), and the front ends open its files as Handles (Tree.OpenAs)
// and read through them. A tree has three kinds of directory:
//
//   - a source directory shows the objects under a prefix as they are
//     (pass-through), from the source's listing;
//   - a volume directory holds the metadata file of a format registered in
//     package decode (precomputed "info", Zarr ".zarray" or "zarr.json",
//     N5 "attributes.json", a consolidated ".zmetadata"). It shows the
//     metadata rewritten for the uncompressed layout under its own name,
//     the original under that name plus ".orig" (e.g. "info.orig"), its
//     arrays, and every other object as it is. A precomputed layer has one
//     array directory per scale; a Zarr array or N5 dataset is the volume
//     directory itself, so its chunk keys sit beside its metadata. Metadata
//     of another format in the same directory is shown rewritten when it
//     describes the same chunks, and otherwise only under its ".orig" name
//     (Tree.openDir): no metadata file describes bytes the mount does not
//     serve;
//   - a key directory is a level of an array's chunk-key tree: the scale
//     directory of precomputed, or a nested directory of zarr "/" and N5
//     keys ("c/0/1" fixes the first coordinates). It lists the names below
//     it, computed from the metadata without touching the source: a grid of
//     a million chunks costs nothing until a name is looked up or listed,
//     and the listing is generated as it is read.
//
// Which directories are volumes is found by probing only the metadata
// names the formats register, and, when the source can list, only those
// the directory's listing holds: probing a directory of chunks costs no
// request. Concurrent lookups in one directory share one listing (a
// flight), so a dead server costs one retry budget, not one per lookup.
//
// # How a chunk becomes a file
//
// A chunk file's size is the chunk's decoded size, known from the metadata,
// so stat never fetches. A read maps its byte range to the chunk and asks the
// cache (package cache) for the decoded bytes; on a miss exactly one load
// runs, shared by every reader of that chunk: decode.Array.Load reads the
// chunk through a decode.Source (the object, or its ".gz" sibling when the
// plain one does not exist, with transport gzip removed; ranged reads and
// memoised indexes for a chunk inside a precomputed or Zarr v3 shard),
// decodes it and checks its size, and the result is inserted. The read
// then copies out of (or, under FUSE, hands go-fuse a slice of) the cached
// bytes, which are never modified.
//
// Chunks live in one cache.Store per tree: a byte-bounded cache in
// memory plus one pool of Options.Workers loaders shared by batches and
// prefetches, so that a single read loads inline and a read-ahead never
// starts more loads than the pool has workers. Below memory the store
// walks its tiers (Options.Disk, then Options.Tiers) before the origin,
// and keeps what it loaded from the origin in them (cache's "Tiers"; the
// tree supplies only the origin load, Tree.loader), with the identities of
// the source objects it was made from, checked before an entry is served
// (identity.go says what is re-checked and when). Every kept chunk is
// named with its array's recipe fingerprint (decode.Array.Recipe) besides
// its key, in memory and below, so metadata edited between mounts never
// serves a chunk decoded under the old metadata (during a mount, with
// Options.MetadataTTL, an array whose metadata now decodes its chunks
// otherwise refuses their loads: metawatch.go); and a load
// reads each object from one version, loading again (or answering ESTALE)
// when it meets two (Tree.load). docs/CONSISTENCY.md gives the rules.
//
// # Handles and read-ahead
//
// A front end opens a file as a Handle for a Reader: the process (or HTTP
// client) and thread that read, which only the front end can name. Every
// read of a front end goes through its handle (Handle.Read, which hands
// out the cached bytes without a copy, or Handle.ReadAt): under the read
// deadline (Options.ReadTimeout, deadline.go), and the first read of a
// chunk file's handle is its reader's touch of that chunk, which drives
// read-ahead across chunk files (readahead.go explains the order followed
// and the caps); every read of a view moves its reader's window along the
// view (viewahead.go). Read-ahead state belongs to the reader, not to the
// handle, because programs open one handle per chunk file.
//
// A chunk the source does not have (or that its shard lacks) reads as the
// array's fill value at its full size, as zarr and tensorstore do; with
// Options.Missing set to MissingError it is ENOENT instead, reported by
// open.
//
// # Views
//
// Every array of two or more axes of a sample type the views write also
// shows its stitched views (package fs/view): volume.tif, volume.raw,
// volume.nhdr, volume.mhd, sections/ and, from three axes, slabs/. They
// sit in the array's directory: a precomputed scale's key directory, or
// for a zarr array or an N5 dataset the volume directory itself, beside the
// metadata and the chunk keys (a view's name wins over a source object of
// that name; an array whose chunk keys would take a view's name has no
// views, with a warning). The views see axes fastest first, x then y then
// z: zarr's metadata order is reversed (decode.Array.XLast). Sizes come
// from the metadata, so stat and listing never fetch.
//
// A read of a view maps its byte range to the chunks under it and asks the
// tree for them as one batch (Tree.chunks): every chunk goes through the
// same cache and load as a chunk file, at most batchLoads at a time, and
// the first failure cancels the rest of the batch. A missing chunk reads
// as the fill value whatever Options.Missing says, and a corrupt one fails
// exactly the reads that need it, with an EIO that names the object.
//
// # Errors
//
// Every failure reaches a front end's caller through one function,
// Tree.Errno (errno.go): not found is ENOENT, a refusal EACCES, a request
// cancelled by its caller EINTR, an object that changed twice under one
// load ESTALE (logged), anything else EIO with one log line that
// names the path and the cause (the object, its source and why), at most
// one per path every few seconds. serve maps the errno to an HTTP status,
// so both front ends agree. A corrupt chunk is an EIO for that chunk
// only: the error is not cached, its neighbours read normally, and the
// mount stays up.
//
// # Cancellation
//
// A read's context is its caller's: the FUSE adapter's is cancelled when
// the kernel interrupts the request, serve's when the client goes. The
// read then returns at once, and the chunk's load is cancelled if no
// other reader waits for it.
package fs
