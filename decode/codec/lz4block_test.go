package codec

import "testing"

// TestXXH32 checks xxh32 against the reference implementation's vectors
// (xxHash's sanity checks and lz4-java's tests).
func TestXXH32(t *testing.T) {
	for _, c := range []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0x02cc5d05},
		{"a", 0, 0x550d7456},
		{"abc", 0, 0x32d153ff},
		{"Nobody inspects the spammish repetition", 0, 0xe2293b2f},
	} {
		if got := xxh32([]byte(c.in), c.seed); got != c.want {
			t.Errorf("xxh32(%q, %d) = %08x, want %08x", c.in, c.seed, got, c.want)
		}
	}
}
