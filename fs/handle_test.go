package fs

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestHandle: a Handle reads what the file reads, fails to open as the
// mount's open does, and its errors map through the mount's Errno.
func TestHandle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		missing Missing
		path    string
		want    []byte
		openErr syscall.Errno // 0: opens
	}{
		{"chunk", MissingFill, "layer/s0/0-4_0-4_0-2", chunk0(), 0},
		{"pass-through", MissingFill, "notes.txt", []byte("hello"), 0},
		{"missing chunk, fill", MissingFill, "layer/s0/4-5_0-4_0-2", make([]byte, 1*4*2), 0},
		{"missing chunk, error", MissingError, "layer/s0/4-5_0-4_0-2", nil, syscall.ENOENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, _ := newTree(t, layerFiles(t), Options{Missing: tc.missing, ReadAhead: 1 << 20})
			defer tree.Close()
			n, err := tree.Resolve(ctx, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			h, err := tree.Open(ctx, n.(File), tc.path, 1<<31|7)
			if got := tree.Errno(ctx, err, "open", tc.path); got != tc.openErr {
				t.Fatalf("open: %v (errno %v), want errno %v", err, got, tc.openErr)
			}
			if err != nil {
				return
			}
			if h.Size() != int64(len(tc.want)) {
				t.Errorf("Size() = %d, want %d", h.Size(), len(tc.want))
			}
			buf := make([]byte, len(tc.want)+3)
			k, err := h.ReadAt(ctx, buf, 0)
			if err != nil || !bytes.Equal(buf[:k], tc.want) {
				t.Errorf("ReadAt(0) = %d, %v, %x; want %x", k, err, buf[:k], tc.want)
			}
			if k, err := h.ReadAt(ctx, buf, int64(len(tc.want))); k != 0 || err != nil {
				t.Errorf("ReadAt(end) = %d, %v; want 0, nil", k, err)
			}
		})
	}
	if got := (&Tree{}).Errno(ctx, fetcher.ErrNotExist, "read", "x"); got != syscall.ENOENT {
		t.Errorf("Errno(ErrNotExist) = %v, want ENOENT", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if got := (&Tree{}).Errno(cctx, context.Canceled, "read", "x"); got != syscall.EINTR {
		t.Errorf("Errno(cancelled) = %v, want EINTR", got)
	}
}
