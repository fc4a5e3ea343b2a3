package fetcher

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/volfs/volfs/internal/mem"
)

// Reading HTTP bodies: exactly the bytes asked for, within a limit, and
// the Content-Range checks that tell a ranged reply from a lie.

// skipTo reads and drops the bytes before offset of body, the whole object
// from a server that ignored Range; ended reports an object that ends
// before offset. An offset beyond MaxRangeSkip is refused, with
// ErrNotSupported, before a byte is read.
func skipTo(body io.Reader, offset int64) (ended bool, err error) {
	if offset > MaxRangeSkip {
		return false, fmt.Errorf("the server ignores Range (it sent the whole object): reaching byte %d would read all the bytes before it, more than %d: %w",
			offset, MaxRangeSkip, ErrNotSupported)
	}
	switch _, err := io.CopyN(io.Discard, body, offset); err {
	case nil:
		return false, nil
	case io.EOF:
		return true, nil
	default:
		return false, bodyError(err)
	}
}

// readBody reads a body of size bytes (-1 when unknown) that may not exceed
// limit. A known size is read into one buffer of that size; a body that
// ends early is a truncated body, a transient failure.
func readBody(r io.Reader, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, fmt.Errorf("body of %d bytes: %w (limit %d)", size, ErrTooLarge, limit)
	}
	if size >= 0 {
		data := mem.Get(int(size))
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, bodyError(err)
		}
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, bodyError(err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("body of more than %d bytes: %w", limit, ErrTooLarge)
	}
	return data, nil
}

func bodyError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading body: %w: %w", err, ErrTransient)
}

// drain reads what is left of body and closes it, so that its connection
// goes back to the pool.
func drain(body io.ReadCloser) {
	io.CopyN(io.Discard, body, drainLimit)
	body.Close()
}

// contentEncoding returns the reply's Content-Encoding, "" for identity.
func contentEncoding(resp *http.Response) string {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if enc == "identity" {
		return ""
	}
	return enc
}

// checkRangeReply checks a 206 reply to the range offset-last: its
// Content-Range (cr) must start at offset and end at last, or before last
// exactly where the object ends, and its Content-Length (-1 when absent)
// must be the length of that range. It returns that length and the
// object's size (-1 when the server wrote "*"). A reply that breaks the
// rule is a transient failure: another attempt may be answered right, and
// a reader never gets the wrong bytes or a short read in mid-file.
func checkRangeReply(cr string, contentLength, offset, last int64) (n, total int64, err error) {
	first, end, total, err := parseContentRangeFull(cr)
	bad := func(why string) error {
		return fmt.Errorf("reply to range %d-%d has Content-Range %q and Content-Length %d: %s: %w", offset, last, cr, contentLength, why, ErrTransient)
	}
	switch {
	case err != nil || first < 0:
		return 0, 0, bad("not a range")
	case first != offset:
		return 0, 0, bad("another range")
	case end > last || end < first:
		return 0, 0, bad("another range")
	case end < last && (total < 0 || end != total-1):
		return 0, 0, bad("shorter than asked for, yet not at the object's end")
	case total >= 0 && end >= total:
		return 0, 0, bad("past the object's end")
	}
	n = end - first + 1
	if contentLength >= 0 && contentLength != n {
		return 0, 0, bad("a body of another length than the range")
	}
	return n, total, nil
}

// readExactly reads n bytes of r and checks that r ends there: fewer
// bytes, or more, is a transient failure.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	data := mem.Get(int(n))
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, bodyError(err)
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, fmt.Errorf("reply has more bytes than its range (%d): %w", n, ErrTransient)
	}
	return data, nil
}

// parseContentRangeFull parses "bytes first-last/total" and "bytes
// */total"; first and last are -1 in the second form and total is -1 when
// the server wrote "*".
func parseContentRangeFull(s string) (first, last, total int64, err error) {
	first, total, err = parseContentRange(s)
	if err != nil || first < 0 {
		return first, -1, total, err
	}
	rng, _, _ := strings.Cut(strings.TrimPrefix(s, "bytes "), "/")
	_, l, _ := strings.Cut(rng, "-")
	if last, err = strconv.ParseInt(l, 10, 64); err != nil {
		return -1, -1, -1, fmt.Errorf("bad Content-Range %q", s)
	}
	return first, last, total, nil
}

// parseContentRange parses "bytes first-last/total" and "bytes */total";
// first is -1 in the second form and total is -1 when the server wrote "*".
func parseContentRange(s string) (first, total int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rng, tot, ok := strings.Cut(strings.TrimPrefix(s, "bytes "), "/")
	if !ok {
		return -1, -1, bad
	}
	first, total = -1, -1
	if rng != "*" {
		f, _, ok := strings.Cut(rng, "-")
		if first, err = strconv.ParseInt(f, 10, 64); !ok || err != nil {
			return -1, -1, bad
		}
	}
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return -1, -1, bad
		}
	}
	return first, total, nil
}
