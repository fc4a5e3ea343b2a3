package keep

import (
	"slices"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestEntriesRoundTrip: a listing kept on disk reads back as it was; a
// damaged one is refused.
func TestEntriesRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []fetcher.Entry
	}{
		{"empty", nil},
		{"files and directories", []fetcher.Entry{{Name: "info", Size: 312}, {Name: "s0", IsDir: true, Size: -1}, {Name: "empty", Size: 0}}},
		{"long name", []fetcher.Entry{{Name: string(make([]byte, 300)), Size: 1 << 40}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := encodeEntries(tc.entries, 64<<20)
			if !ok {
				t.Fatal("not encoded")
			}
			got, ok := decodeEntries(b)
			if !ok || !slices.Equal(got, tc.entries) {
				t.Errorf("got %v, %v; want %v", got, ok, tc.entries)
			}
			if len(b) > 0 {
				if _, ok := decodeEntries(b[:len(b)-1]); ok && tc.entries[len(tc.entries)-1].Size+1 < 0x80 {
					t.Errorf("cut one byte short: accepted")
				}
			}
		})
	}
	for _, bad := range [][]byte{{5, 'a'}, {1, 'a'}, {1, 'a', 0}, {1, 'a', 0, 0xff}} {
		if e, ok := decodeEntries(bad); ok {
			t.Errorf("%v: accepted as %v", bad, e)
		}
	}
}
