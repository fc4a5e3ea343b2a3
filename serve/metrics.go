package serve

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts the requests answered, by method and status code, and the
// body bytes sent.
type metrics struct {
	requests *prometheus.CounterVec
	bytes    atomic.Int64
	bytesCol prometheus.Collector
}

// knownMethods are the methods counted under their own name; any other is
// counted as "other", so that a client inventing methods cannot grow the
// metrics without bound.
var knownMethods = map[string]bool{
	"GET": true, "HEAD": true, "OPTIONS": true, "PROPFIND": true, "PROPPATCH": true, "PUT": true,
	"DELETE": true, "MKCOL": true, "COPY": true, "MOVE": true, "LOCK": true, "UNLOCK": true, "POST": true,
}

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "volfs_http_requests_total",
			Help: "Requests answered by volfs serve, by method and status code (499: the client left first).",
		}, []string{"method", "code"}),
	}
	m.bytesCol = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "volfs_http_served_bytes_total",
		Help: "Body bytes sent by volfs serve.",
	}, func() float64 { return float64(m.bytes.Load()) })
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.bytesCol}
}

func (m *metrics) observe(method string, code int, n int64) {
	if !knownMethods[method] {
		method = "other"
	}
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(method, strconv.Itoa(code)).Inc()
	m.bytes.Add(n)
}

// response is the ResponseWriter of one request: it sets a write deadline
// before each write, so that a client that stops reading fails the write
// after timeout instead of holding the request; it records the status and
// the body bytes for the metrics; and it holds the request's tree-read
// slot, taken from slots, which it gives back while a block is written
// (writeBlock). It is used by its request's goroutine only.
type response struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	slots   chan struct{}
	held    bool // a slot is taken
	once    sync.Once
	code    int
	bytes   int64
}

func newResponse(w http.ResponseWriter, timeout time.Duration, slots chan struct{}) *response {
	return &response{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout, slots: slots}
}

// take takes a tree-read slot; false when ctx ended first.
func (w *response) take(ctx context.Context) bool {
	if w.held {
		return true
	}
	select {
	case w.slots <- struct{}{}:
		w.held = true
		return true
	case <-ctx.Done():
		return false
	}
}

// give gives back the slot take took, if it holds one.
func (w *response) give() {
	if w.held {
		w.held = false
		<-w.slots
	}
}

// writeBlock writes one block of a reply with the slot given back for the
// write, and takes one again for the next block: a slow client holds a
// slot only while the tree is read for it, never while it takes its
// bytes. It fails when the write fails or the client leaves before a slot
// comes back.
func (w *response) writeBlock(ctx context.Context, p []byte) error {
	w.give()
	if _, err := w.Write(p); err != nil {
		return err
	}
	if !w.take(ctx) {
		return ctx.Err()
	}
	return nil
}

func (w *response) WriteHeader(code int) {
	w.once.Do(func() { w.code = code })
	w.ResponseWriter.WriteHeader(code)
}

func (w *response) Write(p []byte) (int, error) {
	w.once.Do(func() { w.code = http.StatusOK })
	// Only a connection's writer can take a deadline; an HTTP/2 stream
	// or a test recorder cannot, and keeps the server's bounds.
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *response) Unwrap() http.ResponseWriter { return w.ResponseWriter }
