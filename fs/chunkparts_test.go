package fs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
	"github.com/volfs/volfs/fetcher"
)

// objectServer is an origin of objects held in memory, each with an ETag,
// that answers Range, If-Match and HEAD as an object store does
// (http.ServeContent), and records the requests made of each key.
type objectServer struct {
	mu   sync.Mutex
	objs map[string]servedObject
	reqs map[string][]string // key -> "GET bytes=0-1023" or "HEAD" or "GET"
}

type servedObject struct {
	data []byte
	etag string
}

func (s *objectServer) put(key string, data []byte, etag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[key] = servedObject{data, etag}
}

func (s *objectServer) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs, key)
}

func (s *objectServer) requests(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs[key]...)
}

func (s *objectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	o, ok := s.objs[key]
	s.reqs[key] = append(s.reqs[key], strings.TrimSpace(r.Method+" "+r.Header.Get("Range")))
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", o.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(o.data))
}

// TestChunkParts: a large chunk of a verbatim array at a remote source is
// read through a window of ranged parts pinned to the version a Stat
// found, exactly; every other chunk is read whole, as the chunk path
// reads it: one held in memory, a missing one (the fill value), one
// stored with another size (an error, not its bytes), a small one, and
// every chunk of a tree with a disk cache. A chunk rewritten while it is
// read fails the read (ESTALE) and never shows a byte of the new version.
func TestChunkParts(t *testing.T) {
	const chunk = partsChunkMin + 4<<20
	srv := &objectServer{objs: map[string]servedObject{}, reqs: map[string][]string{}}
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	srv.put("big/.zarray", fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1",
 "compressor": null, "fill_value": 7, "order": "C", "filters": null}`, 6*chunk, chunk), `"m"`)
	srv.put("small/.zarray", []byte(`{"zarr_format": 2, "shape": [2097152], "chunks": [1048576], "dtype": "|u1",
 "compressor": null, "fill_value": 0, "order": "C", "filters": null}`), `"m"`)
	content := func(seed, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*seed + i>>17)
		}
		return b
	}
	srv.put("big/0", content(13, chunk), `"v1"`)
	srv.put("big/1", content(17, chunk), `"v1"`)
	// big/2 is missing.
	srv.put("big/3", content(19, chunk+1), `"v1"`)
	srv.put("big/4", content(23, chunk), `"v1"`)
	srv.put("big/5", content(37, chunk), `"v1"`)
	srv.put("small/0", content(29, 1<<20), `"v1"`)

	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	open := func(tree *Tree, p string) (*Handle, *chunkFile) {
		t.Helper()
		n, err := tree.Resolve(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := n.(*chunkFile)
		if !ok {
			t.Fatalf("%s is a %T, want a chunk", p, n)
		}
		h, err := tree.Open(ctx, c, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		return h, c
	}
	readAll := func(h *Handle) ([]byte, error) {
		out := make([]byte, 0, h.Size())
		buf := make([]byte, 1<<20)
		for off := int64(0); off < h.Size(); off += int64(len(buf)) {
			pieces, release, err := h.ReadPieces(ctx, buf, off)
			for _, p := range pieces {
				out = append(out, p...)
			}
			if release != nil {
				release()
			}
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	ranged := func(key string) (heads, ranges, whole int) {
		for _, r := range srv.requests(key) {
			switch {
			case r == "HEAD":
				heads++
			case strings.HasPrefix(r, "GET bytes="):
				ranges++
			default:
				whole++
			}
		}
		return
	}

	t.Run("in parts", func(t *testing.T) {
		h, _ := open(tree, "big/0")
		defer h.Close()
		if h.obj == nil {
			t.Fatal("a large verbatim chunk not in memory is read whole, want a window of parts")
		}
		got, err := readAll(h)
		if err != nil || !bytes.Equal(got, content(13, chunk)) {
			t.Fatalf("read %d bytes, %v; want the stored chunk's %d", len(got), err, chunk)
		}
		heads, ranges, whole := ranged("big/0")
		if heads != 1 || ranges < 4 || whole != 0 {
			t.Errorf("requests of big/0: %q; want one HEAD and ranged GETs only", srv.requests("big/0"))
		}
		if n := tree.pass.chunkParts.Load(); n != 1 {
			t.Errorf("volfs_chunk_windows_total %d, want 1", n)
		}
	})

	t.Run("in memory", func(t *testing.T) {
		n, err := tree.Resolve(ctx, "big/1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.(*chunkFile).chunk(ctx); err != nil {
			t.Fatal(err)
		}
		before := len(srv.requests("big/1"))
		h, _ := open(tree, "big/1")
		defer h.Close()
		if h.obj != nil {
			t.Error("a chunk held in memory is read in parts, want it served from memory")
		}
		got, err := readAll(h)
		if err != nil || !bytes.Equal(got, content(17, chunk)) {
			t.Errorf("read %d bytes, %v; want the chunk's %d", len(got), err, chunk)
		}
		if after := srv.requests("big/1")[before:]; len(after) != 0 {
			t.Errorf("a chunk held in memory asked the origin: %q", after)
		}
	})

	t.Run("missing", func(t *testing.T) {
		h, _ := open(tree, "big/2")
		defer h.Close()
		if h.obj != nil {
			t.Error("a missing chunk is read in parts")
		}
		got, err := readAll(h)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{7}, chunk)) {
			t.Errorf("read %d bytes, %v; want the fill value 7 over %d", len(got), err, chunk)
		}
	})

	t.Run("another size", func(t *testing.T) {
		h, _ := open(tree, "big/3")
		defer h.Close()
		if h.obj != nil {
			t.Error("a chunk stored with another size is read in parts")
		}
		if got, err := readAll(h); err == nil || errors.Is(err, fetcher.ErrChanged) {
			t.Errorf("read %d bytes, %v; want the chunk path's refusal of a corrupt chunk", len(got), err)
		}
	})

	t.Run("small", func(t *testing.T) {
		h, _ := open(tree, "small/0")
		defer h.Close()
		if h.obj != nil {
			t.Error("a chunk under partsChunkMin is read in parts")
		}
		if _, ranges, _ := ranged("small/0"); ranges != 0 {
			t.Errorf("a small chunk read in ranges: %q", srv.requests("small/0"))
		}
	})

	t.Run("rewritten while read", func(t *testing.T) {
		h, _ := open(tree, "big/4")
		defer h.Close()
		if h.obj == nil {
			t.Fatal("read whole, want parts")
		}
		old, next := content(23, chunk), content(31, chunk)
		buf := make([]byte, 1<<20)
		var stale error
		for off := int64(0); off < chunk; off += int64(len(buf)) {
			if off == 3<<20 {
				srv.put("big/4", next, `"v2"`)
			}
			k, err := h.ReadAt(ctx, buf, off)
			if err != nil {
				stale = err
				break
			}
			if !bytes.Equal(buf[:k], old[off:off+int64(k)]) {
				t.Fatalf("read at %d: bytes not of the version opened", off)
			}
		}
		if !errors.Is(stale, fetcher.ErrChanged) {
			t.Errorf("reading on past the rewrite: %v, want an error wrapping ErrChanged (ESTALE)", stale)
		}
		// A new open finds the new version, in a window of its own.
		h2, c := open(tree, "big/4")
		defer h2.Close()
		if h2.obj == nil || h2.obj == h.obj || c.parts.Load() != h2.obj {
			t.Fatal("the open after the rewrite does not start a window of the new version")
		}
		got, err := readAll(h2)
		if err != nil || !bytes.Equal(got, next) {
			t.Errorf("read %d bytes, %v; want the new version's %d", len(got), err, chunk)
		}
	})

	// A chunk deleted while it is read in parts is a chunk changed at the
	// source: the read fails with ESTALE, as for a rewrite, not with
	// ENOENT (which read(2) never means), and never reads the fill value.
	t.Run("deleted while read", func(t *testing.T) {
		h, _ := open(tree, "big/5")
		defer h.Close()
		if h.obj == nil {
			t.Fatal("read whole, want parts")
		}
		old := content(37, chunk)
		buf := make([]byte, 1<<20)
		var gone error
		for off := int64(0); off < chunk; off += int64(len(buf)) {
			if off == 3<<20 {
				srv.remove("big/5")
			}
			k, err := h.ReadAt(ctx, buf, off)
			if err != nil {
				gone = err
				break
			}
			if !bytes.Equal(buf[:k], old[off:off+int64(k)]) {
				t.Fatalf("read at %d: bytes not of the version opened", off)
			}
		}
		if !errors.Is(gone, fetcher.ErrChanged) || errors.Is(gone, fetcher.ErrNotExist) {
			t.Errorf("reading on past the delete: %v, want an error wrapping ErrChanged (ESTALE) only", gone)
		}
		if e := tree.Errno(ctx, gone, "read", "big/5"); e != syscall.ESTALE {
			t.Errorf("errno %v, want ESTALE", e)
		}
	})

	t.Run("disk cache", func(t *testing.T) {
		d, err := disk.Open(disk.Options{Dir: t.TempDir(), MaxBytes: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		tree, err := New(ctx, tree.Source(), Options{CacheBytes: 256 << 20, Disk: cache.NewDisk(d)})
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		h, _ := open(tree, "big/0")
		defer h.Close()
		if h.obj != nil {
			t.Error("a tree with a disk cache reads a chunk in parts, want it loaded whole and kept")
		}
	})
}

// TestChunkPartsRangeIgnored: a server that answers HEAD but ignores Range
// (a 200 with the whole object) is found out by the first read of a chunk
// opened in parts; reads of that handle then take the chunk path, which
// loads the chunk whole, rather than ranged reads that the fetcher must
// refuse beyond fetcher.MaxRangeSkip. A first read deep in a chunk larger
// than that reads the chunk's bytes, as it would had the chunk been opened
// after the server was found out.
func TestChunkPartsRangeIgnored(t *testing.T) {
	const chunk = fetcher.MaxRangeSkip + 4<<20
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		r.Header.Del("Range")
		srv.ServeHTTP(w, r)
	})
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	srv.put("big/0", data, `"v1"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	h := openBig(t, tree)
	if h.obj == nil {
		t.Fatal("read whole at open, want parts (the server is not yet seen to ignore Range)")
	}
	buf := make([]byte, 1<<20)
	for _, off := range []int64{1 << 20, chunk - 2<<20, chunk - 1<<20, 0} {
		k, err := h.ReadAt(ctx, buf, off)
		if err != nil || !bytes.Equal(buf[:k], data[off:off+int64(k)]) || k != len(buf) {
			t.Errorf("read at %d: %d bytes, %v; want the chunk's", off, k, err)
		}
	}
}

