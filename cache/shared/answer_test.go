package shared

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// TestAnswer: an origin's answer (a value of no size known in advance) is
// kept and read back whole on a real redis-server and memcached, above
// memcached's item limit too, under a bound and not above it; a node
// waits for the node that holds its lease; a tier without the secret, or
// with another, answers nothing, and one without a secret keeps nothing.
func TestAnswer(t *testing.T) {
	for _, kind := range []string{"redis", "memcache"} {
		t.Run(kind, func(t *testing.T) {
			var u string
			if kind == "redis" {
				u = "redis://" + testenv.StartRedis(t).Addr
			} else {
				u = "memcache://" + testenv.StartMemcached(t).Addr
			}
			opts := Options{URL: u, Secret: []byte("fleet"), Timeout: time.Second}
			a, _ := open(t, opts)
			b, _ := open(t, opts)
			ctx := context.Background()
			for i, val := range [][]byte{nil, []byte(`{"scales": []}`), random(3 << 20)} {
				key := "src\x00\x00get\x00info" + string(rune('a'+i))
				_, _, lease, ok := a.Answer(ctx, key, 64<<20)
				if ok || lease == "" {
					t.Fatalf("an answer in an empty engine (%v), or no lease (%q)", ok, lease)
				}
				got := make(chan []byte, 1)
				go func() {
					v, rec, _, ok := b.Answer(ctx, key, 64<<20)
					if !ok || string(rec) != "rec" {
						v = []byte("missed")
					}
					got <- v
				}()
				testenv.WaitBlocked(t, "github.com/volfs/volfs/cache/shared.(*Tier).waitValue", 1)
				a.PutAnswer(key, lease, []byte("rec"), val)
				if v := <-got; !bytes.Equal(v, val) {
					t.Errorf("%d bytes: the waiter got %d bytes (%.10q), want the holder's answer", len(val), len(v), v)
				}
				if _, _, _, ok := b.Answer(ctx, key, int64(len(val))-1); ok && len(val) > 0 {
					t.Errorf("%d bytes: served under a bound of one byte less", len(val))
				}
			}
			if st := b.Stats(); st.AnswerHits < 3 || st.Errors != 0 {
				t.Errorf("waiter %+v: want 3 answers, no errors", st)
			}

			other, _ := open(t, Options{URL: u, Secret: []byte("other"), Timeout: time.Second})
			if _, _, _, ok := other.Answer(ctx, "src\x00\x00get\x00infob", 64<<20); ok {
				t.Error("an answer signed with another secret was taken")
			}
			plain, _ := open(t, Options{URL: u, Timeout: time.Second})
			if _, _, _, ok := plain.Answer(ctx, "src\x00\x00get\x00infob", 64<<20); ok {
				t.Error("a tier without a secret took an answer")
			}
			if st := plain.Stats(); st.LeasesWon != 0 {
				t.Errorf("a tier without a secret took %d leases", st.LeasesWon)
			}
		})
	}
}

// TestAnswerLeasePerHolder: the lease an Answer's miss takes is its
// caller's. Another caller in the same process that took none (it had a
// stale answer, or the origin was offline) and then keeps or drops its
// own answer leaves the holder's lease alone: a node waiting for the
// holder goes on waiting instead of going to the origin too.
func TestAnswerLeasePerHolder(t *testing.T) {
	u := "redis://" + testenv.StartRedis(t).Addr
	opts := Options{URL: u, Secret: []byte("fleet"), Timeout: time.Second, LeaseTTL: time.Minute}
	a, _ := open(t, opts)
	ctx := context.Background()
	key := "src\x00\x00get\x00info"
	ek := engineKey(key)
	_, _, lease, ok := a.Answer(ctx, key, 1<<20)
	if ok || lease == "" {
		t.Fatalf("an answer in an empty engine (%v), or no lease (%q)", ok, lease)
	}
	// Callers of this process that hold no lease, or another's token.
	a.ReleaseAnswer(key, "")
	a.ReleaseAnswer(key, "not-the-holder")
	if st, err := a.eng.leased(ctx, ek); st != leaseHeld || err != nil {
		t.Fatalf("after a release by a caller without the lease: %v, %v; want the lease held", st, err)
	}
	a.PutAnswer(key, "", []byte("rec"), []byte("other"))
	if st, err := a.eng.leased(ctx, ek); st != leaseHeld || err != nil {
		t.Fatalf("after a put by a caller without the lease: %v, %v; want the lease held", st, err)
	}
	a.mu.Lock()
	held := a.held[ek] != nil
	a.mu.Unlock()
	if !held {
		t.Fatal("the holder's lease is no longer renewed after another caller's release")
	}
	// The holder lets it go.
	a.ReleaseAnswer(key, lease)
	if st, err := a.eng.leased(ctx, ek); st == leaseHeld || err != nil {
		t.Errorf("after the holder's release: %v, %v; want the lease let go", st, err)
	}
}
