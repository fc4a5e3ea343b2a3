package fetcher

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestCappedBody checks withBodyCap's reader: a body of exactly the bound
// reads whole; a longer one gives the bound's bytes, then ErrTooLarge at
// every later read, never a negative count.
func TestCappedBody(t *testing.T) {
	b, err := io.ReadAll(&cappedBody{ReadCloser: io.NopCloser(strings.NewReader("abcd")), max: 4})
	if err != nil || string(b) != "abcd" {
		t.Errorf("a body of the bound: %q, %v", b, err)
	}
	c := &cappedBody{ReadCloser: io.NopCloser(strings.NewReader("abcdef")), max: 4}
	b, err = io.ReadAll(c)
	if !errors.Is(err, ErrTooLarge) || string(b) != "abcd" {
		t.Errorf("a longer body: %q, %v; want the bound's bytes and %v", b, err, ErrTooLarge)
	}
	for range 3 {
		if n, err := c.Read(make([]byte, 8)); n != 0 || !errors.Is(err, ErrTooLarge) {
			t.Errorf("a read after the bound: %d, %v", n, err)
		}
	}
}
