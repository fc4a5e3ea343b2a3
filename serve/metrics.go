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

// metrics counts the requests answered, by method and status code, the
// replies cut after their status was sent, and the body bytes sent. A
// request is counted as its reply's status is committed, before any byte
// of it goes out: a client that has its reply finds it counted.
type metrics struct {
	requests *prometheus.CounterVec
	cut      *prometheus.CounterVec
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
			Help: "Requests answered by volfs serve, by method and the status code sent (499: the client left before a reply).",
		}, []string{"method", "code"}),
		cut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "volfs_http_replies_cut_total",
			Help: "Replies of volfs serve cut after their status was sent, by method and why (499: the client left; else the code the failure maps to).",
		}, []string{"method", "code"}),
	}
	m.bytesCol = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "volfs_http_served_bytes_total",
		Help: "Body bytes sent by volfs serve.",
	}, func() float64 { return float64(m.bytes.Load()) })
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.cut, m.bytesCol}
}

// label is method as counted.
func label(method string) string {
	if !knownMethods[method] {
		return "other"
	}
	return method
}

// response is the ResponseWriter of one request: it sets a write deadline
// before each write, so that a client that stops reading fails the write
// after timeout instead of holding the request; it records the status and
// the body bytes, and counts the request as its status is committed
// (metrics); and it holds the request's tree-read
// slot, taken from slots, which it gives back while a block is written
// (writeBlock). It is used by its request's goroutine only.
type response struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	slots   chan struct{}
	held    bool // a slot is taken
	m       *metrics
	method  string
	once    sync.Once
	sent    int // the status committed and counted; 0 before
	code    int // the request's outcome: sent, or what cut the reply
	bytes   int64
}

func newResponse(w http.ResponseWriter, r *http.Request, m *metrics, timeout time.Duration, slots chan struct{}) *response {
	return &response{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout, slots: slots, m: m, method: label(r.Method)}
}

// commit counts the request under code, the status about to be sent, once.
func (w *response) commit(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, code
		w.m.requests.WithLabelValues(w.method, strconv.Itoa(code)).Inc()
	})
}

// finish counts a request that sent no status (net/http then sends 200,
// unless the handler set code: the client left first), or the cut of a
// reply whose outcome differs from the status it sent.
func (w *response) finish() {
	switch code := w.code; {
	case w.sent == 0 && code == 0:
		w.commit(http.StatusOK)
	case w.sent == 0:
		w.commit(code)
	case code != w.sent:
		w.m.cut.WithLabelValues(w.method, strconv.Itoa(code)).Inc()
	}
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
	w.commit(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *response) Write(p []byte) (int, error) {
	w.commit(http.StatusOK)
	// Only a connection's writer can take a deadline; an HTTP/2 stream
	// or a test recorder cannot, and keeps the server's bounds.
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	w.m.bytes.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *response) Unwrap() http.ResponseWriter { return w.ResponseWriter }
