package fs

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/volfs/volfs/fetcher"
)

// listBudget bounds the bytes of the source listings a tree keeps (its
// sourceDirs', for lookups): the least recently used are dropped past max,
// and listed again when next needed. The listing used last is kept even
// when it alone is over max. Safe for concurrent use.
//
// LOCK ORDERING: listBudget.mu is never held while a sourceDir's mu is
// taken.
type listBudget struct {
	max int64

	mu   sync.Mutex
	lru  *simplelru.LRU[*sourceDir, keptListing] // GUARDED_BY(mu)
	used int64                                   // GUARDED_BY(mu)
}

type keptListing struct {
	f    *listFlight
	cost int64
}

func newListBudget(max int64) *listBudget {
	lru, _ := simplelru.NewLRU[*sourceDir, keptListing](math.MaxInt, nil)
	return &listBudget{max: max, lru: lru}
}

// listingCost is what a listing holds: each entry (its name, the Entry and
// the byName map's slot).
func listingCost(entries []fetcher.Entry) int64 {
	n := int64(0)
	for _, e := range entries {
		n += int64(len(e.Name)) + 96
	}
	return n
}

// keep charges f, d's listing, and drops the listings least recently used
// until the rest fit.
func (b *listBudget) keep(d *sourceDir, f *listFlight) {
	cost := listingCost(f.entries)
	var drop []keptListing
	var dirs []*sourceDir
	b.mu.Lock()
	if old, ok := b.lru.Peek(d); ok {
		b.used -= old.cost
	}
	b.lru.Add(d, keptListing{f, cost})
	b.used += cost
	for b.used > b.max && b.lru.Len() > 1 {
		od, old, _ := b.lru.RemoveOldest()
		b.used -= old.cost
		drop, dirs = append(drop, old), append(dirs, od)
	}
	b.mu.Unlock()
	for i, od := range dirs {
		od.mu.Lock()
		if od.listing == drop[i].f {
			od.listing = nil
		}
		od.mu.Unlock()
	}
}

// touch marks d's listing used.
func (b *listBudget) touch(d *sourceDir) {
	b.mu.Lock()
	b.lru.Get(d)
	b.mu.Unlock()
}

// bytes returns the bytes charged.
func (b *listBudget) bytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