// TestChunkPartsRangeIgnoredAfterProof: a server that honoured Range for
// the first reads of a chunk's window (which proved its version) and then
// ignores it, while the chunk is rewritten (same size, a new ETag) or its
// version is no longer named. The handle's later reads are of the version
// it served, or ESTALE: before, they went to the chunk store's whole load,
// which is pinned to nothing, and returned the new version's bytes after
// the old's. Unchanged, the rest of the chunk reads as it is, past
// fetcher.MaxRangeSkip too.
func TestChunkPartsRangeIgnoredAfterProof(t *testing.T) {
	const chunk = fetcher.MaxRangeSkip + 4<<20
	old, next := make([]byte, chunk), make([]byte, chunk)
	for i := range old {
		old[i], next[i] = byte(i*7+i>>20), byte(i*7+i>>20+1)
	}
	for _, tc := range []struct {
		name    string
		rewrite func(*objectServer)
		stale   bool
	}{
		{"unchanged", func(*objectServer) {}, false},
		{"rewritten", func(s *objectServer) { s.put("big/0", next, `"v2"`) }, true},
		{"version no longer named", func(s *objectServer) { s.put("big/0", next, "") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, web, ignore := switchingOrigin(t, chunk)
			srv.put("big/0", old, `"v1"`)
			ctx := context.Background()
			tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
			h := openBig(t, tree)
			if h.obj == nil {
				t.Fatal("read whole at open, want parts")
			}
			buf := make([]byte, 1<<20)
			if k, err := h.ReadAt(ctx, buf, 0); err != nil || k != len(buf) || !bytes.Equal(buf, old[:k]) {
				t.Fatalf("first read: %d bytes, %v; want the old chunk's first MiB", k, err)
			}
			ignore.Store(true)
			tc.rewrite(srv)
			// A read past the window's parts in flight: the first reply
			// of the server that ignores Range tells the tree so.
			staleAt := -1 // requests of the chunk when the first read failed
			for _, off := range []int64{chunk - 1<<20, chunk - 2<<20, 1 << 20} {
				k, err := h.ReadAt(ctx, buf, off)
				if err != nil && staleAt < 0 {
					staleAt = len(srv.requests("big/0"))
				}
				switch {
				case err == nil && !bytes.Equal(buf[:k], old[off:off+int64(k)]):
					t.Fatalf("read at %d after the switch: %d bytes that are not the old version's (new: %v)", off, k, bytes.Equal(buf[:k], next[off:off+int64(k)]))
				case tc.stale && err != nil && !errors.Is(err, fetcher.ErrChanged):
					t.Fatalf("read at %d after the switch: %v, want ErrChanged", off, err)
				case !tc.stale && (err != nil || k != len(buf)):
					t.Fatalf("read at %d after the switch: %d bytes, %v; want the chunk's", off, k, err)
				}
				if tc.stale && err == nil && off == 1<<20 {
					t.Errorf("every read after the switch served old bytes from memory: want ErrChanged by the last")
				}
			}
			if !tree.ignoresRange() {
				t.Errorf("the tree did not see the source ignore Range")
			}
			if n := len(srv.requests("big/0")); staleAt >= 0 && n != staleAt {
				t.Errorf("%d requests of the chunk after a read found it changed, want none: the change is every later read's answer", n-staleAt)
			}
		})
	}
}

