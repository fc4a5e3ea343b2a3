package integration

import (
	"context"
	"testing"

	"github.com/volfs/volfs/fetcher"
)

// TestS3ListingIdentity: SeaweedFS's S3 listing (ListObjectsV2) names
// each object by the identity a Stat (HEAD) of it gives, so that the
// keeping source learns identities from listings (fetcher/keep, list) and
// a tier entry's check need not ask about each object again.
func TestS3ListingIdentity(t *testing.T) {
	w := startWeed(t, "pub")
	s3Env(t, "", "")
	vol, _ := writeVolume(t)
	w.s3put(t, "put", "pub", "precomputed", vol)
	f, err := fetcher.Open("s3://pub/precomputed", fetcher.Options{S3: fetcher.S3Options{Endpoint: w.Endpoint, Anonymous: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	entries, err := f.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range entries {
		if e.IsDir {
			continue
		}
		_, id, err := f.Stat(ctx, e.Name)
		if err != nil {
			t.Fatalf("Stat %s: %v", e.Name, err)
		}
		if e.ID != id {
			t.Errorf("%s: listed as %q, Stat %q; want the same", e.Name, e.ID, id)
		}
		if e.ID.Known() {
			named++
		}
	}
	if named == 0 {
		t.Errorf("the listing %v named no object's identity", entries)
	}
}
