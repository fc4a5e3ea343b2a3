package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// statCounter counts the Stats of a fetcher.
type statCounter struct {
	fetcher.Fetcher
	stats atomic.Int64
}

func (f *statCounter) Stat(ctx context.Context, key string) (int64, fetcher.Identity, error) {
	f.stats.Add(1)
	return f.Fetcher.Stat(ctx, key)
}

// TestDiskIdentityTTL: a disk entry is checked against its object's
// identity, learnt once per mount with --metadata-ttl 0 (a rewrite after
// the first check is not seen until a remount) and again at each disk hit
// once the TTL has passed (the rewrite is seen at once). With no room in
// memory, every read is a disk hit. Past the TTL, each read checks the
// layer's info too (metawatch.go), and the read that reloads the
// rewritten chunk checks it once more, asking the origin: three Stats
// more here, the last not counted as a check of a kept copy's.
func TestDiskIdentityTTL(t *testing.T) {
	const key = "layer/s0/0-4_0-4_0-2"
	rewritten := bytes.Repeat([]byte{0xee}, len(chunk0()))
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		want      []byte // the second read, after the rewrite
		wantStats int64
		// wantChecks counts the Stats of checks (keep.Source.Current).
		wantChecks int64
	}{
		{"once per mount", 0, chunk0(), 1, 1},
		{"every hit past the TTL", time.Nanosecond, rewritten, 5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, d, src := diskSource(t, map[string][]byte{"layer/info": []byte(testInfo), key: chunk0()})
			fill, err := New(context.Background(), src, Options{Disk: cache.NewDisk(d), CacheBytes: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readAll(t, fill, key); err != nil || !bytes.Equal(got, chunk0()) {
				t.Fatalf("first mount: %v, %v", got, err)
			}
			fill.Close() // waits for the disk write

			counted := &statCounter{Fetcher: src}
			tree, err := New(context.Background(), counted, Options{Disk: cache.NewDisk(d), CacheBytes: 1, MetadataTTL: tc.ttl})
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			if got, err := readAll(t, tree, key); err != nil || !bytes.Equal(got, chunk0()) {
				t.Fatalf("remount: %v, %v", got, err)
			}
			if err := os.WriteFile(filepath.Join(dir, key), rewritten, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := readAll(t, tree, key); err != nil || !bytes.Equal(got, tc.want) {
				t.Errorf("after the rewrite: got %v, %v; want %v", got, err, tc.want)
			}
			if got := counted.stats.Load(); got != tc.wantStats {
				t.Errorf("Stats: got %d, want %d", got, tc.wantStats)
			}
			// The checks' Stats are counted (volfs_keep_check_requests_total).
			if got := tree.origin.Stats().CheckRequests.Load(); got != tc.wantChecks {
				t.Errorf("check requests counted: got %d, want %d", got, tc.wantChecks)
			}
			if s := d.Stats(); s.Hits < 1 {
				t.Errorf("disk cache: %+v, want a hit", s)
			}
		})
	}
}

// TestIdentityRecord: a load's identity record keeps each object once, and
// none when an object was read with two identities or an unknown one.
func TestIdentityRecord(t *testing.T) {
	var ids identities
	tree, _ := newTree(t, layerFiles(t), Options{})
	ids.init(tree)
	for _, tc := range []struct {
		name string
		objs []seen
		ok   bool
		want []seen
	}{
		{"one", []seen{{Key: "a", ID: "x"}}, true, []seen{{Key: "a", ID: "x"}}},
		{"sorted, once", []seen{{Key: "b", ID: "y"}, {Key: "a", ID: "x"}, {Key: "b", ID: "y"}}, true, []seen{{Key: "a", ID: "x"}, {Key: "b", ID: "y"}}},
		{"changed while read", []seen{{Key: "a", ID: "x"}, {Key: "a", ID: "z"}}, false, nil},
		{"unknown", []seen{{Key: "a", ID: "x"}, {Key: "b", ID: ""}}, false, nil},
		{"absent sibling", []seen{{Key: "k", ID: absent}, {Key: "k.gz", ID: "x"}}, true, []seen{{Key: "k", ID: absent}, {Key: "k.gz", ID: "x"}}},
	} {
		rec, ok := ids.record(tc.objs, time.Time{})
		if ok != tc.ok {
			t.Errorf("%s: kept %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		got, dok := keep.DecodeFields(rec)
		if !dok || len(got) != len(tc.want) {
			t.Errorf("%s: record decodes to %v, %v; want %v", tc.name, got, dok, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: record %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}
