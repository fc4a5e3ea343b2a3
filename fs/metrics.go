package fs

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// loadStats counts chunk loads from the origin by the array's encoding.
// Safe for concurrent use.
type loadStats struct {
	mu    sync.Mutex
	byEnc map[string]*encLoads // GUARDED_BY(mu)
}

type encLoads struct {
	loads, errors int64
	seconds       float64
}

// Label values come from metadata (an encoding is the codec chain as the
// metadata names it, blosc's cname included), so they are bounded: at most
// maxLabelBytes of valid UTF-8 each, and at most maxEncodings distinct
// values; loads of further encodings are counted under otherEncoding.
const (
	maxLabelBytes = 64
	maxEncodings  = 32
	otherEncoding = "other"
)

// label returns v as a bounded label value: invalid UTF-8 replaced, and
// cut at a character boundary to at most maxLabelBytes, marked with "...".
func label(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	if len(v) <= maxLabelBytes {
		return v
	}
	cut := maxLabelBytes - len("...")
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "..."
}

// observe counts one load of encoding enc that took d. A missing chunk is
// a load like any other; other errors are counted apart too.
func (s *loadStats) observe(enc string, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byEnc == nil {
		s.byEnc = make(map[string]*encLoads)
	}
	e := s.byEnc[enc]
	if e == nil {
		enc = label(enc)
		if e = s.byEnc[enc]; e == nil && len(s.byEnc) >= maxEncodings-1 {
			enc = otherEncoding
			e = s.byEnc[enc]
		}
		if e == nil {
			e = &encLoads{}
			s.byEnc[enc] = e
		}
	}
	e.loads++
	e.seconds += d.Seconds()
	if err != nil && !isMissing(err) {
		e.errors++
	}
}

var (
	loadsDesc = prometheus.NewDesc("volfs_chunk_loads_total",
		"Chunks loaded from the origin (fetched and decoded), by encoding.", []string{"encoding"}, nil)
	loadSecondsDesc = prometheus.NewDesc("volfs_chunk_load_seconds_total",
		"Time spent loading chunks from the origin (fetch plus decode), by encoding.", []string{"encoding"}, nil)
	loadErrorsDesc = prometheus.NewDesc("volfs_chunk_load_errors_total",
		"Chunk loads that failed other than with not found, by encoding.", []string{"encoding"}, nil)
)

// Describe implements prometheus.Collector.
func (s *loadStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- loadsDesc
	ch <- loadSecondsDesc
	ch <- loadErrorsDesc
}

// Collect implements prometheus.Collector.
func (s *loadStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for enc, e := range s.byEnc {
		ch <- prometheus.MustNewConstMetric(loadsDesc, prometheus.CounterValue, float64(e.loads), enc)
		ch <- prometheus.MustNewConstMetric(loadSecondsDesc, prometheus.CounterValue, e.seconds, enc)
		ch <- prometheus.MustNewConstMetric(loadErrorsDesc, prometheus.CounterValue, float64(e.errors), enc)
	}
}

// Collectors returns the Prometheus collectors of the tree: its chunk
// store and read-ahead (cache.NewCollector), its loads by encoding, its
// reads and backing files (passStats), its
// fetcher's counters when the fetcher keeps them (a fetcher.Statser, as
// every fetcher of package fetcher is), and the tiers that are collectors
// (the disk tier, cache.DiskTier, and the shared tier). The caller
// registers them.
func (t *Tree) Collectors() []prometheus.Collector {
	cols := []prometheus.Collector{cache.NewCollector(t.store, t.budget), &t.loads, &t.pass}
	if s, ok := t.src.(fetcher.Statser); ok {
		cols = append(cols, fetchCollector{s})
	}
	if t.origin != nil {
		cols = append(cols, keepCollector{t.origin.Stats()})
	}
	for _, tier := range t.tiers {
		if c, ok := tier.(prometheus.Collector); ok {
			cols = append(cols, c)
		}
	}
	return cols
}

