package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// countsAtWrite is a ResponseWriter that notes, as each reply's status
// goes out, how many requests of that code and method were counted.
type countsAtWrite struct {
	http.ResponseWriter
	m      *metrics
	method string
	seen   *float64
}

func (c countsAtWrite) WriteHeader(code int) {
	*c.seen = c.m.count(c.method, code)
	c.ResponseWriter.WriteHeader(code)
}

// count is the number of requests of method and code counted.
func (m *metrics) count(method string, code int) float64 {
	var d dto.Metric
	if err := m.requests.WithLabelValues(method, strconv.Itoa(code)).Write(&d); err != nil {
		return -1
	}
	return d.GetCounter().GetValue()
}

// TestCountedBeforeReply: over a loopback server, a request is counted
// before its reply's status goes out, so that a client that has its reply
// finds it counted; each request once, the bytes of the body too.
func TestCountedBeforeReply(t *testing.T) {
	s := New(nil, Options{WebDAV: true})
	var seen float64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(countsAtWrite{w, s.metrics, r.Method, &seen}, r)
	}))
	defer srv.Close()
	for i, tc := range []struct {
		method string
		code   int
	}{
		{"OPTIONS", http.StatusOK},
		{"DELETE", http.StatusMethodNotAllowed},
		{"OPTIONS", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Fatalf("%s: %d, want %d", tc.method, resp.StatusCode, tc.code)
		}
		want := float64(1 + i/2) // the second OPTIONS is the second 200
		if seen != want {
			t.Errorf("%s: %v counted as the status went out, want %v", tc.method, seen, want)
		}
		if got := s.metrics.count(tc.method, tc.code); got != want {
			t.Errorf("%s: %v counted after the reply, want %v", tc.method, got, want)
		}
	}
	if got := s.metrics.bytes.Load(); got <= 0 {
		t.Errorf("served bytes = %d, want > 0 (the 405's text)", got)
	}
}
