package codec

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// readFixture returns a file of the fixtures written by other
// implementations (testenv.Fixtures), failing the test when it is missing.
func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Fixtures(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBloscCompat decodes the buffers that c-blosc 1.3.0 to 1.18.0 wrote
// with every inner codec, byte shuffle and bitshuffle: each must be the
// int32 little-endian sequence 0..999999.
func TestBloscCompat(t *testing.T) {
	fixtures := testenv.Fixtures(t)
	files, err := filepath.Glob(filepath.Join(fixtures, "blosc-compat", "*.cdata"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no blosc-compat fixtures in %s: %v", fixtures, err)
	}
	decode := mustCodec(t, "blosc")
	const n = 1000000
	want := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(want[4*i:], uint32(i))
	}
	var out []byte
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Reuse the output as a caller would, to check that a dirty buffer
		// is fully overwritten.
		out, err = decode(out, src, len(want))
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if i := firstDiff(out, want); i >= 0 {
			t.Errorf("%s: %d bytes, first difference at byte %d", filepath.Base(f), len(out), i)
		}
		if _, err := decode(nil, src, len(want)-1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a limit one byte short: %v, want ErrCorrupt", filepath.Base(f), err)
		}
		for _, cut := range []int{len(src) - 1, len(src) / 2, 17} {
			if _, err := decode(nil, src[:cut], len(want)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s cut to %d bytes: %v, want ErrCorrupt", filepath.Base(f), cut, err)
			}
		}
	}
}

// firstDiff returns the first index where a and b differ, or -1 when they
// are equal.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// bloscHeader builds a 16-byte blosc header.
func bloscHeader(version, flags, typesize byte, nbytes, blocksize, cbytes uint32) []byte {
	h := []byte{version, 1, flags, typesize}
	h = binary.LittleEndian.AppendUint32(h, nbytes)
	h = binary.LittleEndian.AppendUint32(h, blocksize)
	return binary.LittleEndian.AppendUint32(h, cbytes)
}

// TestBloscHeaders: what the header claims is checked before anything is
// allocated, and options volfs does not implement are refused by name.
func TestBloscHeaders(t *testing.T) {
	memcpyed := append(bloscHeader(2, bloscMemcpyed, 1, 5, 5, 21), "hello"...)
	for _, tc := range []struct {
		name  string
		src   []byte
		limit int
		want  error  // nil: decodes to "hello"
		names string // in the error
	}{
		{"memcpyed", memcpyed, 5, nil, ""},
		{"memcpyed shuffled is not unshuffled", append(bloscHeader(2, bloscMemcpyed|bloscShuffle, 4, 5, 5, 21), "hello"...), 5, nil, ""},
		{"memcpyed with trailing bytes", append(append([]byte{}, memcpyed...), "xyz"...), 5, nil, ""},
		{"bomb", bloscHeader(2, 0, 1, 1<<31-1, 1<<16, 16), 4096, ErrCorrupt, "more than"},
		{"bomb memcpyed", bloscHeader(2, bloscMemcpyed, 1, 1<<31-1, 1<<16, 16), 4096, ErrCorrupt, ""},
		{"negative nbytes", bloscHeader(2, 0, 1, 1<<31, 1<<16, 16), 4096, ErrCorrupt, ""},
		{"memcpyed short", bloscHeader(2, bloscMemcpyed, 1, 5, 5, 16), 5, ErrCorrupt, ""},
		{"cbytes past the end", bloscHeader(2, bloscMemcpyed, 1, 5, 5, 99), 5, ErrCorrupt, ""},
		{"too many blocks", bloscHeader(2, 0, 1, 4096, 1, 16), 4096, ErrCorrupt, "offsets"},
		{"zero blocksize", append(bloscHeader(2, 0, 1, 5, 0, 20), 0, 0, 0, 0), 5, ErrCorrupt, ""},
		{"short", memcpyed[:15], 5, ErrCorrupt, ""},
		{"blosc2", bloscHeader(3, bloscMemcpyed, 1, 5, 5, 21), 5, ErrUnsupported, "blosc2"},
		{"blosc2 extended header", bloscHeader(2, bloscShuffle|bloscBitshuffle, 1, 5, 5, 21), 5, ErrUnsupported, "blosc2"},
		{"inner codec 5", append(bloscHeader(2, 5<<5, 1, 5, 5, 20), 0, 0, 0, 0), 5, ErrUnsupported, "inner codec 5"},
	} {
		got, err := decodeBlosc(nil, tc.src, tc.limit)
		if tc.want == nil {
			if err != nil || string(got) != "hello" {
				t.Errorf("%s: got %q, %v; want hello", tc.name, got, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%s: got %v, want %v naming %q", tc.name, err, tc.want, tc.names)
		}
	}
}

// TestBloscAllocation: a header that claims 2 GiB against a 4 KiB limit
// fails before allocating the output.
func TestBloscAllocation(t *testing.T) {
	src := bloscHeader(2, 0, 1, 1<<31-1, 1<<16, 16)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := decodeBlosc(nil, src, 4096); err == nil {
			t.Fatal("no error")
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("10 refusals allocated %d bytes", n)
	}
}
