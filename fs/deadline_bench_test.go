package fs

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// BenchmarkReadContext measures what every read of the mount pays before
// its work: the check of the file's remembered failure, and the read's
// context under a --read-timeout (a goroutine and a timer: go-fuse's
// request context is not one the context package can hook) or without.
func BenchmarkReadContext(b *testing.B) {
	parent := &fuse.Context{Cancel: make(chan struct{})}
	for _, bc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"no-read-timeout", 0},
		{"read-timeout", time.Minute},
	} {
		b.Run(bc.name, func(b *testing.B) {
			t := &Tree{opts: Options{ReadTimeout: bc.timeout}}
			var failed failedRange
			b.ReportAllocs()
			for b.Loop() {
				if failed.recent(0, 128<<10) != 0 {
					b.Fatal("a failure remembered")
				}
				rctx, cancel := t.readContext(parent)
				if rctx.Err() != nil {
					b.Fatal(rctx.Err())
				}
				cancel()
			}
		})
	}
	b.Run("failed-range-check", func(b *testing.B) {
		var failed failedRange
		for b.Loop() {
			failed.recent(0, 128<<10)
		}
	})
}
