package disk

import (
	"errors"
	"fmt"
	"testing"
)

// TestHold: after Hold, entries written before it are evicted to make
// room, entries written or read after it never are: a Put that needs their
// room fails with ErrFull and leaves every held entry readable.
func TestHold(t *testing.T) {
	c := open(t, t.TempDir(), 4<<10)
	val := make([]byte, 900)
	accept := func([]byte) error { return nil }
	put := func(k string) error { return c.Put(k, []byte("id"), val) }
	for i := range 3 {
		if err := put(fmt.Sprintf("old%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Hold()
	if _, ok := c.Get("old0", int64(len(val)), accept); !ok { // read: held
		t.Fatal("old0 not kept before Hold")
	}
	var kept []string
	for i := range 8 {
		k := fmt.Sprintf("new%d", i)
		err := put(k)
		if err == nil {
			kept = append(kept, k)
			continue
		}
		if !errors.Is(err, ErrFull) {
			t.Fatalf("put %s: got %v, want ErrFull", k, err)
		}
	}
	if len(kept) == 0 || len(kept) == 8 {
		t.Fatalf("kept %d of 8 new entries, want some but not all", len(kept))
	}
	for _, k := range append(kept, "old0") {
		if _, ok := c.Get(k, int64(len(val)), accept); !ok {
			t.Errorf("%s: held, evicted", k)
		}
	}
	for _, k := range []string{"old1", "old2"} {
		if _, ok := c.Get(k, int64(len(val)), accept); ok {
			t.Errorf("%s: not held, still there although the new entries needed its room", k)
		}
	}
}
