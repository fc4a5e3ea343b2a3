package shared

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stats are the counters of a Tier.
type stats struct {
	hits, misses, stale       atomic.Int64
	errors, outages, skipped  atomic.Int64
	corrupt, forged, tooLarge atomic.Int64
	puts                      atomic.Int64
	readBytes, writtenBytes   atomic.Int64
	hitBytes                  atomic.Int64
	leasesWon, leasesWaited   atomic.Int64
	leasesTimedOut            atomic.Int64
	leasesLapsed              atomic.Int64
	leasesRenewed             atomic.Int64
	refused                   atomic.Int64
	notOverwritten            atomic.Int64
	answerHits, answerMisses  atomic.Int64
	getLatency                latency
}

// Stats is a snapshot of a Tier's counters.
type Stats struct {
	// Hits and Misses count lookups; Stale, values whose identity record
	// the store refused (made from another version of the source).
	Hits, Misses, Stale int64
	// Errors counts calls that failed or ran out of time; Outages, the
	// runs of them; Skipped, calls not made during an outage's back-off.
	Errors, Outages, Skipped int64
	// Corrupt counts values refused for their checksum, size or codec;
	// Forged, values without the fleet's HMAC; TooLarge, values not
	// stored for being above MaxValue.
	Corrupt, Forged, TooLarge int64
	Puts                      int64
	// ReadBytes and WrittenBytes are bytes of values moved; HitBytes,
	// decoded bytes served (which the origin did not send).
	ReadBytes, WrittenBytes, HitBytes int64
	// LeasesWon, LeasesWaited and LeasesTimedOut count the fleet's single
	// flight: leases taken, waits for another node's value, and waits
	// that ended without it (its holder gave up, the engine failed, the
	// reader left). LeasesLapsed counts leases that lapsed under a waiter
	// (a holder died); LeasesRenewed, renewals of leases held.
	LeasesWon, LeasesWaited, LeasesTimedOut int64
	LeasesLapsed, LeasesRenewed             int64
	// Refused counts replies refused for declaring more than the largest
	// value volfs writes; NotOverwritten, values not written over a
	// value this node could not verify (Forged).
	Refused, NotOverwritten int64
	// AnswerHits and AnswerMisses count lookups of the origin's answers
	// (Answer: metadata, listings, absences).
	AnswerHits, AnswerMisses int64
}

// Stats returns the tier's counters.
func (t *Tier) Stats() Stats {
	s := &t.stats
	return Stats{
		Hits: s.hits.Load(), Misses: s.misses.Load(), Stale: s.stale.Load(),
		Errors: s.errors.Load(), Outages: s.outages.Load(), Skipped: s.skipped.Load(),
		Corrupt: s.corrupt.Load(), Forged: s.forged.Load(), TooLarge: s.tooLarge.Load(),
		Puts: s.puts.Load(), ReadBytes: s.readBytes.Load(), WrittenBytes: s.writtenBytes.Load(),
		HitBytes: s.hitBytes.Load(), LeasesWon: s.leasesWon.Load(), LeasesWaited: s.leasesWaited.Load(),
		LeasesTimedOut: s.leasesTimedOut.Load(), LeasesLapsed: s.leasesLapsed.Load(), LeasesRenewed: s.leasesRenewed.Load(),
		Refused: s.refused.Load(), NotOverwritten: s.notOverwritten.Load(),
		AnswerHits: s.answerHits.Load(), AnswerMisses: s.answerMisses.Load(),
	}
}

// latency sums the time of calls, for a counter pair (seconds, calls).
type latency struct{ nanos, calls atomic.Int64 }

func (l *latency) observe(d time.Duration) {
	l.nanos.Add(int64(d))
	l.calls.Add(1)
}

