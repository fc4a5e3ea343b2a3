// Package fuse serves a tree of package fs through go-fuse: the front end
// of `volfs mount`, beside package serve, the front end of `volfs serve`.
// Both sit on the tree's exported API (fs.Tree, fs.Dir, fs.File,
// fs.Handle) and neither knows the other. This package holds what only the
// kernel needs: go-fuse nodes over the tree's directories and files, inode
// numbers, the bound on the files the kernel keeps, the thread ids of the
// kernel's requests, the mount options and the checks of a mountpoint.
// The tree holds everything a read does.
//
// # A read
//
// A read(2) of a chunk file reaches fileInode.Read as a FUSE request. The
// file was opened as an fs.Handle for the calling process (fileInode.Open:
// the request names a thread, tgidCache finds its process), so the read
// goes to Handle.Read, which reads under the tree's read deadline, tells
// the read-ahead of the process on its first read, and returns the bytes
// of the chunk from the chunk store (loaded on a miss: the tiers, then the
// origin). They are handed to go-fuse without a copy. An error goes
// through fs.Tree.Errno; an EIO is remembered for the byte range
// (failedRange) so that the kernel's immediate re-read fails at once.
//
// # Inode numbers
//
// Every node has an inode number that no other node of the mount ever
// had (inoTable), so concurrent lookups of one name share one go-fuse
// inode and two files never do. A chunk file's number is fixed by its
// array's range and grid index (fs.GridChunk), so st_ino does not change
// when the kernel forgets it and looks it up again; other nodes keep
// theirs while among the most recently looked up (inode.go says how many).
// The kernel's hold on files is bounded too (live.go).
//
// # Cancellation
//
// A reader interrupted by a signal makes the kernel interrupt its request;
// go-fuse cancels the request's context, the read returns EINTR at once,
// and the chunk's load is cancelled if no other reader waits for it. Reads
// that the kernel makes for its own read-ahead (most reads of a file through
// the page cache) belong to no process: they run to the end, bounded by the
// fetcher's retries and stall timeout, and by --read-timeout.
//
// # Caching and the kernel
//
// Files are opened with FOPEN_KEEP_CACHE so the page cache survives close
// (or FOPEN_DIRECT_IO with MountOptions.DirectIO), except an open of a
// chunk file or view whose cached pages are of a version no longer
// current, which drops them, or, while a handle reads through them, gives
// the new version a kernel inode of its own (pages.go); entries and
// attributes are cached for an hour
// (bounded by fs.Options.MetadataTTL), negative lookups for ten minutes,
// and the kernel sends reads of up to 1 MiB. A panic in a handler is
// logged and becomes EIO.
//
// # Deadlocks
//
// The process that serves a mount must never read from it: a FUSE request
// that waits for the same server deadlocks. Mount refuses a mountpoint
// inside a local source and the reverse (CheckApart); tests read through
// subprocesses (cat, dd, python3).
package fuse
