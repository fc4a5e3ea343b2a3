package disk

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// GetUpTo is Get of an entry whose size the caller does not know: it
// returns the bytes stored for key, at most bound of them, when check
// accepts the identity stored with them. An entry larger than bound is a
// miss, deleted as Get deletes an entry of another size. It serves small
// objects of unknown size, such as the metadata and listings a tree keeps
// for an origin that cannot be reached (fetcher/keep: "Kept answers").
func (c *Cache) GetUpTo(key string, bound int64, check func(ident []byte) error) ([]byte, bool) {
	if bound < 0 {
		return nil, false
	}
	return c.get(key, -1, bound, check)
}

// unpackAny returns the bytes that payload of form holds, refusing more
// than bound.
func unpackAny(form byte, payload []byte, bound int64) ([]byte, error) {
	switch form {
	case formStored:
		if int64(len(payload)) > bound {
			return nil, fmt.Errorf("%w: %d bytes, at most %d wanted", errCorrupt, len(payload), bound)
		}
		return payload, nil
	case formZstd:
		// The frame states its size unless it is tiny; the MAC vouches
		// that it is the cache's own.
		var h zstd.Header
		if err := h.Decode(payload); err != nil || h.HasFCS && h.FrameContentSize > uint64(bound) {
			return nil, fmt.Errorf("%w: zstd frame over %d bytes", errCorrupt, bound)
		}
		out, err := decoder.DecodeAll(payload, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		if int64(len(out)) > bound || h.HasFCS && uint64(len(out)) != h.FrameContentSize {
			return nil, fmt.Errorf("%w: %d bytes decompressed, at most %d wanted", errCorrupt, len(out), bound)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: form %d", errCorrupt, form)
}
