package keep

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// memFleet is a fleet's tier in memory: answers by key.
type memFleet struct {
	mu   sync.Mutex
	vals map[string][2][]byte // GUARDED_BY(mu); key -> record, value
}

func (m *memFleet) Answer(_ context.Context, key string, limit int64) ([]byte, []byte, string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	if !ok || int64(len(v[1])) > limit {
		return nil, nil, "", false
	}
	return v[1], v[0], "", true
}

func (m *memFleet) PutAnswer(key, _ string, rec, val []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals == nil {
		m.vals = make(map[string][2][]byte)
	}
	m.vals[key] = [2][]byte{rec, val}
}

func (m *memFleet) ReleaseAnswer(string, string) {}

// age moves the verification time of every answer back by d.
func (m *memFleet) age(t *testing.T, d time.Duration) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.vals {
		rec, ok := DecodeFields(v[0])
		n := len(rec)
		if !ok || n == 0 || rec[n-1].Key != verifiedField {
			t.Fatalf("%q: record %q", k, v[0])
		}
		ns, err := strconv.ParseInt(string(rec[n-1].ID), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Unix(0, ns).Add(-d)
		m.vals[k] = [2][]byte{verifiedRecord(at, rec[:n-1]...), v[1]}
	}
}

// bucket is an origin of one metadata object, "info", with an identity,
// a missing ".zattrs", and a root listing that names "info" with its
// identity; it counts its requests.
type bucket struct {
	fetcher.Fetcher
	requests atomic.Int64
}

func (b *bucket) Get(_ context.Context, key string, _ int64) (fetcher.Object, error) {
	b.requests.Add(1)
	if key == "info" {
		return fetcher.Object{Data: []byte(`{"scales": []}`), ContentEncoding: "gzip", ID: "etag-1"}, nil
	}
	return fetcher.Object{}, fetcher.ErrNotExist
}

func (b *bucket) List(_ context.Context, key string) ([]fetcher.Entry, error) {
	b.requests.Add(1)
	if key != "" {
		return nil, fetcher.ErrNotExist
	}
	return []fetcher.Entry{{Name: "info", Size: 14, ID: "etag-1"}, {Name: "s0", IsDir: true, Size: -1}}, nil
}

func (b *bucket) String() string { return "bucket://" }

// ask makes s read what a mount reads: the root's listing, "info" and the
// missing ".zattrs"; it fails the test unless each is the origin's answer.
func ask(t *testing.T, s *Source) time.Time {
	t.Helper()
	ctx := context.Background()
	entries, at, err := s.ListAt(ctx, "")
	if err != nil || len(entries) != 2 || entries[0].ID != "etag-1" {
		t.Fatalf("list: %v, %v", entries, err)
	}
	obj, err := s.Get(ctx, "info", 1<<20)
	if err != nil || string(obj.Data) != `{"scales": []}` || obj.ID != "etag-1" || obj.ContentEncoding != "gzip" {
		t.Fatalf("get info: %+v, %v", obj, err)
	}
	if _, err := s.Get(ctx, ".zattrs", 1<<20); !errors.Is(err, fetcher.ErrNotExist) {
		t.Fatalf("get .zattrs: %v, want not found", err)
	}
	if _, err := s.List(ctx, "nope"); !errors.Is(err, fetcher.ErrNotExist) {
		t.Fatalf("list nope: %v, want not found", err)
	}
	return at
}

