package fs

import "context"

// ReserveLoad reserves n bytes of the store's budget of what loads hold
// while they run (a precomputed minishard index read and parsed), waiting
// for room: decode.LoadReserver. A load that holds one waits only for its
// own reads, so the budget always drains.
func (s *treeSource) ReserveLoad(ctx context.Context, n int64) (func(), error) {
	return s.t.store.ReserveLoad(ctx, n)
}
