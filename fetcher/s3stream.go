package fetcher

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	var ifMatch *string
	if pin, ok := pinned(ctx, key); ok {
		if etag, ok := strings.CutPrefix(string(pin), "etag:"); ok {
			ifMatch = &etag
		}
	}
	out, err := st.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: &s.bucket, Key: aws.String(s.prefix + key), RequestPayer: s.payer(),
		Range: aws.String(fmt.Sprintf("bytes=%d-", offset)), IfMatch: ifMatch,
	})
	if err != nil {
		if code, ok := apiCode(err); ok && code == "InvalidRange" {
			return io.NopCloser(strings.NewReader("")), nil
		}
		if code, _ := apiCode(err); ifMatch != nil && (code == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed) {
			return nil, fail(fmt.Errorf("%s: %w", apiText(err), ErrChanged))
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
	if err := pinnedReply(ctx, key, s3Identity(out.ETag, out.VersionId)); err != nil {
		out.Body.Close()
		return nil, fail(err)
	}
	s.m.Done(nil)
	return out.Body, nil
}
