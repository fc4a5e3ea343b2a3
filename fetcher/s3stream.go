package fetcher

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

var _ Streamer = (*S3)(nil)

// RangesOwned reports true: every GetRange reads into a buffer of its own
// (OwnedRanger).
func (s *S3) RangesOwned() bool { return true }

// Stream sends one GET of the bytes from offset on ("Range: bytes=N-") and
// returns its body as it arrives: the stall watchdog and minimum rate of
// S3Options apply to it, and it is not retried (see Streamer). An offset
// at or past the end (416 InvalidRange) gives an empty stream.
func (s *S3) Stream(ctx context.Context, key string, offset int64) (io.ReadCloser, error) {
	if err := checkRange(offset, 0); err != nil {
		return nil, err
	}
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	ctx = withStall(withMetrics(ctx, &s.m), s.opts.StallTimeout, s.opts.MinRate)
	fail := func(err error) error {
		s.m.Done(err)
		return fmt.Errorf("stream %s/%s from %d: %w", s, key, offset, err)
	}
	st, err := s.conn.settle(ctx)
	if err != nil {
		return nil, fail(err)
	}
	out, err := st.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.prefix + key), RequestPayer: s.payer(),
		Range: aws.String(fmt.Sprintf("bytes=%d-", offset)),
	})
	if err != nil {
		if code, ok := apiCode(err); ok && code == "InvalidRange" {
			return io.NopCloser(strings.NewReader("")), nil
		}
		if ctx.Err() != nil {
			return nil, fail(ctx.Err())
		}
		return nil, fail(s.classify(ctx, 0, st, err))
	}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		if first, _, err := parseContentRange(cr); err != nil || first != offset {
			out.Body.Close()
			return nil, fail(fmt.Errorf("reply to range %d- has Content-Range %q", offset, cr))
		}
	} else if offset > 0 {
		out.Body.Close()
		return nil, fail(fmt.Errorf("reply to range %d- is the whole object", offset))
	}
	s.m.Done(nil)
	return out.Body, nil
}
