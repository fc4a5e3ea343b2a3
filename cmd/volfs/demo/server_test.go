package demo

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gunzip decodes with the standard library, a second implementation beside the one that wrote
// the streams.
func gunzip(b []byte) ([]byte, error) {
	zr, err := stdgzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func TestServer(t *testing.T) {
	const chunk = "0123456789abcdefghij"
	objects := map[string][]byte{
		"img/info":     []byte(`{"k":1}`),
		"img/s0/0-1":   gz(t, chunk),
		"img/s0/1-2":   gz(t, "x"),
		"img/s1/0-1":   gz(t, "y"),
		"raw.gz":       gz(t, "stored compressed"),
		"a<b&c/d":      []byte("escaped"),
		"top-level.md": []byte("# hi"),
	}
	srv, err := Serve(objects)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") || !strings.HasSuffix(srv.URL, "/") {
		t.Errorf("URL = %q, want http://127.0.0.1:PORT/", srv.URL)
	}
	// No transparent decompression and no redirect following: the test sees the raw responses.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	dir := func(names ...string) string {
		var b strings.Builder
		b.WriteString("<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n")
		for _, n := range names {
			b.WriteString(n + "\n")
		}
		return b.String() + "</pre>\n"
	}
	tests := []struct {
		name, method, path, acceptEncoding, rangeHeader string
		wantStatus                                      int
		wantEncoding, wantType, wantLocation            string
		wantBody                                        []byte
	}{
		{"plain object", "GET", "img/info", "gzip", "", 200, "", "application/json", "", objects["img/info"]},
		{"gzip accepted", "GET", "img/s0/0-1", "gzip", "", 200, "gzip", "application/octet-stream", "", objects["img/s0/0-1"]},
		{"gzip among others", "GET", "img/s0/0-1", "br, gzip;q=0.5", "", 200, "gzip", "", "", objects["img/s0/0-1"]},
		{"wildcard is not gzip", "GET", "img/s0/0-1", "*", "", 200, "", "", "", []byte(chunk)},
		{"no accept-encoding", "GET", "img/s0/0-1", "", "", 200, "", "application/octet-stream", "", []byte(chunk)},
		{"gzip refused", "GET", "img/s0/0-1", "gzip;q=0, deflate", "", 200, "", "", "", []byte(chunk)},
		{"identity only", "GET", "img/s0/0-1", "identity", "", 200, "", "", "", []byte(chunk)},
		{"range on identity", "GET", "img/s0/0-1", "", "bytes=5-9", 206, "", "", "", []byte(chunk[5:10])},
		{"suffix range", "GET", "img/s0/0-1", "", "bytes=-3", 206, "", "", "", []byte(chunk[17:])},
		{"range ignored on gzip", "GET", "img/s0/0-1", "gzip", "bytes=5-9", 200, "gzip", "", "", objects["img/s0/0-1"]},
		{"head identity", "HEAD", "img/s0/0-1", "", "", 200, "", "", "", nil},
		{"head gzip", "HEAD", "img/s0/0-1", "gzip", "", 200, "gzip", "", "", nil},
		{".gz object is content", "GET", "raw.gz", "gzip", "", 200, "", "", "", objects["raw.gz"]},
		{"root index", "GET", "", "", "", 200, "", "text/html; charset=utf-8", "",
			[]byte(dir(`<a href="a%3Cb&c/">a&lt;b&amp;c/</a>`, `<a href="img/">img/</a>`, `<a href="raw.gz">raw.gz</a>`, `<a href="top-level.md">top-level.md</a>`))},
		{"layer index", "GET", "img/", "", "", 200, "", "text/html; charset=utf-8", "",
			[]byte(dir(`<a href="info">info</a>`, `<a href="s0/">s0/</a>`, `<a href="s1/">s1/</a>`))},
		{"scale index", "GET", "img/s0/", "gzip", "", 200, "", "text/html; charset=utf-8", "",
			[]byte(dir(`<a href="0-1">0-1</a>`, `<a href="1-2">1-2</a>`))},
		{"directory redirect", "GET", "img/s0", "", "", 301, "", "", "/img/s0/", nil},
		{"unknown key", "GET", "img/s0/9-10", "gzip", "", 404, "", "", "", nil},
		{"unknown directory", "GET", "nope/", "", "", 404, "", "", "", nil},
		{"object as directory", "GET", "img/info/", "", "", 404, "", "", "", nil},
		{"post", "POST", "img/info", "", "", 405, "", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.acceptEncoding != "" {
				req.Header.Set("Accept-Encoding", tt.acceptEncoding)
			}
			if tt.rangeHeader != "" {
				req.Header.Set("Range", tt.rangeHeader)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := resp.StatusCode, tt.wantStatus; got != want {
				t.Fatalf("status = %v, want %v", got, want)
			}
			if got, want := resp.Header.Get("Content-Encoding"), tt.wantEncoding; got != want {
				t.Errorf("Content-Encoding = %q, want %q", got, want)
			}
			if got, want := resp.Header.Get("Location"), tt.wantLocation; got != want {
				t.Errorf("Location = %q, want %q", got, want)
			}
			if got, want := resp.Header.Get("Content-Type"), tt.wantType; want != "" && got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			if tt.wantStatus >= 300 {
				return
			}
			if tt.method == "HEAD" {
				want := int64(len(chunk))
				if tt.wantEncoding == "gzip" {
					want = int64(len(objects[tt.path]))
				}
				if got := resp.ContentLength; got != want {
					t.Errorf("HEAD Content-Length = %v, want %v", got, want)
				}
				return
			}
			if got, want := resp.ContentLength, int64(len(body)); got != want {
				t.Errorf("Content-Length = %v, want %v (the body length)", got, want)
			}
			if !bytes.Equal(body, tt.wantBody) {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
		})
	}
	if got, want := srv.Requests(), int64(len(tests)); got != want {
		t.Errorf("Requests() = %v, want %v", got, want)
	}
}

// TestServeObjects reads every demo chunk through the server with Go's default transparent
// gzip handling, the way the http fetcher will, and compares it with the stored stream.
func TestServeObjects(t *testing.T) {
	objects := testObjects()
	srv, err := Serve(objects)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for key, stored := range objects {
		resp, err := client.Get(srv.URL + key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		want := stored
		if !strings.HasSuffix(key, "/info") {
			if want, err = gunzip(stored); err != nil {
				t.Fatal(err)
			}
			if !resp.Uncompressed {
				t.Errorf("%s: sent without Content-Encoding: gzip", key)
			}
		}
		if !bytes.Equal(body, want) {
			t.Errorf("%s: body differs from the stored object (%d bytes, want %d)", key, len(body), len(want))
		}
	}
}
