package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// gatedGets holds each Get of key until the test lets it go (release),
// whatever its context says, as an origin whose reply is already on its
// way does.
type gatedGets struct {
	fetcher.Fetcher
	key   string
	mu    sync.Mutex
	gates []chan struct{}
	n     int // Gets of key begun
}

func (g *gatedGets) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	if key == g.key {
		g.mu.Lock()
		var gate chan struct{}
		if g.n < len(g.gates) {
			gate = g.gates[g.n]
		}
		g.n++
		g.mu.Unlock()
		if gate != nil {
			<-gate
		}
		ctx = context.Background()
	}
	return g.Fetcher.Get(ctx, key, limit)
}

func (g *gatedGets) begun() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestVersionAbandonedFlight: a reader gives up on a chunk's load, which
// goes on (its object's bytes were on their way) and is kept in memory;
// a second reader meanwhile started a load of its own, which finishes
// after and is not kept (memory holds the first). The version of what
// memory holds must stay known, so that past --metadata-ttl a rewrite of
// the chunk is seen. Before, the second load's record replaced the
// first's: memory's copy had no record, was never checked, and served
// the old version for as long as it stayed in memory.
func TestVersionAbandonedFlight(t *testing.T) {
	const key = "layer/s0/0-4_0-4_0-2"
	const ttl = 100 * time.Millisecond
	rewritten := bytes.Repeat([]byte{0xee}, len(chunk0()))
	dir := writeFiles(t, map[string][]byte{"layer/info": []byte(testInfo), key: chunk0()})
	src, err := fetcher.Open(dir, fetcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedGets{Fetcher: src, key: key, gates: []chan struct{}{make(chan struct{}), make(chan struct{})}}
	tree, err := New(context.Background(), g, Options{MetadataTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	n, err := tree.Resolve(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(File)
	mkey := f.(*chunkFile).mkey

	// The first reader gives up while its load waits for the origin.
	h1, err := tree.Open(context.Background(), f, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() {
		// The reader runs the load itself, and leaves it when it gives up.
		_, err := h1.ReadAt(ctx1, make([]byte, f.Size()), 0)
		done1 <- err
	}()
	waitFor(t, "the first load's Get", func() bool { return g.begun() == 1 })
	cancel1()
	waitFor(t, "the first load abandoned", func() bool { return !tree.store.Cache().Holds(mkey) })
	// The second reader's load starts, and waits too.
	done2 := make(chan []byte, 1)
	h2, err := tree.Open(context.Background(), f, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	go func() {
		buf := make([]byte, f.Size())
		k, _ := h2.ReadAt(context.Background(), buf, 0)
		done2 <- buf[:k]
	}()
	waitFor(t, "the second load's Get", func() bool { return g.begun() == 2 })
	// The first load finishes and is kept; then the second.
	close(g.gates[0])
	<-done1
	if _, ok, _ := tree.store.Cache().Peek(mkey); !ok {
		t.Fatal("the abandoned load was not kept: the test shows nothing")
	}
	close(g.gates[1])
	if got := <-done2; !bytes.Equal(got, chunk0()) {
		t.Fatalf("the second read: %v", got)
	}

	tmp := filepath.Join(dir, "tmp")
	if err := os.WriteFile(tmp, rewritten, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, key)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl)
	h3, got := openRead(t, tree, key)
	defer h3.Close()
	if !bytes.Equal(got, rewritten) {
		t.Errorf("a read past the TTL of the rewrite: %v, want the new version", got)
	}
}
