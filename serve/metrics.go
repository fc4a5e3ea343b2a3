package serve

import (
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
// after timeout instead of holding the request, and it records the status
// and the body bytes for the metrics.
type response struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	once    sync.Once
	code    int
	bytes   int64
}

func newResponse(w http.ResponseWriter, timeout time.Duration) *response {
	return &response{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
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
