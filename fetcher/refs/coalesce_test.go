package refs

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// TestCoalesce: concurrent reads of neighbouring ranges of one remote
// target go as fewer requests that move about the referenced bytes, each
// read getting its own bytes; a lone read goes alone, for its bytes.
func TestCoalesce(t *testing.T) {
	dir := t.TempDir()
	const n, size, gap = 32, 3000, 100
	data := make([]byte, n*(size+gap)+128<<10)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	os.WriteFile(filepath.Join(dir, "data.bin"), data, 0o644)
	var refs []string
	for i := range n {
		refs = append(refs, fmt.Sprintf(`"a/%d": ["data.bin", %d, %d]`, i, i*(size+gap), size))
	}
	// Far away: not merged with the rest.
	refs = append(refs, fmt.Sprintf(`"far": ["data.bin", %d, 10]`, len(data)-10))
	os.WriteFile(filepath.Join(dir, "refs.json"), []byte(`{"version": 1, "refs": {`+strings.Join(refs, ",")+`}}`), 0o644)
	var reqs, moved atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/data.bin" {
			reqs.Add(1)
			w = &countingWriter{w, &moved}
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	ctx := context.Background()
	f, err := Load(ctx, srv.URL+"/refs.json", Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	want := func(key string, i int) []byte {
		if key == "far" {
			return data[len(data)-10:]
		}
		return data[i*(size+gap) : i*(size+gap)+size]
	}
	if obj, err := f.Get(ctx, "a/5", size); err != nil || !bytes.Equal(obj.Data, want("a/5", 5)) {
		t.Fatalf("a/5 alone: %d bytes, %v", len(obj.Data), err)
	}
	if reqs.Load() != 1 || moved.Load() != size {
		t.Errorf("a lone read: %d requests, %d bytes; want 1, %d", reqs.Load(), moved.Load(), size)
	}
	reqs.Store(0)
	moved.Store(0)
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n + 1 {
			key := fmt.Sprintf("a/%d", i)
			if i == n {
				key = "far"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var b []byte
				var err error
				if i%2 == 0 {
					var obj fetcher.Object
					obj, err = f.Get(ctx, key, size)
					b = obj.Data
				} else {
					b, _, err = f.GetRange(ctx, key, 0, size)
				}
				if err != nil || !bytes.Equal(b, want(key, i)) {
					t.Errorf("%s: %d bytes, %v", key, len(b), err)
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	referenced := int64(3 * (n*size + 10))
	t.Logf("%d concurrent reads, 3 times: %d requests, %d bytes moved for %d referenced", n+1, reqs.Load(), moved.Load(), referenced)
	if reqs.Load() >= 3*(n+1)/2 {
		t.Errorf("%d requests for 3 x %d concurrent reads, want far fewer", reqs.Load(), n+1)
	}
	// The gaps, the range of a read that went alone when it lies between
	// others, and, when the scheduler spreads the reads over several
	// batches, the ranges between one batch's reads that another batch
	// reads (a run spans gaps of up to coalesceGap).
	if moved.Load() < referenced || moved.Load() > referenced*3/2 {
		t.Errorf("%d bytes moved, want about the %d referenced", moved.Load(), referenced)
	}
	if reqs.Load() < 6 {
		t.Errorf("%d requests: the far range cannot have merged", reqs.Load())
	}
}