var (
	descs = map[string]*prometheus.Desc{}
	help  = []struct{ name, help string }{
		{"hits", "Chunk lookups the shared tier served."},
		{"misses", "Chunk lookups the shared tier could not serve."},
		{"stale", "Shared-tier values made from another version of the source, refused."},
		{"errors", "Calls to the shared engine that failed or ran out of time."},
		{"outages", "Runs of failed calls to the shared engine (each logged once)."},
		{"skipped", "Calls not made to the shared engine during an outage's back-off."},
		{"corrupt", "Shared-tier values refused for their checksum, size or codec."},
		{"forged", "Shared-tier values refused for want of the fleet's HMAC (signed with another secret, or not signed): check --shared-cache-secret on every node."},
		{"not_overwritten", "Chunks not written over a shared value this node could not verify."},
		{"refused", "Engine replies refused for declaring more than the largest value volfs writes."},
		{"too_large", "Chunks not stored in the shared tier for being above the engine's item limit."},
		{"puts", "Chunks stored in the shared tier."},
		{"read_bytes", "Bytes of values read from the shared engine."},
		{"written_bytes", "Bytes of values written to the shared engine."},
		{"saved_bytes", "Decoded bytes the shared tier served instead of the origin."},
		{"leases_won", "Fleet leases taken before going to the origin."},
		{"leases_waited", "Waits for another node's value under its lease."},
		{"leases_timed_out", "Waits for another node's value that ended without it."},
		{"leases_lapsed", "Leases that lapsed while a node waited under them (their holder died)."},
		{"leases_renewed", "Renewals of leases held while loading from the origin."},
		{"answer_hits", "Lookups of the origin's answers (metadata, listings, absences) the shared tier served."},
		{"answer_misses", "Lookups of the origin's answers the shared tier could not serve."},
		{"get_seconds", "Time spent in lookups of the shared engine."},
		{"gets", "Lookups of the shared engine."},
	}
)

// The gauges of the fleet's health at a glance.
var (
	upDesc     = prometheus.NewDesc("volfs_shared_up", "1 while the shared engine answers, 0 during an outage.", []string{"engine"}, nil)
	signedDesc = prometheus.NewDesc("volfs_shared_signed", "1 when this node signs and checks shared values with a secret.", []string{"engine"}, nil)
)

func init() {
	for _, h := range help {
		descs[h.name] = prometheus.NewDesc("volfs_shared_"+h.name+"_total", h.help, []string{"engine"}, nil)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Describe implements prometheus.Collector.
func (t *Tier) Describe(ch chan<- *prometheus.Desc) {
	for _, h := range help {
		ch <- descs[h.name]
	}
	ch <- upDesc
	ch <- signedDesc
}

// Collect implements prometheus.Collector.
func (t *Tier) Collect(ch chan<- prometheus.Metric) {
	s := t.Stats()
	vals := map[string]float64{
		"hits": float64(s.Hits), "misses": float64(s.Misses), "stale": float64(s.Stale),
		"errors": float64(s.Errors), "outages": float64(s.Outages), "skipped": float64(s.Skipped),
		"corrupt": float64(s.Corrupt), "forged": float64(s.Forged), "too_large": float64(s.TooLarge),
		"puts": float64(s.Puts), "read_bytes": float64(s.ReadBytes), "written_bytes": float64(s.WrittenBytes),
		"saved_bytes": float64(s.HitBytes), "leases_won": float64(s.LeasesWon), "leases_waited": float64(s.LeasesWaited),
		"leases_timed_out": float64(s.LeasesTimedOut), "leases_lapsed": float64(s.LeasesLapsed),
		"leases_renewed": float64(s.LeasesRenewed), "refused": float64(s.Refused), "not_overwritten": float64(s.NotOverwritten),
		"answer_hits": float64(s.AnswerHits), "answer_misses": float64(s.AnswerMisses),
		"get_seconds": time.Duration(t.stats.getLatency.nanos.Load()).Seconds(),
		"gets":        float64(t.stats.getLatency.calls.Load()),
	}
	for _, h := range help {
		ch <- prometheus.MustNewConstMetric(descs[h.name], prometheus.CounterValue, vals[h.name], t.Name())
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, b2f(!t.down.Load()), t.Name())
	ch <- prometheus.MustNewConstMetric(signedDesc, prometheus.GaugeValue, b2f(t.Signed()), t.Name())
}
