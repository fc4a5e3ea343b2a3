// Package cache holds decoded chunks in memory, bounded in bytes,
// deduplicates concurrent loads of the same chunk, and runs those loads:
// inline on the reader's goroutine or on one shared pool of workers (Store),
// ahead of the reader when it reads in order (Tracker, in readahead.go).
//
// # Flights
//
// At most one load per key runs at a time; every concurrent reader of that
// key waits for the same load (a flight). The load runs under a context
// detached from any one reader: a reader whose context ends stops waiting,
// and the load is cancelled only when the last waiter has left (tailscale's
// singleflight.DoChanContext). A cancelled flight leaves the table at once,
// so a reader who comes later starts a fresh load instead of joining one
// that is dying.
//
// A flight runs on whichever goroutine claims it first: the reader that
// made it (inline), a pool worker (Store.GetBatch, Store.Prefetch), or a
// reader who finds a queued prefetch of the key not yet started. A reader
// running a load inline whose context ends while other readers still wait
// finishes that load for them before it returns ctx.Err(); when it was the
// only waiter, the load's context is cancelled and it returns at once.
//
// # Bounds
//
// The cache holds at most MaxBytes of values (their capacity, plus a fixed
// cost per entry), evicting the least recently used. A value larger than
// the whole budget is returned to its waiters but not kept.
//
// Values that only a prefetch asked for live in a probation segment of at
// most ProbationBytes until a reader reads them, which promotes them to the
// main segment. Probation's share is its own: a prefetched value that fits
// in it evicts the least recently read values, but read values are never
// pushed below MaxBytes-ProbationBytes, so read-ahead cannot flush more of
// the working set than that share; past the share, a prefetched value
// evicts only older prefetched values. (Protecting every read value
// instead made a streaming reader over more than MaxBytes lose each
// prefetch to the next one before reading it, decoding chunks twice.) A
// read value evicts read values first, and prefetched ones only when
// nothing else is left.
//
// # The store
//
// Store puts a Cache in front of one shared pool of Options.Workers
// persistent workers, fed by two buffered queues: demand loads (batches) and
// prefetches. Workers always take a queued demand load first. A single chunk
// loads on the reader's goroutine; a batch with fewer than BatchInline loads
// to run does too, one after another, because below that a worker's handoff
// costs more than it gains (BenchmarkGate); bigger batches go to the pool,
// and the first error of a batch returns at once. Nothing on this path
// sleeps or polls: waits are on channels.
//
// Below memory, a load made by Store.Loader walks the store's tiers (the
// disk cache, a fleet's shared cache: Options.Tiers) before the origin,
// promotes what a lower tier holds and writes what the origin gave behind
// the reader (tier.go, "Tiers"). A prefetch's load takes a CPU slot
// (Load.CPU) for the part of its work bound by CPU.
//
// # Read-ahead
//
// Programs read chunk files one after another (`cat scale/*`, `cp -r`, a
// Python loop over chunk names), and the kernel's own read-ahead never
// crosses into the next file. A Tracker watches one reader of one array and
// says which chunks to load before they are asked for, so that the next
// chunk is fetched and decoded while the current one is copied out.
//
// The caller tells it the first touch of each chunk by the reader, as a
// position in a sequence (an int64): the chunk's linear index in grid order,
// or the index of its name in the lexical order of the directory, whichever
// order the caller follows. The tracker does no I/O and knows no keys; it
// answers with positions to prefetch and, at times, "cancel what you
// prefetched for me".
//
// A touch one position away from the last (either way) starts a run and
// fixes its direction. While the run holds, the tracker keeps a window of
// positions ahead of the reader loaded or loading:
//
//   - The window opens at readAheadInitial (one chunk) on the first sequential
//     step. Opening on the first touch would make every random reader pay
//     for a prefetch it never reads.
//   - It doubles at each touch for which the reader had to wait (the chunk
//     was not in memory yet): the prefetcher is not far enough ahead. When
//     the reader finds its chunks loaded, the window stays as it is; it is
//     big enough. This is mountpoint-s3's rule (grow while the reader
//     catches up with the prefetcher) with a chunk as the unit.
//   - It is capped per reader at TrackerConfig.MaxBytes (the --read-ahead
//     flag) and globally by a Budget shared by all trackers: the bytes
//     prefetched but not yet read. A prefetch that does not fit in the
//     budget is not issued; the reader's own reads still go on, so an
//     exhausted budget slows read-ahead down, never a reader.
//   - A touch ahead of the reader but within the window (a skipped chunk,
//     or requests that arrive out of order from a multi-threaded reader)
//     keeps the run; a touch one position behind the last is ignored for
//     the same reason (readAheadBackTolerance, one chunk). Anything else is a jump:
//     the window collapses to nothing, the tracker advises to cancel the
//     prefetches it issued, and a new run must start before it prefetches
//     again. A random reader therefore costs at most one chunk of
//     prefetch per accidental adjacent pair.
//   - Stop (the file handle is closed, or the reader was idle for
//     IdleAfter) releases everything and advises to cancel.
//
// Prefetched positions the reader passes without touching are released
// from the budget as wasted. Budget accounting is by the caller's
// TrackerConfig.ChunkBytes per position (the largest chunk: edge chunks are
// smaller, and over-counting them only makes read-ahead more cautious).
//
// All methods are safe for concurrent use. Values are shared between callers
// and must not be modified.
package cache
