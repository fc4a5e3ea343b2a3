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
				if _, _, ok := a.Answer(ctx, key, 64<<20); ok {
					t.Fatal("an answer in an empty engine")
				}
				got := make(chan []byte, 1)
				go func() {
					v, rec, ok := b.Answer(ctx, key, 64<<20)
					if !ok || string(rec) != "rec" {
						v = []byte("missed")
					}
					got <- v
				}()
				testenv.WaitBlocked(t, "github.com/volfs/volfs/cache/shared.(*Tier).waitValue", 1)
				a.Put(key, []byte("rec"), val)
				if v := <-got; !bytes.Equal(v, val) {
					t.Errorf("%d bytes: the waiter got %d bytes (%.10q), want the holder's answer", len(val), len(v), v)
				}
				if _, _, ok := b.Answer(ctx, key, int64(len(val))-1); ok && len(val) > 0 {
					t.Errorf("%d bytes: served under a bound of one byte less", len(val))
				}
			}
			if st := b.Stats(); st.AnswerHits < 3 || st.Errors != 0 {
				t.Errorf("waiter %+v: want 3 answers, no errors", st)
			}

			other, _ := open(t, Options{URL: u, Secret: []byte("other"), Timeout: time.Second})
			if _, _, ok := other.Answer(ctx, "src\x00\x00get\x00infob", 64<<20); ok {
				t.Error("an answer signed with another secret was taken")
			}
			plain, _ := open(t, Options{URL: u, Timeout: time.Second})
			if _, _, ok := plain.Answer(ctx, "src\x00\x00get\x00infob", 64<<20); ok {
				t.Error("a tier without a secret took an answer")
			}
			if st := plain.Stats(); st.LeasesWon != 0 {
				t.Errorf("a tier without a secret took %d leases", st.LeasesWon)
			}
		})
	}
}
