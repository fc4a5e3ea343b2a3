package mem

import (
	"bytes"
	"testing"
)

func TestClasses(t *testing.T) {
	for n := MinPooled; n < 64<<20; n += n/7 + 1 {
		lo, hi := classAtMost(n), classAtLeast(n)
		if lo > n || hi < n || hi > n+n/4 {
			t.Fatalf("n=%d: classes %d..%d", n, lo, hi)
		}
		if classAtMost(hi) != hi || classAtLeast(lo) != lo {
			t.Fatalf("n=%d: %d and %d are not fixed points", n, lo, hi)
		}
	}
}

func TestGetPutReuses(t *testing.T) {
	b := Get(3<<20 + 12345)
	if len(b) != 3<<20+12345 {
		t.Fatalf("len %d", len(b))
	}
	b[0] = 7
	Put(b)
	c := Get(3<<20 + 100)
	if &c[0] != &b[0] {
		t.Fatal("a buffer of the same class was not reused")
	}
	Put(c)
	// A request larger than the class is never served by it.
	d := Get(cap(c[:cap(c)]) + 1)
	if &d[0] == &c[0] || len(d) != cap(c[:cap(c)])+1 {
		t.Fatal("a buffer too small was handed out")
	}
}

func TestPutBounded(t *testing.T) {
	var held [][]byte
	for range 2 * MaxPooled / (4 << 20) {
		held = append(held, Get(4<<20))
	}
	for _, b := range held {
		Put(b)
	}
	pool.mu.Lock()
	n := pool.bytes
	pool.mu.Unlock()
	if n > MaxPooled {
		t.Fatalf("pool holds %d bytes, more than %d", n, MaxPooled)
	}
}

func TestMakeIsZeroAndPrefaultKeepsContents(t *testing.T) {
	b := Make(5<<20 + 3)
	if len(b) != 5<<20+3 || !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("Make did not return zeroed memory of the asked length")
	}
	for i := range b {
		b[i] = byte(i * 31)
	}
	want := bytes.Clone(b)
	prefault(b)
	prefault(b[1 : len(b)-1])
	if !bytes.Equal(b, want) {
		t.Fatal("prefault changed the contents")
	}
}

func TestOverlap(t *testing.T) {
	b := make([]byte, 100, 200)
	cases := []struct {
		a, b []byte
		want bool
	}{
		{b, b, true},
		{b[10:20], b[15:30], true},
		{b[:10], b[10:20], true}, // b[:10] has capacity past 10
		{b[:10:10], b[10:20], false},
		{b, b[100:150], true}, // within b's capacity
		{b, make([]byte, 10), false},
		{nil, b, false},
	}
	for i, c := range cases {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("case %d: Overlap = %v, want %v", i, got, c.want)
		}
	}
}

// TestPoisonFills: with poisoning on, a buffer given back and taken again
// is PoisonByte to its capacity's last byte, whatever its length (fill
// doubles its copies: a length that is no power of two ends short of one).
func TestPoisonFills(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 4096 + 5, MinPooled + 12345} {
		b := make([]byte, n)
		fill(b)
		if c := bytes.Count(b, []byte{PoisonByte}); c != n {
			t.Errorf("fill of %d bytes: %d are PoisonByte", n, c)
		}
	}
	Poison(true)
	defer Poison(false)
	b := Get(MinPooled + 100)
	for i := range b[:cap(b)] {
		b[:cap(b)][i] = 1
	}
	Put(b)
	g := Get(MinPooled + 100)
	if c := bytes.Count(g[:cap(g)], []byte{PoisonByte}); c != cap(g) {
		t.Errorf("a buffer taken again with poisoning on: %d of its %d bytes are PoisonByte", c, cap(g))
	}
}
