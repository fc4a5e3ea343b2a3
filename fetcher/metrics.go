package fetcher

import (
	"context"
	"errors"
	"sync/atomic"
)

// Stats counts what a fetcher asked of its source since it was made. Every
// fetcher of this package reports the same counters (Statser), kept by one
// implementation (Metrics).
type Stats struct {
	// Objects counts requests to the source that succeeded: for HTTP
	// each GET, ranged GET, HEAD and listing; for GCS and local files
	// each Get, GetRange, Stat and List.
	Objects int64
	// Bytes counts the object bytes received, by every attempt, a
	// retried one included.
	Bytes int64
	// Conns counts the connections opened to the source (TCP dials) by
	// the session the fetcher shares with every fetcher of the process
	// that addresses the same host or client; 0 for local files.
	Conns int64
	// Retries counts attempts repeated after a transient failure.
	Retries int64
	// NotFound, GaveUp and Failed count requests that ended in an error:
	// the object does not exist (ErrNotExist); transient failures until
	// the attempts ran out (ErrTransient); any other error (refused, too
	// large, invalid, cancelled).
	NotFound, GaveUp, Failed int64
}

// Statser is a Fetcher that counts its requests. Every fetcher of this
// package implements it; a caller that wraps or receives any Fetcher finds
// the counters with a type assertion on this interface, never on a
// concrete type.
type Statser interface {
	// Stats returns the counters so far. Safe for concurrent use.
	Stats() Stats
}

// HTTPStats is the former name of Stats.
//
// Deprecated: use Stats.
type HTTPStats = Stats

// Metrics keeps the counters of one fetcher: a fetcher embeds it (which
// makes it a Statser) and reports each request's outcome with Done, each
// repeated attempt with Retry and each body byte received with AddBytes.
// The zero value counts from zero, with no connections; ConnsFrom names
// the session's dial counter. All methods are safe for concurrent use.
type Metrics struct {
	objects, bytes, retries, notFound, gaveUp, failed atomic.Int64

	conns func() int64 // set once, before use, by ConnsFrom
}

// ConnsFrom makes Stats report conns() as Conns: the dial count of the
// session the fetcher sends its requests through. Call it once, before the
// fetcher is used.
func (m *Metrics) ConnsFrom(conns func() int64) { m.conns = conns }

// Done counts the end of one request, by its error: nil is an object,
// ErrNotExist a missing one, ErrTransient a request given up after its
// attempts, anything else a failure.
func (m *Metrics) Done(err error) {
	switch {
	case err == nil:
		m.objects.Add(1)
	case errors.Is(err, ErrNotExist):
		m.notFound.Add(1)
	case errors.Is(err, ErrTransient):
		m.gaveUp.Add(1)
	default:
		m.failed.Add(1)
	}
}

// Retry counts one attempt repeated after a transient failure.
func (m *Metrics) Retry() { m.retries.Add(1) }

// AddBytes counts n bytes received from the source.
func (m *Metrics) AddBytes(n int64) { m.bytes.Add(n) }

// Stats returns the counters so far.
func (m *Metrics) Stats() Stats {
	s := Stats{
		Objects: m.objects.Load(), Bytes: m.bytes.Load(), Retries: m.retries.Load(),
		NotFound: m.notFound.Load(), GaveUp: m.gaveUp.Load(), Failed: m.failed.Load(),
	}
	if m.conns != nil {
		s.Conns = m.conns()
	}
	return s
}

// metricsKey is the context key of the Metrics that a request's bytes are
// counted in, for transports that several fetchers share (GCS's client).
type metricsKey struct{}

// withMetrics returns ctx carrying m, for metricsFrom.
func withMetrics(ctx context.Context, m *Metrics) context.Context {
	return context.WithValue(ctx, metricsKey{}, m)
}

// metricsFrom returns the Metrics that ctx carries, or nil.
func metricsFrom(ctx context.Context) *Metrics {
	m, _ := ctx.Value(metricsKey{}).(*Metrics)
	return m
}
