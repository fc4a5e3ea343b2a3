package refs

import "github.com/volfs/volfs/fetcher"

// Stats returns the counters of what f asked of its origins: the sums of
// those of the fetchers of every root it has opened (the set's own
// directory, which also served the set itself, and each allowed root a
// target was read from), so that Bytes is every byte of the set and of
// its targets received. Conns is the largest of the roots' counts, for
// roots on one host share one session's dial counter. It makes f a
// fetcher.Statser; safe for concurrent use.
func (f *Fetcher) Stats() fetcher.Stats {
	var s fetcher.Stats
	for _, r := range f.roots {
		p := r.opened.Load()
		if p == nil {
			continue
		}
		st, ok := (*p).(fetcher.Statser)
		if !ok {
			continue
		}
		rs := st.Stats()
		s.Objects += rs.Objects
		s.Bytes += rs.Bytes
		s.Retries += rs.Retries
		s.NotFound += rs.NotFound
		s.GaveUp += rs.GaveUp
		s.Failed += rs.Failed
		s.Conns = max(s.Conns, rs.Conns)
	}
	return s
}
