package fetcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/volfs/volfs/internal/gcsfake"
)

// TestStatsEveryFetcher: every fetcher counts the same things through
// Statser, found by interface assertion: a Get, a GetRange and a Stat are
// three objects, a missing key is one not-found, the bytes read are
// counted, and a remote fetcher's session has dialled.
func TestStatsEveryFetcher(t *testing.T) {
	data := seq(1000)
	for _, tc := range []struct {
		name   string
		mk     func(t *testing.T) Fetcher
		remote bool // Bytes may hold replies besides the object's bytes; Conns > 0
	}{
		{"file", func(t *testing.T) Fetcher {
			f, err := NewFile(writeTree(t, map[string][]byte{"a": data}))
			if err != nil {
				t.Fatal(err)
			}
			return f
		}, false},
		{"http", func(t *testing.T) Fetcher {
			srv := httptest.NewServer(http.FileServer(http.Dir(writeTree(t, map[string][]byte{"a": data}))))
			t.Cleanup(srv.Close)
			return newHTTP(t, srv.URL, fastRetries)
		}, true},
		{"gs", func(t *testing.T) Fetcher {
			e := gcsfake.Start(t, gcsfake.Options{Objects: []fakestorage.Object{
				{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: "a"}, Content: data},
			}})
			return gcsFetcher(t, e, "bkt")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.mk(t)
			s, ok := f.(Statser)
			if !ok {
				t.Fatalf("%T is not a Statser", f)
			}
			if got := s.Stats(); got != (Stats{Conns: got.Conns}) {
				t.Errorf("a new fetcher's stats: got %+v, want zeros", got)
			}
			ctx := context.Background()
			if _, err := f.Get(ctx, "a", 1<<20); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.GetRange(ctx, "a", 10, 100); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.Stat(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			_, err := f.Get(ctx, "missing", 1<<20)
			checkErr(t, err, ErrNotExist)

			got := s.Stats()
			want := Stats{Objects: 3, Bytes: got.Bytes, Conns: got.Conns, NotFound: 1}
			if got != want {
				t.Errorf("stats: got %+v, want %+v", got, want)
			}
			switch {
			case !tc.remote && got.Bytes != 1100:
				t.Errorf("bytes: got %d, want the 1100 read", got.Bytes)
			case tc.remote && got.Bytes < 1100:
				t.Errorf("bytes: got %d, want at least the 1100 read", got.Bytes)
			case !tc.remote && got.Conns != 0:
				t.Errorf("conns of a local source: got %d, want 0", got.Conns)
			case tc.remote && got.Conns < 1:
				t.Errorf("conns: got %d, want at least the one dialled", got.Conns)
			}
		})
	}
}

// TestStatsRetries: the HTTP and GCS fetchers count retries, and a request
// given up after its attempts or refused, the same way.
func TestStatsRetries(t *testing.T) {
	data := seq(300_000)
	for _, tc := range []struct {
		name  string
		codes []int // the replies to the attempts, the last one repeated
		want  Stats // Bytes and Conns aside
	}{
		{"ok", []int{200}, Stats{Objects: 1}},
		{"503 twice then 200", []int{503, 503, 200}, Stats{Objects: 1, Retries: 2}},
		{"always 503", []int{503}, Stats{Retries: 5, GaveUp: 1}},
		{"403", []int{403}, Stats{Failed: 1}},
		{"404", []int{404}, Stats{NotFound: 1}},
	} {
		// fault answers download n (from 1) with its code, unless that is
		// 200; it leaves other requests (GCS metadata) alone.
		fault := func(n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n == 0 {
				return false
			}
			code := tc.codes[min(int(n)-1, len(tc.codes)-1)]
			if code == http.StatusOK {
				return false
			}
			http.Error(w, "<Error/>", code)
			return true
		}
		faults := map[string]func(t *testing.T) Fetcher{
			"http": func(t *testing.T) Fetcher {
				var n atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !fault(n.Add(1), w, r) {
						w.Write(data)
					}
				}))
				t.Cleanup(srv.Close)
				return newHTTP(t, srv.URL, fastRetries)
			},
			"gs": func(t *testing.T) Fetcher {
				s := &gcsShaped{objects: map[string]shapedObject{"k": {data: data}}, fault: fault}
				return newShaped(t, s, fastGCS)
			},
		}
		for _, kind := range []string{"http", "gs"} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				f := faults[kind](t)
				f.Get(context.Background(), "k", 1<<30)
				got := f.(Statser).Stats()
				want := tc.want
				want.Bytes, want.Conns = got.Bytes, got.Conns
				if got != want {
					t.Errorf("stats: got %+v, want %+v (Bytes and Conns aside)", got, want)
				}
				if tc.want.Objects == 1 && got.Bytes < int64(len(data)) {
					t.Errorf("bytes: got %d, want at least the object's %d", got.Bytes, len(data))
				}
				if got.Conns < 1 {
					t.Errorf("conns: got %d, want at least 1", got.Conns)
				}
			})
		}
	}
}