// fetchCollector exposes a fetcher's counters.
type fetchCollector struct{ s fetcher.Statser }

var (
	fetchObjectsDesc = prometheus.NewDesc("volfs_fetch_objects_total", "Requests to the origin that succeeded.", nil, nil)
	fetchBytesDesc   = prometheus.NewDesc("volfs_fetch_bytes_total", "Body bytes received from the origin, retried attempts included.", nil, nil)
	fetchDialsDesc   = prometheus.NewDesc("volfs_fetch_dials_total", "TCP connections opened to the origin's host.", nil, nil)
	fetchRetriesDesc = prometheus.NewDesc("volfs_fetch_retries_total", "Attempts repeated after a transient failure.", nil, nil)
	fetchErrorsDesc  = prometheus.NewDesc("volfs_fetch_errors_total",
		"Requests to the origin that ended in an error, by kind: not_found, gave_up (transient failures until the attempts ran out), other.", []string{"kind"}, nil)
)

func (c fetchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fetchObjectsDesc, fetchBytesDesc, fetchDialsDesc, fetchRetriesDesc, fetchErrorsDesc} {
		ch <- d
	}
}

func (c fetchCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(fetchObjectsDesc, s.Objects)
	counter(fetchBytesDesc, s.Bytes)
	counter(fetchDialsDesc, s.Conns)
	counter(fetchRetriesDesc, s.Retries)
	counter(fetchErrorsDesc, s.NotFound, "not_found")
	counter(fetchErrorsDesc, s.GaveUp, "gave_up")
	counter(fetchErrorsDesc, s.Failed, "other")
}

// keepCollector exposes the keeping source's counters: with the chunk
// store's reads, the origin requests a chunk read costs to check the
// tiers' entries (check_requests per read).
type keepCollector struct{ s *keep.Stats }

var (
	keepChecksDesc        = prometheus.NewDesc("volfs_keep_checks_total", "Identity checks of kept copies (tier entries) against the origin's objects.", nil, nil)
	keepCheckRequestsDesc = prometheus.NewDesc("volfs_keep_check_requests_total", "Identity checks that asked the origin (a Stat): the rest were answered within --metadata-ttl or while offline.", nil, nil)
	keepVouchedDesc       = prometheus.NewDesc("volfs_keep_checks_vouched_total", "Identity checks answered by a fleet's verification: a shared value signed with the fleet's secret, verified at the origin within --metadata-ttl.", nil, nil)
	keepFleetAnswersDesc  = prometheus.NewDesc("volfs_keep_fleet_answers_total", "Metadata objects, listings and absences taken from a fleet's signed answer read at the origin within --metadata-ttl, instead of the origin.", nil, nil)
	keepKeptServedDesc    = prometheus.NewDesc("volfs_keep_kept_served_total", "Kept answers (metadata, listings, absences) served from disk while the origin was offline.", nil, nil)
	keepOfflineDesc       = prometheus.NewDesc("volfs_keep_offline_spells_total", "Times the origin was taken as offline.", nil, nil)
)

func (c keepCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{keepChecksDesc, keepCheckRequestsDesc, keepVouchedDesc, keepFleetAnswersDesc, keepKeptServedDesc, keepOfflineDesc} {
		ch <- d
	}
}

func (c keepCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(keepChecksDesc, c.s.Checks.Load())
	counter(keepCheckRequestsDesc, c.s.CheckRequests.Load())
	counter(keepVouchedDesc, c.s.Vouched.Load())
	counter(keepFleetAnswersDesc, c.s.FleetAnswers.Load())
	counter(keepKeptServedDesc, c.s.KeptServed.Load())
	counter(keepOfflineDesc, c.s.OfflineSpells.Load())
}

// StoreStats returns the counters of the chunk cache, for tests and
// benchmarks.
func (t *Tree) StoreStats() cache.Stats { return t.store.Cache().Stats() }
