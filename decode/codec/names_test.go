package codec

import "testing"

// TestName: each format's spellings map onto registered codecs, and a
// spelling a format does not have is refused.
func TestName(t *testing.T) {
	for _, tc := range []struct {
		d        Dialect
		spelling string
		want     string
		ok       bool
	}{
		{N5, "gzip", "gzip", true},
		{N5, "zlib", "zlib", true}, // gzip with "useZlib": true
		{N5, "bzip2", "bz2", true},
		{N5, "lz4", "n5.lz4", true},
		{N5, "xz", "xz", true},
		{N5, "lzf", "", false},
		{N5, "bz2", "", false}, // numcodecs' name, not N5's
		{Zarr3, "numcodecs.delta", "delta", true},
		{Zarr3, "gzip", "gzip", true},
		{Zarr3, "crc32c", "crc32c", true},
		{Numcodecs, "blosc", "blosc", true},
	} {
		got, ok := Name(tc.d, tc.spelling)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Name(%v, %q) = %q, %v; want %q, %v", tc.d, tc.spelling, got, ok, tc.want, tc.ok)
		}
	}
}

// TestNameTableRegistered: every codec the name table or the filter set
// names is registered, so a format never maps a spelling onto nothing.
func TestNameTableRegistered(t *testing.T) {
	var names []string
	for _, n := range n5Names {
		names = append(names, n)
	}
	for n := range filters {
		names = append(names, n)
		if !IsFilter(n) {
			t.Errorf("IsFilter(%q) = false", n)
		}
	}
	codecs.RLock()
	defer codecs.RUnlock()
	for _, n := range names {
		if _, ok := codecs.byName[n]; !ok {
			t.Errorf("%q is in the name table but not registered", n)
		}
	}
	for _, n := range []string{"gzip", "zstd", "blosc", "crc32c"} {
		if IsFilter(n) {
			t.Errorf("IsFilter(%q) = true for a bytes-to-bytes codec", n)
		}
	}
}
