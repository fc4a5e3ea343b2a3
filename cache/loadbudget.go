package cache

import "context"

// Memory beside the cache
//
// The bytes a process holds beside its cache come in two kinds, each with
// a MemBudget of the Store:
//
//   - What readers hold: a stitched view's batch while it is copied out
//     (Store.Reserve, waiting for room), and the chunks read-ahead has
//     prefetched and nobody has read yet (Budget.DrawFrom, never
//     waiting: the window stops growing instead).
//   - What a load holds while it runs, beyond the chunk it makes: the
//     index a precomputed shard's chunk is found with, read and parsed
//     (Store.ReserveLoad, waiting for room).
//
// Two budgets, not one, because a reader holding its bytes waits for
// loads: were a load to wait behind that reader in the same queue, the
// two would wait for each other. A load never waits for a reader, and it
// holds one ReserveLoad at a time, so the second budget always drains.
// The whole is bounded by the cache, the first budget (InFlightBudget)
// and the second (LoadBudget, half the first).

// LoadBudget is the size of Store.ReserveLoad's budget beside an
// in-flight budget of inFlight bytes: half of it.
func LoadBudget(inFlight int64) int64 { return inFlight / 2 }

// ReserveLoad takes n bytes of the budget of buffers that loads hold while
// they run (an index read and parsed to find a chunk), waiting for room,
// and returns the function that gives them back; see MemBudget.Reserve. A
// load calls it before it reads such a buffer and must not call it again
// before releasing, nor wait for anything but its own I/O while holding
// it. A reservation larger than the budget is cut to it: that load then
// runs alone.
func (s *Store) ReserveLoad(ctx context.Context, n int64) (release func(), err error) {
	return s.loads.Reserve(ctx, n)
}

// MemBudget returns the budget of what readers hold beside the cache
// (Store.Reserve's), for Budget.DrawFrom.
func (s *Store) MemBudget() *MemBudget { return s.budget }

// LoadStats returns the figures of ReserveLoad's budget.
func (s *Store) LoadStats() MemBudgetStats { return s.loads.Stats() }
