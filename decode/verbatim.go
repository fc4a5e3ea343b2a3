package decode

// Verbatim reports whether the stored object of every chunk of a, when it
// holds exactly ChunkSize(c) bytes, is byte for byte the decoded chunk:
// the metadata names no codec and no filter that would change a byte (a
// Zarr v2 array without compressor and filters, a precomputed scale of
// encoding "raw"), the chunk is its own object (not part of a shard), and
// the decoded chunk has no header. It is proven from the metadata, so
// that a reader may be given the stored file itself (FUSE passthrough);
// the object's size must still be checked against ChunkSize(c), and its
// name must be ChunkKey(c) exactly, not a transport-encoded twin.
func (a *Array) Verbatim() bool {
	return a.verbatim && a.load == nil && a.header == nil && a.widen <= 1
}

// OwnObject reports whether every chunk of a is stored as its own object,
// at ChunkKey(c) or its transport-encoded twin, rather than inside a shard:
// then the identities of those objects and the recipe (Recipe) fix the
// decoded chunk.
func (a *Array) OwnObject() bool { return a.load == nil }
