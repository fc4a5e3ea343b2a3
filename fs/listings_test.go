package fs

import (
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestListBudget: listings past the budget are dropped, least recently
// used first, to be listed again; the one used last stays, even alone over
// the budget.
func TestListBudget(t *testing.T) {
	b := newListBudget(1000)
	keep := func(n int) *sourceDir {
		d := &sourceDir{}
		d.listing = &listFlight{entries: make([]fetcher.Entry, n)} // 96 bytes each
		b.keep(d, d.listing)
		return d
	}
	var dirs []*sourceDir
	for range 5 {
		dirs = append(dirs, keep(4))
	}
	b.touch(dirs[3])
	dirs = append(dirs, keep(4))
	var kept []int
	for i, d := range dirs {
		if d.listing != nil {
			kept = append(kept, i)
		}
	}
	if got, want := len(kept), 2; got != want || kept[0] != 3 || kept[1] != 5 {
		t.Errorf("listings kept: got %v, want [3 5] (the last used)", kept)
	}
	if b.bytes() > b.max {
		t.Errorf("bytes kept: got %d, want at most %d", b.bytes(), b.max)
	}
	big := keep(20)
	if big.listing == nil || dirs[5].listing != nil || b.bytes() != 20*96 {
		t.Errorf("a listing over the budget: kept %v, others %v, %d bytes; want it alone", big.listing != nil, dirs[5].listing != nil, b.bytes())
	}
}
