package keep

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// versioned is a source whose every object is the version "v2"; it counts
// its Stats.
type versioned struct {
	fetcher.Fetcher
	stats atomic.Int64
}

func (v *versioned) Stat(context.Context, string) (int64, fetcher.Identity, error) {
	v.stats.Add(1)
	return 1, "v2", nil
}

func (v *versioned) String() string { return "versioned://" }

// TestCheckCopyVerified: a copy's verification by the fleet stands in for
// a Stat only when it is fresh by the Source's TTL (with 0: made since the
// Source started), not from the future, not older than what the Source
// learnt itself, and only for a copy someone vouches for.
func TestCheckCopyVerified(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		ttl       time.Duration
		learnt    fetcher.Identity // learnt by the Source before the check, if not empty
		copy      Copy
		wantStats int64
		changed   bool
	}{
		{"fresh", time.Minute, "", Copy{Verified: now.Add(-10 * time.Second)}, 0, false},
		{"past the TTL", time.Minute, "", Copy{Verified: now.Add(-2 * time.Minute)}, 1, true},
		{"from the future", time.Minute, "", Copy{Verified: now.Add(time.Minute)}, 1, true},
		{"none", time.Minute, "", Copy{}, 1, true},
		{"unvouched", time.Minute, "", Copy{Verified: now, Unvouched: true}, 1, true},
		{"learnt later", time.Minute, "v2", Copy{Verified: now.Add(-10 * time.Second)}, 0, true},
		{"ttl 0, before the Source", 0, "", Copy{Verified: now.Add(-time.Second)}, 1, true},
		{"ttl 0, since the Source", 0, "", Copy{Verified: now.Add(time.Second)}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &versioned{}
			s := New(src, Options{TTL: tc.ttl})
			s.start = now
			if tc.learnt != "" {
				s.Learn("k", tc.learnt)
			}
			err := s.CheckCopy(context.Background(), "k", "v1", tc.copy)
			if got := errors.Is(err, ErrChanged); got != tc.changed || (err != nil && !got) {
				t.Errorf("CheckCopy: %v; want changed %v", err, tc.changed)
			}
			if n := src.stats.Load(); n != tc.wantStats {
				t.Errorf("%d Stats, want %d", n, tc.wantStats)
			}
			if tc.wantStats == 0 && !tc.changed {
				// The verification is learnt: the next check of the
				// object, of a copy of this machine's own, asks nobody.
				if err := s.Check(context.Background(), "k", "v1"); err != nil || src.stats.Load() != 0 {
					t.Errorf("Check after a fresh verification: %v, %d Stats; want nil, 0", err, src.stats.Load())
				}
			}
		})
	}
}

// listed is versioned with a listing that names each object's version.
type listed struct{ versioned }

func (l *listed) List(context.Context, string) ([]fetcher.Entry, error) {
	return []fetcher.Entry{{Name: "a", Size: 1, ID: "v2"}, {Name: "b", Size: 1, ID: "v2"}, {Name: "c", Size: 1}, {Name: "d", IsDir: true, Size: -1}}, nil
}

// TestListLearns: a listing that names versions (S3, gs://) stands for
// the Stats of the objects it names, within the TTL; an object it names
// without a version is still asked about.
func TestListLearns(t *testing.T) {
	src := &listed{}
	s := New(src, Options{TTL: time.Minute})
	if _, err := s.List(context.Background(), "dir"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Check(ctx, "dir/a", "v2"); err != nil {
		t.Errorf("dir/a, listed as v2: %v", err)
	}
	if err := s.Check(ctx, "dir/b", "v1"); !errors.Is(err, ErrChanged) {
		t.Errorf("dir/b, listed as v2, copy of v1: %v; want ErrChanged", err)
	}
	if n := src.stats.Load(); n != 0 {
		t.Errorf("%d Stats for objects the listing named, want 0", n)
	}
	if err := s.Check(ctx, "dir/c", "v2"); err != nil || src.stats.Load() != 1 {
		t.Errorf("dir/c, listed without a version: %v, %d Stats; want nil, 1", err, src.stats.Load())
	}
}
