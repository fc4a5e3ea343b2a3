package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// TestEntryCost: what a kept miss holds on the heap (its key, the LRU's
// element and map slot), measured over many, is no more than what the
// cache charges for it, so that a scan of a sparse volume stays within
// MaxBytes. A shared error (a sentinel) costs nothing per entry.
func TestEntryCost(t *testing.T) {
	missing := errors.New("cache: test: missing")
	for _, n := range []int{20000, 100000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := New(Options{MaxBytes: 1 << 40, KeepError: func(error) bool { return true }})
			load := func(context.Context) ([]byte, error) { return nil, missing }
			before := heapAfterGC()
			for i := range n {
				c.Get(context.Background(), fmt.Sprintf("s0/%d-%d_0-1_0-1", i, i+1), load)
			}
			held := heapAfterGC() - before
			runtime.KeepAlive(c)
			charged := c.Stats().Bytes
			t.Logf("%d misses: %d bytes of heap each, %d charged", n, held/int64(n), charged/int64(n))
			if held > charged {
				t.Errorf("%d misses hold %d bytes of heap, charged %d", n, held, charged)
			}
		})
	}
}

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
