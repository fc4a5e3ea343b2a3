package fetcher

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPPinnedRange: a range read pinned to a version (WithVersion)
// sends its ETag as If-Match, on a loopback server that net/http's
// ServeContent answers: the pinned version reads; another version is
// ErrChanged. A server whose ETags are weak, which RFC 9110's If-Match
// never matches (412 every time), is asked once more without If-Match,
// served, and not sent If-Match again; an object of another version is
// still ErrChanged there, by the ETag of the reply.
func TestHTTPPinnedRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		etag string
	}{
		{"strong", `"v1"`},
		{"weak", `W/"v1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			etag, body := tc.etag, []byte("0123456789")
			var ifMatch []string
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				e, b := etag, body
				ifMatch = append(ifMatch, r.Header.Get("If-Match"))
				mu.Unlock()
				w.Header().Set("ETag", e)
				http.ServeContent(w, r, "o", time.Time{}, bytes.NewReader(b))
			})
			h := newHTTP(t, srv.URL, HTTPOptions{})
			ctx := context.Background()
			b, id, err := h.GetRange(ctx, "o", 2, 3)
			if err != nil || string(b) != "234" {
				t.Fatalf("unpinned: %q, %v; want 234", b, err)
			}
			b, got, err := h.GetRange(WithVersion(ctx, "o", id), "o", 5, 3)
			if err != nil || string(b) != "567" || got != id {
				t.Errorf("pinned to the current version: %q, %s, %v; want 567, %s", b, got, err, id)
			}
			mu.Lock()
			etag, body = tc.etag[:len(tc.etag)-2]+`2"`, []byte("abcdefghij")
			mu.Unlock()
			if b, got, err := h.GetRange(WithVersion(ctx, "o", id), "o", 5, 3); !errors.Is(err, ErrChanged) {
				t.Errorf("pinned to a version the object no longer is: %q, %s, %v; want ErrChanged", b, got, err)
			}
			mu.Lock()
			defer mu.Unlock()
			// The change is a 412, asked again without If-Match to tell a
			// change from a weak comparison.
			want := []string{"", `"v1"`, `"v1"`, ""}
			if tc.name == "weak" {
				// A 412, then without; then no If-Match any more.
				want = []string{"", `"v1"`, "", ""}
			}
			if len(ifMatch) != len(want) {
				t.Fatalf("If-Match of each request: %q, want %q", ifMatch, want)
			}
			for i := range want {
				if ifMatch[i] != want[i] {
					t.Errorf("If-Match of each request: %q, want %q", ifMatch, want)
					break
				}
			}
		})
	}
}

// TestPinnedSize: a range read pinned to a size (WithSize) is ErrChanged
// when the reply tells of another whole size (Content-Range), from an
// HTTP server whose ETag is the same for both sizes and from S3, and
// reads when the size is the object's; a pin of another key is ignored.
func TestPinnedSize(t *testing.T) {
	body := []byte("0123456789")
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"same"`)
		http.ServeContent(w, r, "o", time.Time{}, bytes.NewReader(body))
	})
	s3Env(t, "")
	f := startFakeS3(t, false)
	f.put(t, "b", "o", body, nil)
	ctx := context.Background()
	for name, src := range map[string]Fetcher{
		"http": newHTTP(t, srv.URL, HTTPOptions{}),
		"s3":   s3Fetcher(t, f, "s3://b", fastS3),
	} {
		t.Run(name, func(t *testing.T) {
			if b, _, err := src.GetRange(WithSize(ctx, "o", 10), "o", 2, 3); err != nil || string(b) != "234" {
				t.Errorf("pinned to its size: %q, %v; want 234", b, err)
			}
			if b, _, err := src.GetRange(WithSize(ctx, "o", 9), "o", 2, 3); !errors.Is(err, ErrChanged) {
				t.Errorf("pinned to another size: %q, %v; want ErrChanged", b, err)
			}
			if b, _, err := src.GetRange(WithSize(ctx, "other", 9), "o", 2, 3); err != nil || string(b) != "234" {
				t.Errorf("a pin of another key: %q, %v; want 234", b, err)
			}
		})
	}
}

// TestPinnedReplyBeforeBody: a read pinned to a version (WithVersion) from
// a server that ignores If-Match and Range and now holds another version
// is ErrChanged from the reply's headers: the body, which nothing could
// be served from, is not downloaded (at most what draining a reply reads,
// and what the sockets' buffers hold). Each case: the whole GET of a
// chunk load, a range from the start, and the 412 asked again without
// If-Match of a server that answers If-Match with 412 and ignores Range.
func TestPinnedReplyBeforeBody(t *testing.T) {
	const size = 64 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	for _, mode := range []string{"get", "range", "412 then whole"} {
		t.Run(mode, func(t *testing.T) {
			var sent atomic.Int64
			srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if mode == "412 then whole" && r.Header.Get("If-Match") != "" {
					w.WriteHeader(http.StatusPreconditionFailed)
					return
				}
				w.Header().Set("ETag", `"v2"`)
				w.Header().Set("Content-Length", strconv.Itoa(size))
				for off := 0; off < size; off += 1 << 20 {
					n, err := w.Write(body[off : off+1<<20])
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
			h := newHTTP(t, srv.URL, HTTPOptions{MaxAttempts: 1})
			ctx := WithVersion(context.Background(), "o", `etag:"v1"`)
			var err error
			if mode == "get" {
				_, err = h.Get(ctx, "o", size)
			} else {
				_, _, err = h.GetRange(ctx, "o", 0, 48<<20)
			}
			if !errors.Is(err, ErrChanged) {
				t.Fatalf("pinned read of another version: %v, want ErrChanged", err)
			}
			srv.CloseClientConnections()
			if n := sent.Load(); n > 16<<20 {
				t.Errorf("the server sent %d MiB of a reply refused by its headers", n>>20)
			}
		})
	}
}
