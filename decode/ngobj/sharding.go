package ngobj

import (
	"bytes"
	"encoding/json"
)

// ShardingGiven reports whether raw, the "sharding" member of a
// precomputed info (a volume's scale, a skeleton or mesh directory, an
// annotation's by_id or relationship index), asks for the sharded format:
// the one rule every reader of such a member follows.
//
// Neuroglancer's specification (skeletons.md, annotations.md, volume.md
// of src/datasource/precomputed) says: if specified, the member "must be
// a sharding specification"; if not specified, the unsharded
// representation is used. Absent and JSON null (what CloudVolume writes
// for an unsharded directory) are unsharded. Any other value, false
// included, is given, so that parsing it as a specification refuses it
// with a message naming the member ("sharding: want an object, got
// false") in every view and in `volfs info` alike.
func ShardingGiven(raw json.RawMessage) bool {
	v := bytes.TrimSpace(raw)
	return len(v) > 0 && string(v) != "null"
}
