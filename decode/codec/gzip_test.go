package codec

import (
	"encoding/base64"
	"errors"
	"testing"
)

// helloGzip is `printf hello | gzip -n`, written by GNU gzip, not by us.
const helloGzip = "H4sIAAAAAAAAA8tIzcnJBwCGphA2BQAAAA=="

func TestTransportGzip(t *testing.T) {
	for _, tc := range []struct {
		encoding, key string
		want          bool
		err           bool
	}{
		{"gzip", "s0/0-1_0-1_0-1", true, false},
		{"GZIP", "s0/0-1_0-1_0-1", true, false},
		{"x-gzip", "info", true, false},
		{"", "s0/0-1_0-1_0-1.gz", true, false},
		{"identity", "s0/0-1_0-1_0-1.gz", true, false},
		{"", "s0/0-1_0-1_0-1", false, false},
		{"br", "s0/0-1_0-1_0-1", false, true},
	} {
		got, err := TransportGzip(tc.encoding, tc.key)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("TransportGzip(%q, %q) = %v, %v; want %v, error %v", tc.encoding, tc.key, got, err, tc.want, tc.err)
		}
	}
}

func TestGunzip(t *testing.T) {
	z, _ := base64.StdEncoding.DecodeString(helloGzip)
	for _, want := range []int{0, 5, 100} {
		got, err := Gunzip(z, want, 5)
		if err != nil || string(got) != "hello" {
			t.Errorf("Gunzip(want %d): got %q %v, want hello", want, got, err)
		}
	}
	// Two members concatenated decode as one stream, as gzip(1) does.
	got, err := Gunzip(append(append([]byte{}, z...), z...), 10, 10)
	if err != nil || string(got) != "hellohello" {
		t.Errorf("two members: got %q %v", got, err)
	}
	for name, tc := range map[string]struct {
		src   []byte
		limit int
	}{
		"bomb":      {z, 4},
		"truncated": {z[:len(z)-6], 5},
		"not gzip":  {[]byte("hello world"), 100},
		"bad crc":   {append(append([]byte{}, z[:len(z)-8]...), 0, 0, 0, 0, 5, 0, 0, 0), 5},
		"empty":     {nil, 5},
	} {
		if got, err := Gunzip(tc.src, 5, tc.limit); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %q %v, want ErrCorrupt", name, got, err)
		}
	}
}

// FuzzGunzip: corrupt streams are errors wrapping ErrCorrupt, never panics,
// and output never exceeds the limit.
func FuzzGunzip(f *testing.F) {
	z, _ := base64.StdEncoding.DecodeString(helloGzip)
	f.Add(z, 5)
	f.Add(z[:10], 5)
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}, 100)
	f.Fuzz(func(t *testing.T, src []byte, limit int) {
		limit = max(0, min(limit, 1<<20))
		out, err := Gunzip(src, limit, limit)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		}
		if len(out) > limit {
			t.Fatalf("got %d bytes, limit %d", len(out), limit)
		}
	})
}
