package fs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// deadDir is a source whose root lists one directory, "dead", whose
// listing fails as a dead server's does once its retries run out. A
// listing of "dead" waits until every expected caller waits for it (see
// joinCtx), so that the test does not depend on timing.
type deadDir struct {
	lists  atomic.Int32
	joined chan struct{} // closed when every caller waits
}

var errDead = fmt.Errorf("dead server: %w", fetcher.ErrTransient)

func (s *deadDir) Get(context.Context, string, int64) (fetcher.Object, error) {
	return fetcher.Object{}, fetcher.ErrNotExist
}
func (s *deadDir) GetRange(context.Context, string, int64, int64) ([]byte, fetcher.Identity, error) {
	return nil, "", fetcher.ErrNotExist
}
func (s *deadDir) Stat(context.Context, string) (int64, fetcher.Identity, error) {
	return 0, "", fetcher.ErrNotExist
}
func (s *deadDir) String() string { return "dead://" }

func (s *deadDir) List(_ context.Context, prefix string) ([]fetcher.Entry, error) {
	if prefix == "" {
		return []fetcher.Entry{{Name: "dead", IsDir: true}}, nil
	}
	s.lists.Add(1)
	// The guard only ends a test that would otherwise hang: with a mutex
	// held across this call, the other callers never get to wait.
	select {
	case <-s.joined:
	case <-time.After(2 * time.Second):
	}
	return nil, errDead
}

// joinCtx counts the callers that wait on it: sourceDir.list selects on
// Done once, after it joined the listing's flight.
type joinCtx struct {
	context.Context
	n, want *atomic.Int32
	all     chan struct{}
}

func (c joinCtx) Done() <-chan struct{} {
	if c.n.Add(1) == c.want.Load() {
		close(c.all)
	}
	return c.Context.Done()
}

// TestConcurrentLookupsShareOneListing is the regression test of a review
// finding: listing a directory held a mutex across the network call, so N
// concurrent lookups in a dead server's directory ran N retry budgets one
// after another. They must share one listing and all get its error.
func TestConcurrentLookupsShareOneListing(t *testing.T) {
	const n = 8
	src := &deadDir{joined: make(chan struct{})}
	tree, err := New(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	dir := &sourceDir{t: tree, key: "dead"}
	var joined, want atomic.Int32
	want.Store(n)
	ctx := joinCtx{Context: context.Background(), n: &joined, want: &want, all: src.joined}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = dir.Lookup(ctx, fmt.Sprintf("f%d", i))
		})
	}
	wg.Wait()
	if got := src.lists.Load(); got != 1 {
		t.Errorf("listings of the dead directory: got %d, want 1", got)
	}
	for i, err := range errs {
		if !errors.Is(err, errDead) {
			t.Errorf("lookup %d: got %v, want %v", i, err, errDead)
		}
	}
	// A failed listing is not kept: the next lookup tries again.
	want.Store(-1)
	if _, err := dir.Lookup(context.Background(), "again"); !errors.Is(err, errDead) {
		t.Errorf("lookup after the failure: got %v, want %v", err, errDead)
	}
	if got := src.lists.Load(); got != 2 {
		t.Errorf("listings after one more lookup: got %d, want 2", got)
	}
}
