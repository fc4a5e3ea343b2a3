package fs

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// Streaming a pass-through object from a server that ignores Range
// (fetcher.RangeIgnorer; any other remote object is read in ranged parts,
// parts.go): the kernel reads a file in order in
// pieces of at most 1 MiB, a few of them at once. A ranged request per
// piece costs a round trip each, and against a server that ignores Range
// (Python's http.server) it downloads everything before each piece: the
// reads of a 1 GiB file would move hundreds of GiB. So an objectFile keeps
// one stream of its object, opened when a read continues where the last
// one ended (or starts at 0), and serves every read at the stream's
// position from it. A read elsewhere is a ranged read; one a little ahead
// of the stream (a piece that overtook another) skips forward on it. A
// stream unused for streamIdle is closed, so that an abandoned reader does
// not hold a connection, and it is closed at once when the file's last
// handle closes (Handle.Close). The memory is the caller's buffer: the stream is
// read into it.

// streamIdle is how long an unused stream is kept open.
const streamIdle = 5 * time.Second

// maxStreamSkip is how far ahead of its stream a read may be and still be
// served from it: the bytes between are kept (skipped), so that the read
// of them, which the kernel sent first but which came second, is served
// from memory.
const maxStreamSkip = 2 << 20

// objectStream is the stream of one pass-through object.
type objectStream struct {
	mu     sync.Mutex
	rc     io.ReadCloser      // GUARDED_BY(mu); nil when none is open
	cancel context.CancelFunc // GUARDED_BY(mu); ends rc's request
	pos    int64              // GUARDED_BY(mu); the offset rc reads next
	next   int64              // GUARDED_BY(mu); where the last read ended
	busy   bool               // GUARDED_BY(mu); a read of rc is under way
	moved  chan struct{}      // GUARDED_BY(mu); closed when busy ends
	idle   *time.Timer        // GUARDED_BY(mu); closes rc after streamIdle
	// skipped holds the bytes at skippedAt that a read ahead of the
	// stream skipped, for the read of them that comes late.
	skipped   []byte // GUARDED_BY(mu)
	skippedAt int64  // GUARDED_BY(mu)
	// idleAfter is streamIdle when 0, or what a test sets.
	idleAfter time.Duration // GUARDED_BY(mu)
}

// read fills p from the stream if off is where the stream is (or where
// the last read ended, opening one), or a little ahead, and reports
// whether it did. A read ahead of a stream that another read is using
// waits for it. A stream that fails is closed and not reported: the
// caller reads the range as usual.
//
// cont says that the read continues the file's last one as its window of
// parts saw it (objectParts.continues): a stream opens there too.
func (s *objectStream) read(ctx context.Context, st fetcher.Streamer, key string, p []byte, off int64, cont bool) (int, bool) {
	n := int64(len(p))
	s.mu.Lock()
	for s.busy && off >= s.pos && off <= s.pos+maxStreamSkip {
		ch := s.moved
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, false
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if off >= s.skippedAt && off+n <= s.skippedAt+int64(len(s.skipped)) {
		copy(p, s.skipped[off-s.skippedAt:])
		return len(p), true
	}
	if s.busy || s.rc != nil && (off < s.pos || off > s.pos+maxStreamSkip) {
		// Another part of the file: the stream waits where it is.
		s.next = off + n
		return 0, false
	}
	if s.rc == nil {
		if off != s.next && !cont {
			s.next = off + n
			return 0, false
		}
		// The stream outlives this read, but its opening is the read's
		// wait: the reader's end (an interrupt, --read-timeout) ends it.
		// It keeps the read's values, the version pin among them
		// (fetcher.WithVersion): a stream of another version is refused.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		stop := context.AfterFunc(ctx, cancel)
		rc, err := st.Stream(sctx, key, off)
		if !stop() || err != nil {
			if err == nil {
				rc.Close()
			}
			cancel()
			s.next = off + n
			return 0, false
		}
		s.rc, s.cancel, s.pos = rc, cancel, off
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	s.busy, s.moved = true, make(chan struct{})
	rc, cancel, pos := s.rc, s.cancel, s.pos
	s.mu.Unlock()

	// The reader's end (an interrupt, --read-timeout) ends the request.
	stop := context.AfterFunc(ctx, cancel)
	var skipped []byte
	var err error
	if skip := off - pos; skip > 0 {
		skipped = make([]byte, skip)
		_, err = io.ReadFull(rc, skipped)
	}
	if err == nil {
		_, err = io.ReadFull(rc, p)
	}
	stop()

	s.mu.Lock()
	s.busy = false
	close(s.moved)
	if err != nil {
		// Broken, cut off by the reader's end, or shorter than the size
		// the file shows: the ranged read decides.
		s.next = off
		s.closeLocked()
		return 0, false
	}
	if skipped != nil {
		s.skipped, s.skippedAt = skipped, pos
	}
	s.pos = off + n
	s.next = s.pos
	s.armIdle()
	return len(p), true
}

// armIdle (re)starts the timer that closes an unused stream.
//
// REQUIRES: s.mu held.
func (s *objectStream) armIdle() {
	if s.idle != nil {
		s.idle.Stop()
	}
	rc := s.rc
	idle := s.idleAfter
	if idle == 0 {
		idle = streamIdle
	}
	s.idle = time.AfterFunc(idle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.rc == rc && !s.busy {
			s.closeLocked()
		}
	})
}

// end closes the stream when the file's last handle has closed
// (Handle.Close), rather than after streamIdle: a stream a read still
// uses is cut off, and that read falls back to a ranged read.
func (s *objectStream) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = 0 // the next open that reads from 0 streams anew
	if s.busy {
		s.cancel()
		return
	}
	s.closeLocked()
}

// closeLocked closes the stream, if open, and forgets skipped bytes.
//
// REQUIRES: s.mu held.
func (s *objectStream) closeLocked() {
	s.skipped = nil
	if s.rc == nil {
		return
	}
	s.cancel()
	s.rc.Close()
	s.rc, s.cancel = nil, nil
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
}
