package keep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// TestEntriesRoundTrip: a listing kept on disk reads back as it was; a
// damaged one is refused.
func TestEntriesRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		entries []fetcher.Entry
	}{
		{"empty", nil},
		{"files and directories", []fetcher.Entry{{Name: "info", Size: 312}, {Name: "s0", IsDir: true, Size: -1}, {Name: "empty", Size: 0}}},
		{"long name", []fetcher.Entry{{Name: string(make([]byte, 300)), Size: 1 << 40}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := encodeEntries(tc.entries, 64<<20)
			if !ok {
				t.Fatal("not encoded")
			}
			got, ok := decodeEntries(b, false)
			if !ok || !slices.Equal(got, tc.entries) {
				t.Errorf("got %v, %v; want %v", got, ok, tc.entries)
			}
			if len(b) > 0 {
				if _, ok := decodeEntries(b[:len(b)-1], false); ok && tc.entries[len(tc.entries)-1].Size+1 < 0x80 {
					t.Errorf("cut one byte short: accepted")
				}
			}
		})
	}
	for _, bad := range [][]byte{{5, 'a'}, {1, 'a'}, {1, 'a', 0}, {1, 'a', 0, 0xff}} {
		if e, ok := decodeEntries(bad, false); ok {
			t.Errorf("%v: accepted as %v", bad, e)
		}
	}
}

// flaky is a source whose keys in down fail transiently; every other key
// answers, as a missing object.
type flaky struct {
	fetcher.Fetcher
	mu   sync.Mutex
	down map[string]bool // keys, and directories ("" the root), that fail
}

func (f *flaky) fails(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[key]
}

func (f *flaky) answer(key string) error {
	if f.fails(key) {
		return fmt.Errorf("503: %w", fetcher.ErrTransient)
	}
	return fmt.Errorf("404: %w", fetcher.ErrNotExist)
}

func (f *flaky) Stat(_ context.Context, key string) (int64, fetcher.Identity, error) {
	return 0, "", f.answer(key)
}

func (f *flaky) List(_ context.Context, key string) ([]fetcher.Entry, error) {
	if f.fails(key) {
		return nil, fmt.Errorf("503: %w", fetcher.ErrTransient)
	}
	return nil, nil
}

func (f *flaky) String() string { return "flaky://" }

// TestOffline: one key failing alone, with its directory answering, does
// not take the origin offline; its directory failing too does, as do
// three keys failing in a row; the first answer ends the spell.
func TestOffline(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		down    []string
		checks  []string
		offline bool
	}{
		{"one key", []string{"s0/a"}, []string{"s0/a", "s0/a"}, false},
		{"its directory too", []string{"s0/a", "s0"}, []string{"s0/a"}, true},
		{"a key at the root, root down", []string{"info", ""}, []string{"info"}, true},
		{"three keys", []string{"s0/a", "s0/b", "s0/c"}, []string{"s0/a", "s0/b", "s0/c"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{down: map[string]bool{}}
			for _, k := range tc.down {
				f.down[k] = true
			}
			s := New(f, Options{Log: slog.New(slog.DiscardHandler)})
			var err error
			for _, k := range tc.checks {
				err = s.Check(ctx, k, "v1")
			}
			if got := s.Offline(); got != tc.offline {
				t.Fatalf("offline %v after checks of %v, want %v", got, tc.checks, tc.offline)
			}
			if tc.offline != (err == nil) {
				t.Errorf("last check: %v; want nil exactly when offline", err)
			}
			if !tc.offline && !errors.Is(err, fetcher.ErrTransient) {
				t.Errorf("check of a failing key: %v, want the transient failure", err)
			}
			if tc.offline {
				if err := s.Check(ctx, "elsewhere", "v1"); err != nil {
					t.Errorf("check while offline: %v, want nil (unchecked)", err)
				}
				// The first answer of the origin ends the spell.
				s.Stat(ctx, "elsewhere")
				if s.Offline() {
					t.Errorf("offline after the origin answered")
				}
				if err := s.Check(ctx, "elsewhere", "v1"); !errors.Is(err, ErrChanged) {
					t.Errorf("check of an absent object after the spell: %v, want ErrChanged", err)
				}
			}
		})
	}
}

// TestChanges: an identity learnt counts as a change only when it replaces
// another of its key, whichever way it was learnt (a request, a listing).
func TestChanges(t *testing.T) {
	s := New(&flaky{down: map[string]bool{}}, Options{Log: slog.New(slog.DiscardHandler)})
	steps := []struct {
		key  string
		id   fetcher.Identity
		want uint64
	}{
		{"a", "v1", 0}, {"a", "v1", 0}, {"b", "v1", 0}, {"a", "v2", 1}, {"a", Absent, 2}, {"a", Absent, 2}, {"a", "", 2},
	}
	for _, st := range steps {
		s.Learn(st.key, st.id)
		if got := s.Changes(); got != st.want {
			t.Fatalf("after learning %s is %q: %d changes, want %d", st.key, st.id, got, st.want)
		}
	}
	s.learnListing("", []fetcher.Entry{{Name: "b", ID: "v2"}}, time.Now())
	if got := s.Changes(); got != 3 {
		t.Errorf("after a listing named b's new version: %d changes, want 3", got)
	}
}
