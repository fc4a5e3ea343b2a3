package fs

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/cache"

	"github.com/volfs/volfs/internal/testenv"
)

// TestPooledBuffersNeverShared reads chunks whose stored objects are read
// into pooled buffers (internal/mem) through every ownership case: a raw
// chunk whose decoded bytes are its stored bytes (which must never go back
// to the pool), a ".gz" chunk whose transport gzip is removed into a
// buffer of its own, and a zarr zlib chunk decoded by a codec. Chunks are
// large enough to be pooled, the cache holds about one of them so that
// every round loads again, and many readers run at once: a buffer given
// back while the cache or a reader still held it would show as wrong
// bytes.
func TestPooledBuffersNeverShared(t *testing.T) {
	const n = 512 << 10 // 64x64x128 uint8
	chunk := func(seed int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*seed + i>>9)
		}
		return b
	}
	zl := func(b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	info := `{"@type": "neuroglancer_multiscale_volume", "data_type": "uint8", "num_channels": 1,
 "type": "image", "scales": [{"key": "s0", "size": [64, 64, 512], "voxel_offset": [0, 0, 0],
 "resolution": [1, 1, 1], "chunk_sizes": [[64, 64, 128]], "encoding": "raw"}]}`
	files := map[string][]byte{
		"pre/info": []byte(info),
		"z/.zarray": []byte(`{"zarr_format": 2, "shape": [512, 64, 64], "chunks": [128, 64, 64], "dtype": "|u1",
 "compressor": {"id": "zlib", "level": 1}, "fill_value": 0, "filters": null, "order": "C"}`),
	}
	want := map[string][]byte{}
	for i := range 4 {
		c := chunk(i + 3)
		name := fmt.Sprintf("pre/s0/0-64_0-64_%d-%d", i*128, (i+1)*128)
		if i%2 == 0 {
			files[name] = c // raw: stored bytes are the chunk
		} else {
			files[name+".gz"] = gz(t, c)
		}
		want[name] = c
		zc := chunk(i + 11)
		files[fmt.Sprintf("z/%d.0.0", i)] = zl(zc)
		want[fmt.Sprintf("z/%d.0.0", i)] = zc
	}
	tree, _ := newTree(t, files, Options{CacheBytes: n + n/2, Workers: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				for name, w := range want {
					if (round+r)%3 == 0 && name[0] == 'z' {
						continue
					}
					node, err := tree.Resolve(context.Background(), name)
					if err != nil {
						errs <- err
						return
					}
					got := make([]byte, n)
					k, err := node.(File).ReadAt(context.Background(), got, 0)
					if err != nil || k != n || !bytes.Equal(got, w) {
						errs <- fmt.Errorf("%s: read %d bytes, err %v, equal %v", name, k, err, bytes.Equal(got[:k], w[:k]))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLoadSecondsExcludeThrottleWait checks that the time a prefetch from
// a local source waits for a CPU slot, which it takes before the
// load's clock starts, is neither counted in the load's time nor taken off
// it: the load's seconds lie between zero (the
// volfs_chunk_load_seconds_total counter never goes down) and the time
// from the slot's release to the load's end.
func TestLoadSecondsExcludeThrottleWait(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	tree, _ := newTree(t, layerFiles(t), Options{Workers: procs + 2})
	defer tree.Close()
	ctx := context.Background()

	// Prefetches that hold every CPU slot until told.
	hold := make(chan struct{})
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	took := make(chan struct{}, procs)
	blockers := make([]string, procs)
	for i := range blockers {
		blockers[i] = fmt.Sprintf("blocker%d", i)
	}
	tree.store.Prefetch(ctx, blockers, func(int) cache.Loader {
		return tree.store.Loader(cache.Chunk{Load: func(ctx context.Context, l *cache.Load) ([]byte, []byte, error) {
			if err := l.CPU(ctx); err != nil {
				return nil, nil, err
			}
			took <- struct{}{}
			<-hold
			return []byte{0}, nil, nil
		}})
	})
	for range procs {
		<-took
	}

	node, err := tree.Resolve(ctx, "layer/s0/0-4_0-4_0-2")
	if err != nil {
		t.Fatal(err)
	}
	f := node.(*chunkFile)
	blocked := time.Now()
	tree.store.Prefetch(ctx, []string{f.mkey}, func(int) cache.Loader { return f.loader() })
	testenv.WaitBlocked(t, "github.com/volfs/volfs/cache.(*Load).CPU", 1)
	released := time.Now()
	close(hold)
	if _, err := f.chunk(ctx); err != nil {
		t.Fatal(err)
	}
	sinceRelease := time.Since(released)

	tree.loads.mu.Lock()
	e := tree.loads.byEnc[f.a.Encoding]
	tree.loads.mu.Unlock()
	if e == nil || e.loads != 1 {
		t.Fatalf("loads of %q: got %+v, want 1", f.a.Encoding, e)
	}
	t.Logf("load %.6f s; %.6f s from the prefetch to the release of a slot; %.6f s from the release to the load's end",
		e.seconds, released.Sub(blocked).Seconds(), sinceRelease.Seconds())
	if e.seconds < 0 || e.seconds > sinceRelease.Seconds() {
		t.Errorf("load seconds: got %v, want from 0 to %v (the time since the slot was released)", e.seconds, sinceRelease.Seconds())
	}
}
