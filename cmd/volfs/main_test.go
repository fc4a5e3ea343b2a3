package main

import "testing"

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
		in, format, rest string
		err              bool
	}{
		{"precomputed://https://h/a", "precomputed", "https://h/a", false},
		{"precomputed:///data/a", "precomputed", "/data/a", false},
		{"https://h/a", "", "https://h/a", false},
		{"/data/a", "", "/data/a", false},
		{"zarr://https://h/a", "", "", true},
		{"n5:///data", "", "", true},
	} {
		f, r, err := splitFormat(tc.in)
		if f != tc.format || r != tc.rest || (err != nil) != tc.err {
			t.Errorf("splitFormat(%q) = %q, %q, %v; want %q, %q, error %v", tc.in, f, r, err, tc.format, tc.rest, tc.err)
		}
	}
}