// noETagWriter drops the ETag of a reply.
type noETagWriter struct{ http.ResponseWriter }

func (w noETagWriter) WriteHeader(code int) {
	w.Header().Del("ETag")
	w.ResponseWriter.WriteHeader(code)
}

func (w noETagWriter) Write(p []byte) (int, error) {
	w.Header().Del("ETag")
	return w.ResponseWriter.Write(p)
}

// TestChunkPartsUnnamedReplies: a server that names a chunk's version on
// HEAD but not on GET, and ignores If-Match, gives ranged replies that
// cannot be checked against the version the window is pinned to: the
// handle reads through the chunk store instead, so that a chunk rewritten
// while it is read never shows a reader bytes of the new version after
// those of the old. Before, every part was trusted, and the reads after
// the rewrite were of the new version without an error.
func TestChunkPartsUnnamedReplies(t *testing.T) {
	const chunk = partsChunkMin + 4<<20
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		r.Header.Del("If-Match")
		if r.Method == http.MethodGet {
			w = noETagWriter{w}
		}
		srv.ServeHTTP(w, r)
	})
	old, next := bytes.Repeat([]byte{1}, chunk), bytes.Repeat([]byte{2}, chunk)
	srv.put("big/0", old, `"v1"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	n, err := tree.Resolve(ctx, "big/0")
	if err != nil {
		t.Fatal(err)
	}
	for _, pieces := range []bool{false, true} {
		srv.put("big/0", old, `"v1"`)
		tree.store.Cache().Remove(n.(*chunkFile).mkey)
		h, err := tree.Open(ctx, n.(File), "big/0", 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.obj == nil {
			t.Fatal("read whole at open, want parts")
		}
		buf := make([]byte, 1<<20)
		for off := int64(0); off < chunk; off += int64(len(buf)) {
			if off == 3<<20 {
				srv.put("big/0", next, `"v2"`)
			}
			var got []byte
			if pieces {
				ps, release, err := h.ReadPieces(ctx, buf, off)
				if err != nil {
					t.Fatalf("ReadPieces at %d: %v", off, err)
				}
				got = bytes.Join(ps, nil)
				if release != nil {
					release()
				}
			} else {
				k, err := h.ReadAt(ctx, buf, off)
				if err != nil {
					t.Fatalf("ReadAt at %d: %v", off, err)
				}
				got = buf[:k]
			}
			if len(got) != len(buf) || !bytes.Equal(got, old[off:off+int64(len(got))]) {
				t.Fatalf("read at %d (pieces %v): %d bytes, not all of the version opened", off, pieces, len(got))
			}
		}
		h.Close()
	}
}

// sentCounter counts the body bytes of replies.
type sentCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w sentCounter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(k))
	return k, err
}

// TestChunkPartsReaders: 8 readers of one 64 MiB chunk at once, each
// starting at another place (workers reading slices of it), cost the
// origin about what one reader in parts and one whole load cost: the
// window serves one handle, and the others load the chunk whole into
// memory once. Sharing the window, they broke it in turn, cancelling the
// parts in flight each time: 646 MiB sent for the 64 MiB chunk.
func TestChunkPartsReaders(t *testing.T) {
	const chunk = 64 << 20
	var sent atomic.Int64
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		srv.ServeHTTP(sentCounter{w, &sent}, r)
	})
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	srv.put("big/0", data, `"v1"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{})
	n, err := tree.Resolve(ctx, "big/0")
	if err != nil {
		t.Fatal(err)
	}
	sent.Store(0)
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := tree.Open(ctx, n.(File), "big/0", uint32(r+1))
			if err != nil {
				t.Error(err)
				return
			}
			defer h.Close()
			buf := make([]byte, 1<<20)
			for i := int64(0); i < chunk; i += int64(len(buf)) {
				off := (int64(r)*8<<20 + i) % chunk
				k, err := h.ReadAt(ctx, buf, off)
				if err != nil || !bytes.Equal(buf[:k], data[off:off+int64(k)]) {
					t.Errorf("reader %d at %d: %d bytes, %v; want the chunk's", r, off, k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := sent.Load(); got > 3*chunk {
		t.Errorf("8 readers of a %d MiB chunk: the origin sent %d MiB in %d requests, want at most %d MiB",
			chunk>>20, got>>20, len(srv.requests("big/0")), 3*chunk>>20)
	}
}

// TestChunkPartsHeadDisagrees: a server whose HEAD names one version of a
// chunk and whose GETs name another, every time (a cache in front of the
// origin that answers HEAD itself), has not rewritten the chunk: a handle
// that has read nothing from its window yet reads the chunk whole through
// the chunk store, as every chunk was read before windows, rather than
// failing every open with ESTALE. A mismatch after the window has served
// bytes is a rewrite, ESTALE (TestChunkParts).
func TestChunkPartsHeadDisagrees(t *testing.T) {
	const chunk = partsChunkMin + 4<<20
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		if r.Method == http.MethodHead {
			w.Header().Set("ETag", `"head"`)
			w.Header().Set("Content-Length", fmt.Sprint(chunk))
			return
		}
		srv.ServeHTTP(w, r)
	})
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	srv.put("big/0", data, `"get"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	n, err := tree.Resolve(ctx, "big/0")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tree.store.Cache().Remove(n.(*chunkFile).mkey)
		h, err := tree.Open(ctx, n.(File), "big/0", 1)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		for off := int64(0); off < chunk; off += int64(len(buf)) {
			k, err := h.ReadAt(ctx, buf, off)
			if err != nil || k != len(buf) || !bytes.Equal(buf, data[off:off+int64(k)]) {
				t.Fatalf("read at %d: %d bytes, %v; want the chunk's", off, k, err)
			}
		}
		h.Close()
	}
}

// TestChunkPartsHeadHangs: an origin that answers GET but leaves HEAD
// unanswered costs the open of a large chunk partsStatWait, not the
// fetcher's retries (three minutes) nor --read-timeout (a minute): the
// Stat only decides how the chunk is read, and the chunk is read whole.
func TestChunkPartsHeadHangs(t *testing.T) {
	const chunk = partsChunkMin
	stop := make(chan struct{})
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		if r.Method == http.MethodHead && r.URL.Path == "/big/0" {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		srv.ServeHTTP(w, r)
	})
	t.Cleanup(func() { close(stop) }) // before the origin's close, which waits for the handler
	data := bytes.Repeat([]byte{9}, chunk)
	srv.put("big/0", data, `"v1"`)
	src, err := fetcher.Open(web.URL, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tree, err := New(ctx, src, Options{CacheBytes: 256 << 20, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	n, err := tree.Resolve(ctx, "big/0")
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *Handle, 1)
	go func() {
		h, err := tree.Open(ctx, n.(File), "big/0", 1)
		if err != nil {
			t.Error(err)
		}
		opened <- h
	}()
	var h *Handle
	select {
	case h = <-opened:
	case <-time.After(partsStatWait + 5*time.Second):
		t.Fatalf("open of a chunk whose HEAD hangs still waiting after %v", partsStatWait+5*time.Second)
	}
	if h == nil {
		return
	}
	defer h.Close()
	buf := make([]byte, 1<<20)
	if k, err := h.ReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf[:k], data[:k]) || k != len(buf) {
		t.Errorf("read: %d bytes, %v; want the chunk's", k, err)
	}
}

// TestChunkPartsWeakETag: a server that names versions with weak ETags
// (W/"x"), which never match If-Match, still serves a large chunk in
// parts, exactly (one 412 teaches the fetcher not to send If-Match), and
// a rewrite while it is read still fails the read with ESTALE: the
// version of every reply is compared.
func TestChunkPartsWeakETag(t *testing.T) {
	const chunk = partsChunkMin + 4<<20
	srv := &objectServer{objs: map[string]servedObject{}, reqs: map[string][]string{}}
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	srv.put("big/.zarray", rawZarray(2*chunk, chunk), `"m"`)
	content := func(seed int) []byte {
		b := make([]byte, chunk)
		for i := range b {
			b[i] = byte(i*seed + i>>17)
		}
		return b
	}
	srv.put("big/0", content(3), `W/"v1"`)
	srv.put("big/1", content(5), `W/"v1"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	for i, key := range []string{"big/0", "big/1"} {
		n, err := tree.Resolve(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		h, err := tree.Open(ctx, n.(File), key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.obj == nil {
			t.Fatalf("%s read whole, want parts", key)
		}
		old := content(3 + 2*i)
		buf := make([]byte, 1<<20)
		var readErr error
		for off := int64(0); off < chunk; off += int64(len(buf)) {
			if i == 1 && off == 3<<20 {
				srv.put(key, content(7), `W/"v2"`)
			}
			k, err := h.ReadAt(ctx, buf, off)
			if err != nil {
				readErr = err
				break
			}
			if !bytes.Equal(buf[:k], old[off:off+int64(k)]) {
				t.Fatalf("%s at %d: bytes not of the version opened", key, off)
			}
		}
		h.Close()
		if i == 0 && readErr != nil {
			t.Errorf("%s: %v, want its bytes", key, readErr)
		}
		if i == 1 && !errors.Is(readErr, fetcher.ErrChanged) {
			t.Errorf("%s rewritten while read: %v, want an error wrapping ErrChanged (ESTALE)", key, readErr)
		}
	}
}

// TestChunkPartsHeadSizeLies: a server whose HEAD names the chunk's size
// and whose GETs, under the same ETag, serve a longer object. The ranged
// replies tell the object's size (Content-Range), which the window pins
// (fetcher.WithSize): the chunk is read as the whole load reads it, a
// corrupt chunk (an error), never as the first chunk-size bytes of an
// object of another size.
func TestChunkPartsHeadSizeLies(t *testing.T) {
	const chunk = partsChunkMin
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		if r.Method == http.MethodHead && r.URL.Path == "/big/0" {
			w.Header().Set("ETag", `"same"`)
			w.Header().Set("Content-Length", fmt.Sprint(chunk))
			return
		}
		srv.ServeHTTP(w, r)
	})
	srv.put("big/0", make([]byte, chunk+4096), `"same"`)
	ctx := context.Background()
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	h := openBig(t, tree)
	if h.obj == nil {
		t.Fatal("read whole, want the HEAD believed and a window opened")
	}
	buf := make([]byte, 1<<20)
	if k, err := h.ReadAt(ctx, buf, 0); err == nil || k != 0 {
		t.Errorf("first read of a chunk stored %d bytes long: %d bytes, %v; want an error and no bytes", chunk+4096, k, err)
	}
}

// bigOrigin starts a loopback origin of srv's objects, closed at the
// test's end, holding big/.zarray: an array of one chunk of chunk bytes,
// stored without compressor. handle serves every request, handing it to
// srv as it sees fit (a faulty server in front of an honest one).
func bigOrigin(t *testing.T, chunk int, handle func(w http.ResponseWriter, r *http.Request, srv *objectServer)) (*objectServer, *httptest.Server) {
	t.Helper()
	srv := &objectServer{objs: map[string]servedObject{}, reqs: map[string][]string{}}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, srv) }))
	t.Cleanup(web.Close)
	srv.put("big/.zarray", rawZarray(chunk, chunk), `"m"`)
	return srv, web
}

