package fs

import (
	"testing"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// TestTierKeyS3Endpoint: two S3-compatible endpoints that each have a bucket
// "b" name their chunks apart in the disk and shared tiers, directly and
// through the keeping source; one endpoint spelt two ways, and AWS's
// default endpoint, keep one name (issue 29 item 9).
func TestTierKeyS3Endpoint(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	s3 := func(endpoint string) fetcher.Fetcher {
		t.Helper()
		f, err := fetcher.NewS3("s3://b/p", fetcher.S3Options{Endpoint: endpoint, Region: "us-east-1", Anonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := &decode.Array{}
	key := func(src fetcher.Fetcher) string { return (&Tree{src: src}).tierKey(a, "0.0") }
	one, other := s3("http://127.0.0.1:9000"), s3("http://127.0.0.1:9001")
	if key(one) == key(other) {
		t.Errorf("two endpoints share the tier key %q", key(one))
	}
	if k1, k2 := key(keep.New(one, keep.Options{})), key(keep.New(other, keep.Options{})); k1 == k2 {
		t.Errorf("two endpoints behind the keeping source share the tier key %q", k1)
	}
	if k := key(keep.New(one, keep.Options{})); k != key(one) {
		t.Errorf("the keeping source names the chunk %q, its origin %q", k, key(one))
	}
	if k := key(s3("HTTP://127.0.0.1:9000/")); k != key(one) {
		t.Errorf("one endpoint spelt two ways: %q and %q", k, key(one))
	}
	if k, want := key(s3("")), "s3://b/p\x00\x000.0"; k != want {
		t.Errorf("default endpoint: tier key %q, want %q (the name caches already hold)", k, want)
	}
}
