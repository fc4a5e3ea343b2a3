package decode

import (
	"encoding/json"
	"testing"
)

// TestShardingGiven: absent and null are unsharded; false, and every
// other value, is given (and then refused unless a specification).
func TestShardingGiven(t *testing.T) {
	for raw, want := range map[string]bool{"": false, "null": false, " null ": false, "false": true, "{}": true, `{"@type": "neuroglancer_uint64_sharded_v1"}`: true} {
		if got := ShardingGiven(json.RawMessage(raw)); got != want {
			t.Errorf("ShardingGiven(%q) = %v, want %v", raw, got, want)
		}
	}
}