// switchingOrigin is bigOrigin behind a server that honours Range and
// If-Match until ignore is set, and ignores both from then on.
func switchingOrigin(t *testing.T, chunk int) (srv *objectServer, web *httptest.Server, ignore *atomic.Bool) {
	ignore = new(atomic.Bool)
	srv, web = bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		if ignore.Load() {
			r.Header.Del("Range")
			r.Header.Del("If-Match")
		}
		srv.ServeHTTP(w, r)
	})
	return srv, web, ignore
}

// openBig opens the chunk big/0 of tree for reader 1, in parts when the
// open chooses to (the caller checks h.obj); it is closed at the test's
// end.
func openBig(t *testing.T, tree *Tree) *Handle {
	t.Helper()
	n, err := tree.Resolve(context.Background(), "big/0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := tree.Open(context.Background(), n.(File), "big/0", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// treeOver returns a tree of the HTTP source at url, opened with opts, with
// a 256 MiB cache; it is closed when the test ends.
func treeOver(t *testing.T, url string, opts fetcher.Options) *Tree {
	t.Helper()
	return treeOverWith(t, url, opts, Options{CacheBytes: 256 << 20})
}

// treeOverWith is treeOver with the tree's options.
func treeOverWith(t *testing.T, url string, opts fetcher.Options, topts Options) *Tree {
	t.Helper()
	src, err := fetcher.Open(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := New(context.Background(), src, topts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	return tree
}

// rawZarray is the .zarray of a 1-D uint8 Zarr array of shape elements in
// chunks of chunk, without compressor or filters, fill value 0.
func rawZarray(shape, chunk int) []byte {
	return fmt.Appendf(nil, `{"zarr_format": 2, "shape": [%d], "chunks": [%d], "dtype": "|u1",
 "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, shape, chunk)
}

// TestChunkPartsIgnoredMidRead: a read of a chunk's window that found the
// source honouring Range, and finds it ignoring Range by the time it
// reaches the window (another read, of any object, found it out between
// the two), is served pinned to the window's version as every later read
// (Handle.readPinned's rule), never from a stream of the object, which
// takes a reply that names no version: here the object rewritten with no
// ETag. The window is a race of a few instructions, so the test runs it
// many times with readers looping on one handle.
func TestChunkPartsIgnoredMidRead(t *testing.T) {
	const chunk = partsChunkMin
	old, next := make([]byte, chunk), make([]byte, chunk)
	for i := range old {
		old[i], next[i] = byte(i*7+i>>20), byte(i*7+i>>20+1)
	}
	ctx := context.Background()
	var wrong atomic.Int64
	for iter := 0; iter < 60 && wrong.Load() == 0; iter++ {
		srv, web, ignore := switchingOrigin(t, chunk)
		srv.put("big/0", old, `"v1"`)
		srv.put("other", []byte("x"), `"o"`)
		tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
		n, err := tree.Resolve(ctx, "big/0")
		if err != nil {
			t.Fatal(err)
		}
		h, err := tree.Open(ctx, n.(File), "big/0", 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.obj == nil {
			t.Fatal("read whole at open, want parts")
		}
		buf := make([]byte, 1<<20)
		if k, err := h.ReadAt(ctx, buf, 0); err != nil || !bytes.Equal(buf[:k], old[:k]) {
			t.Fatalf("first read: %d bytes, %v; want the old chunk's", k, err)
		}
		ignore.Store(true)
		srv.put("big/0", next, "")
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := make([]byte, 4<<10)
				for !stop.Load() {
					k, err := h.ReadAt(ctx, p, 0)
					if err == nil && !bytes.Equal(p[:k], old[:k]) {
						wrong.Add(1)
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if _, _, err := tree.src.GetRange(ctx, "other", 0, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		h.Close()
		web.Close()
	}
	if k := wrong.Load(); k > 0 {
		t.Fatalf("%d reads served bytes of the rewritten object after bytes of the version opened", k)
	}
}

// TestChunkPartsPinnedReplies: once a chunk's window has proved its version
// and the source is seen to ignore Range, the handle's whole read of the
// chunk (Handle.readPinned) serves the version's bytes or fails: a reply
// gzip-encoded, cut short without a length, of a deleted object, or with
// no ETag is an error every read, never bytes; a read at the end is empty.
func TestChunkPartsPinnedReplies(t *testing.T) {
	const chunk = partsChunkMin
	old := make([]byte, chunk)
	for i := range old {
		old[i] = byte(i*7 + i>>20)
	}
	ctx := context.Background()
	for _, mode := range []string{"same", "gzip", "short", "deleted", "no etag"} {
		t.Run(mode, func(t *testing.T) {
			var after atomic.Bool
			srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
				if r.URL.Path == "/other" {
					r.Header.Del("Range")
				}
				if !after.Load() || r.URL.Path != "/big/0" || r.Method != "GET" {
					srv.ServeHTTP(w, r)
					return
				}
				switch mode {
				case "gzip":
					w.Header().Set("ETag", `"v1"`)
					w.Header().Set("Content-Encoding", "gzip")
					w.Write(old)
				case "short":
					w.Header().Set("ETag", `"v1"`)
					w.WriteHeader(http.StatusOK)
					w.Write(old[:chunk/2])
					w.(http.Flusher).Flush()
				case "deleted":
					http.NotFound(w, r)
				case "no etag":
					srv.ServeHTTP(noETagWriter{w}, r)
				default:
					srv.ServeHTTP(w, r)
				}
			})
			h, buf := provenThenIgnored(t, srv, web.URL, old)
			after.Store(true)
			for _, off := range []int64{4 << 20, chunk - 1<<20, chunk} {
				k, err := h.ReadAt(ctx, buf, off)
				want := old[min(off, chunk):min(off+int64(len(buf)), chunk)]
				switch {
				case err == nil && !bytes.Equal(buf[:k], want):
					t.Fatalf("read at %d: %d bytes that are not the chunk's", off, k)
				case mode == "same" && err != nil:
					t.Fatalf("read at %d: %v", off, err)
				case mode != "same" && err == nil && off < chunk:
					t.Fatalf("read at %d: %d bytes, want an error", off, k)
				}
			}
		})
	}
}

// TestPinnedChunkLoad: a chunk's load pinned to a version (pinnedChunk,
// what Handle.readPinned reads) returns that version's bytes, kept in the
// chunk store's memory under its own key, where a second read finds them
// without a request; and, against a server that ignores If-Match, fails
// with ErrChanged, never bytes and never "missing", once the object is
// rewritten, deleted, or answered with no ETag.
func TestPinnedChunkLoad(t *testing.T) {
	const chunk = 1 << 20
	old, next := make([]byte, chunk), make([]byte, chunk)
	for i := range old {
		old[i], next[i] = byte(i*7+i>>12), byte(i*5+1)
	}
	ctx := context.Background()
	for _, mode := range []string{"same", "rewritten", "deleted", "no etag"} {
		t.Run(mode, func(t *testing.T) {
			var after atomic.Bool
			srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
				r.Header.Del("If-Match")
				if after.Load() && mode == "no etag" {
					w = noETagWriter{w}
				}
				srv.ServeHTTP(w, r)
			})
			srv.put("big/0", old, `"v1"`)
			tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
			n, err := tree.Resolve(ctx, "big/0")
			if err != nil {
				t.Fatal(err)
			}
			f := n.(*chunkFile)
			_, id, err := tree.src.Stat(ctx, "big/0")
			if err != nil || !id.Known() {
				t.Fatalf("stat: %q, %v", id, err)
			}
			switch mode {
			case "rewritten":
				srv.put("big/0", next, `"v2"`)
			case "deleted":
				srv.remove("big/0")
			}
			after.Store(true)
			b, err := f.pinnedChunk(ctx, id)
			if mode != "same" {
				if err == nil || !errors.Is(err, fetcher.ErrChanged) || isMissing(err) {
					t.Fatalf("pinned load of a chunk %s: %d bytes, %v; want ErrChanged", mode, len(b), err)
				}
				return
			}
			if err != nil || !bytes.Equal(b, old) {
				t.Fatalf("pinned load: %d bytes, %v; want the chunk's", len(b), err)
			}
			if !tree.store.Cache().Holds(pinnedKey(f.mkey, id)) || tree.store.Cache().Holds(f.mkey) {
				t.Errorf("the pinned load is not kept under its own key alone")
			}
			gets := len(srv.requests("big/0"))
			if b, err := f.pinnedChunk(ctx, id); err != nil || !bytes.Equal(b, old) || len(srv.requests("big/0")) != gets {
				t.Errorf("second pinned read: %d bytes, %v, requests %v", len(b), err, srv.requests("big/0"))
			}
		})
	}
}

// TestChunkPartsPinnedSmallCache: a chunk larger than the chunk store's
// memory, read pinned after its window proved the version and the server
// began ignoring Range (Handle.readPinned), is downloaded whole once for
// the handle's remaining reads, not once per read: the store cannot keep
// it, and the handle holds it.
func TestChunkPartsPinnedSmallCache(t *testing.T) {
	const chunk = partsChunkMin
	data := make([]byte, chunk)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	srv, web, ignore := switchingOrigin(t, chunk)
	srv.put("big/0", data, `"v1"`)
	tree := treeOverWith(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}}, Options{CacheBytes: 4 << 20})
	h := openBig(t, tree)
	ctx := context.Background()
	buf := make([]byte, 1<<20)
	if k, err := h.ReadAt(ctx, buf, 0); err != nil || h.obj == nil || !bytes.Equal(buf[:k], data[:k]) {
		t.Fatalf("first read: %d bytes, %v; want the chunk's in parts", k, err)
	}
	ignore.Store(true)
	before := len(srv.requests("big/0"))
	for off := int64(chunk - 1<<20); off > 0; off -= 2 << 20 {
		if k, err := h.ReadAt(ctx, buf, off); err != nil || !bytes.Equal(buf[:k], data[off:off+int64(k)]) {
			t.Fatalf("read at %d: %d bytes, %v; want the chunk's", off, k, err)
		}
	}
	if got := srv.requests("big/0")[before:]; len(got) > 2 {
		t.Errorf("%d requests of the chunk for 8 reads after the switch, want at most 2 (the ranged read that found it, one whole): %v", len(got), got)
	}
}

// TestChunkPartsPinnedGzipETag: a server that gives a chunk's gzip form a
// tag of its own, or none (nginx's gzip_static serves the .gz file's ETag;
// nginx before 1.7.3, and Apache with DeflateAlterETag Remove, drop it),
// and the plain form the tag its HEAD and ranged replies give, still
// serves the chunk once its window proved the version and the source was
// seen to ignore Range (Handle.readPinned): the plain form names the
// version, so the pinned read asks for it, as the window did.
func TestChunkPartsPinnedGzipETag(t *testing.T) {
	const chunk = partsChunkMin
	old := make([]byte, chunk)
	for i := range old {
		old[i] = byte(i*7 + i>>20)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(old)
	zw.Close()
	ctx := context.Background()
	for _, mode := range []string{"gzip_static", "no etag on gzip"} {
		t.Run(mode, func(t *testing.T) {
			srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
				if r.URL.Path == "/other" {
					r.Header.Del("Range")
				}
				if r.URL.Path != "/big/0" || r.Method != "GET" || !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					srv.ServeHTTP(w, r)
					return
				}
				if mode == "gzip_static" {
					w.Header().Set("ETag", `"gz-5f3a"`)
				}
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Content-Length", fmt.Sprint(gz.Len()))
				w.Write(gz.Bytes())
			})
			h, buf := provenThenIgnored(t, srv, web.URL, old)
			for _, off := range []int64{4 << 20, chunk - 1<<20} {
				k, err := h.ReadAt(ctx, buf, off)
				if err != nil || !bytes.Equal(buf[:k], old[off:off+int64(k)]) || k != len(buf) {
					t.Fatalf("read at %d after the switch: %d bytes, %v; want the chunk's", off, k, err)
				}
			}
		})
	}
}

// TestChunkPartsUnprovenSwitch: a read of a chunk's handle that finds the
// source ignoring Range before any reply of the window proved the version
// reads the chunk path, and may serve the object as rewritten since the
// open; a reply of the version opened that comes in after that, to a read
// of the same handle waiting on the window (the kernel sends reads of one
// file at once), must not serve its bytes too: the handle would show the
// new version, then the old.
func TestChunkPartsUnprovenSwitch(t *testing.T) {
	const chunk = partsChunkMin
	old, next := make([]byte, chunk), make([]byte, chunk)
	for i := range old {
		old[i], next[i] = byte(i*7+i>>20), byte(i*5+1)
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	srv, web := bigOrigin(t, chunk, func(w http.ResponseWriter, r *http.Request, srv *objectServer) {
		if r.URL.Path == "/other" {
			r.Header.Del("Range")
		}
		if r.URL.Path == "/big/0" && r.Header.Get("Range") != "" && first.CompareAndSwap(false, true) {
			// The window's first reply: of the version opened, held
			// back until the test lets it go.
			close(arrived)
			<-release
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(old))
			return
		}
		srv.ServeHTTP(w, r)
	})
	srv.put("big/0", old, `"v1"`)
	srv.put("other", []byte("x"), `"o"`)
	tree := treeOver(t, web.URL, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	h := openBig(t, tree)
	if h.obj == nil {
		t.Fatal("read whole at open, want parts")
	}
	ctx := context.Background()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b := make([]byte, 1<<20)
		k, err := h.ReadAt(ctx, b, 0)
		done <- result{b[:k], err}
	}()
	<-arrived
	srv.put("big/0", next, `"v2"`)
	if _, _, err := tree.src.GetRange(ctx, "other", 0, 1); err != nil || !tree.ignoresRange() {
		t.Fatalf("the tree did not see the source ignore Range: %v", err)
	}
	buf := make([]byte, 1<<20)
	off := int64(4 << 20)
	k, err := h.ReadAt(ctx, buf, off)
	sawNext := err == nil && bytes.Equal(buf[:k], next[off:off+int64(k)])
	if err == nil && !sawNext && !bytes.Equal(buf[:k], old[off:off+int64(k)]) {
		t.Fatalf("read at %d: %d bytes of neither version", off, k)
	}
	close(release)
	r := <-done
	if r.err == nil && len(r.b) > 0 && bytes.Equal(r.b, old[:len(r.b)]) && sawNext {
		t.Fatalf("the handle served the rewritten chunk, then %d bytes of the version opened", len(r.b))
	}
	if r.err == nil && !bytes.Equal(r.b, old[:len(r.b)]) && !bytes.Equal(r.b, next[:len(r.b)]) {
		t.Fatalf("first read: %d bytes of neither version", len(r.b))
	}
}

// provenThenIgnored serves old as big/0 (ETag "v1") and a small "other"
// from srv, whose handler must ignore Range for /other, at url; opens
// big/0 in parts and reads its first MiB, which proves the window's
// version; then reads "other", from which the tree learns that the source
// ignores Range. It returns the handle and a 1 MiB buffer.
func provenThenIgnored(t *testing.T, srv *objectServer, url string, old []byte) (*Handle, []byte) {
	t.Helper()
	ctx := context.Background()
	srv.put("big/0", old, `"v1"`)
	srv.put("other", []byte("x"), `"o"`)
	tree := treeOver(t, url, fetcher.Options{HTTP: fetcher.HTTPOptions{MaxAttempts: 1}})
	h := openBig(t, tree)
	buf := make([]byte, 1<<20)
	if k, err := h.ReadAt(ctx, buf, 0); err != nil || h.obj == nil || !bytes.Equal(buf[:k], old[:k]) {
		t.Fatalf("first read: %d bytes, %v; want the chunk's in parts", k, err)
	}
	if _, _, err := tree.src.GetRange(ctx, "other", 0, 1); err != nil || !tree.ignoresRange() {
		t.Fatalf("the tree did not see the source ignore Range: %v", err)
	}
	return h, buf
}
