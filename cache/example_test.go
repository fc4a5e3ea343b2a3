package cache_test

import (
	"context"
	"fmt"

	"github.com/volfs/volfs/cache"
)

// Example_handle shows how a file handle reads chunk files through the
// store with read-ahead: each first touch of a chunk goes to Store.GetHit
// and to the handle's Tracker, whose advice becomes a Store.Prefetch under
// a context the handle cancels on a jump, on close, or when idle.
func Example_handle() {
	store := cache.NewStore(cache.Options{MaxBytes: 512 << 20, Workers: 2})
	defer store.Close()
	budget := cache.NewBudget(256 << 20) // one per mount: --read-ahead's global cap

	// The chunk keys of one array in the order the reader follows (grid
	// order here; the lexical order of names works the same way).
	keys := []string{"a/0-64", "a/64-128", "a/128-192", "a/192-256", "a/256-320"}
	loadFor := func(i int) cache.Loader {
		return func(ctx context.Context) ([]byte, error) {
			return make([]byte, 1<<20), nil // fetch and decode keys[i]
		}
	}
	tracker := cache.NewTracker(cache.TrackerConfig{
		Len: int64(len(keys)), ChunkBytes: 1 << 20, MaxBytes: 64 << 20, Budget: budget,
	})
	pctx, cancel := context.WithCancel(context.Background())
	read := func(ctx context.Context, pos int) ([]byte, error) {
		val, hit, err := store.GetHit(ctx, keys[pos], loadFor(pos))
		adv := tracker.Touch(int64(pos), !hit)
		if adv.Cancel {
			cancel()
			pctx, cancel = context.WithCancel(context.Background())
		}
		if len(adv.Prefetch) > 0 {
			ahead := make([]string, len(adv.Prefetch))
			for i, p := range adv.Prefetch {
				ahead[i] = keys[p]
			}
			store.Prefetch(pctx, ahead, func(i int) cache.Loader { return loadFor(int(adv.Prefetch[i])) })
		}
		return val, err
	}
	for pos := range keys {
		if _, err := read(context.Background(), pos); err != nil {
			fmt.Println(err)
		}
	}
	// On close (and from a time.AfterFunc(cache.IdleAfter) reset at each
	// read): release the budget and cancel what is still loading.
	tracker.Stop()
	cancel()
	// Views read many chunks at once: one batch, on the pool if it is big
	// enough, failing at the first error.
	res, err := store.GetBatch(context.Background(), keys, loadFor)
	fmt.Println(len(res), err)
	// Output: 5 <nil>
}