// TestFleetAnswers: a Source takes the listings, metadata and absences
// another node of the fleet read from the origin when that reading is
// fresh by its own rule (within the TTL; with 0, since it started), and
// learns the identities they name as of then; otherwise it asks the
// origin.
func TestFleetAnswers(t *testing.T) {
	tests := []struct {
		name      string
		ttl       time.Duration
		age       time.Duration // moved back, after the first node read
		startLate bool          // the second Source starts after the first read
		wantAsked bool          // the second Source asks the origin
	}{
		{"fresh", time.Minute, 0, true, false},
		{"within the TTL", time.Minute, 50 * time.Second, true, false},
		{"past the TTL", time.Minute, 70 * time.Second, true, true},
		{"ttl 0, read since the Source started", 0, 0, false, false},
		{"ttl 0, read before the Source started", 0, 0, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fleet := &memFleet{}
			origin := &bucket{}
			var second *Source
			if !tc.startLate {
				second = New(origin, Options{TTL: tc.ttl, Fleet: fleet})
			}
			first := New(origin, Options{TTL: tc.ttl, Fleet: fleet})
			ask(t, first)
			if n := origin.requests.Load(); n != 4 {
				t.Fatalf("the first node asked the origin %d times, want 4", n)
			}
			fleet.age(t, tc.age)
			if tc.startLate {
				second = New(origin, Options{TTL: tc.ttl, Fleet: fleet})
			}
			at := ask(t, second)
			asked := origin.requests.Load() - 4
			if tc.wantAsked && asked != 4 || !tc.wantAsked && asked != 0 {
				t.Errorf("the second node asked the origin %d times, want %v", asked, map[bool]int{true: 4, false: 0}[tc.wantAsked])
			}
			if !tc.wantAsked {
				if got := second.Stats().FleetAnswers.Load(); got != 4 {
					t.Errorf("fleet answers: %d, want 4", got)
				}
				if since := time.Since(at); since < tc.age {
					t.Errorf("the listing is said to be %v old, want at least %v (when the first node read it)", since, tc.age)
				}
				// The listing named info's identity: its check asks nobody.
				if err := second.Check(context.Background(), "info", "etag-1"); err != nil || origin.requests.Load() != 4 {
					t.Errorf("check of info: %v, %d requests; want nil and none", err, origin.requests.Load()-4)
				}
			}
		})
	}
}

// TestFleetListingOutdated: a node that learnt a file's identity after the
// fleet's listing of its directory was read, and learnt another one than
// the listing names, asks the origin for the listing rather than build
// files from the older one; a listing that agrees with what it learnt is
// taken.
func TestFleetListingOutdated(t *testing.T) {
	for _, tc := range []struct {
		learnt    fetcher.Identity
		wantAsked bool
	}{{"etag-2", true}, {"etag-1", false}} {
		t.Run(string(tc.learnt), func(t *testing.T) {
			fleet := &memFleet{}
			origin := &bucket{}
			first := New(origin, Options{TTL: time.Minute, Fleet: fleet})
			if _, _, err := first.ListAt(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			fleet.age(t, 10*time.Second)
			second := New(origin, Options{TTL: time.Minute, Fleet: fleet})
			second.Learn("info", tc.learnt) // now: after the listing was read
			before := origin.requests.Load()
			if _, _, err := second.ListAt(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			if asked := origin.requests.Load() > before; asked != tc.wantAsked {
				t.Errorf("the node knowing info as %s asked the origin: %v, want %v", tc.learnt, asked, tc.wantAsked)
			}
		})
	}
}

// TestFleetListingRoundTrip: a listing shared with the fleet keeps its
// identities.
func TestFleetListingRoundTrip(t *testing.T) {
	entries := []fetcher.Entry{{Name: "a", Size: 3, ID: "e1"}, {Name: "d", IsDir: true, Size: -1}, {Name: "b", Size: 0}}
	b, ok := encodeEntriesIDs(entries, 1<<20)
	got, ok2 := decodeEntries(b, true)
	if !ok || !ok2 || !slices.Equal(got, entries) {
		t.Errorf("got %v (%v %v), want %v", got, ok, ok2, entries)
	}
	if e, ok := decodeEntries(b[:len(b)-1], true); ok {
		t.Errorf("cut one byte short: accepted as %v", e)
	}
	// An entry alone above the bound is refused, not written without
	// its name.
	long := []fetcher.Entry{{Name: strings.Repeat("n", 100), Size: 1, ID: "e"}}
	if b, ok := encodeEntriesIDs(long, 50); ok {
		t.Errorf("an entry of more than 50 bytes encoded under a bound of 50: %q", b)
	}
}
