package main

import (
	"fmt"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"512MiB", 512 << 20, false},
		{"2GiB", 2 << 30, false},
		{"2G", 2 << 30, false},
		{"1.5GiB", 3 << 29, false},
		{"100MB", 100e6, false},
		{"1048576", 1 << 20, false},
		{"0", 0, false},
		{"12 KiB", 12 << 10, false},
		{"lots", 0, true},
		{"-1MiB", 0, true},
		{"", 0, true},
	} {
		got, err := parseSize(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSplitFormat(t *testing.T) {
	for _, tc := range []struct {
		in, formats, rest string
	}{
		{"precomputed://https://h/a", "[precomputed]", "https://h/a"},
		{"precomputed:///data/a", "[precomputed]", "/data/a"},
		{"https://h/a", "[]", "https://h/a"},
		{"/data/a", "[]", "/data/a"},
		{"zarr://https://h/a", "[zarr3 zarr2]", "https://h/a"},
		{"zarr2://https://h/a", "[zarr2]", "https://h/a"},
		{"zarr3:///data", "[zarr3]", "/data"},
		{"n5:///data", "[n5]", "/data"},
	} {
		f, r, err := splitFormat(tc.in)
		if fmt.Sprint(f) != tc.formats || r != tc.rest || err != nil {
			t.Errorf("splitFormat(%q) = %v, %q, %v; want %s, %q", tc.in, f, r, err, tc.formats, tc.rest)
		}
	}
}
