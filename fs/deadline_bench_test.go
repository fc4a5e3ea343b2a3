package fs

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// BenchmarkReadContext measures what every read of a handle pays before
// its work: the read's context under a --read-timeout (a goroutine and a
// timer: go-fuse's request context is not one the context package can
// hook) or without. The FUSE adapter's check of a file's remembered
// failure is BenchmarkFailedRange, in fs/fuse.
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
			b.ReportAllocs()
			for b.Loop() {
				rctx, cancel := t.readContext(parent)
				if rctx.Err() != nil {
					b.Fatal(rctx.Err())
				}
				cancel()
			}
		})
	}
}
