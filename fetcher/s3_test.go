package fetcher

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// s3Key is the access key that a "private" fake bucket accepts.
const s3Key = "AKIDVOLFSTEST"

// fakeS3 is an in-process S3 server (gofakes3) behind a front that plays
// the parts gofakes3 does not: a private bucket refuses requests that are
// not signed with s3Key (403 AccessDenied, as S3 does), and fail, while
// positive, answers that many requests with 503 SlowDown.
type fakeS3 struct {
	URL      string
	backend  *s3mem.Backend
	private  bool
	fail     atomic.Int64
	requests atomic.Int64
	// retryAfter, when set, is the Retry-After of each 503 SlowDown.
	retryAfter atomic.Pointer[string]
}

func startFakeS3(t testing.TB, private bool) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New(), private: private}
	faker := gofakes3.New(f.backend, gofakes3.WithIntegrityCheck(false))
	inner := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if f.fail.Add(-1) >= 0 {
			if ra := f.retryAfter.Load(); ra != nil {
				w.Header().Set("Retry-After", *ra)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		f.fail.Store(0)
		if f.private && !strings.Contains(r.Header.Get("Authorization"), "Credential="+s3Key+"/") {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// put stores an object, with metadata headers such as Content-Encoding.
func (f *fakeS3) put(t testing.TB, bucket, key string, data []byte, meta map[string]string) {
	t.Helper()
	if err := f.backend.CreateBucket(bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if meta == nil {
		meta = map[string]string{}
	}
	if _, err := f.backend.PutObject(bucket, key, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// s3Env isolates a test from the machine's AWS configuration and sets the
// access key (none when key is "").
func s3Env(t *testing.T, key string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ACCESS_KEY_ID", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	if key != "" {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	}
}

// fastS3 keeps the back-off of failing tests short.
var fastS3 = S3Options{BaseBackoff: time.Microsecond, MaxBackoff: time.Millisecond}

func s3Fetcher(t testing.TB, f *fakeS3, source string, opts S3Options) *S3 {
	t.Helper()
	opts.Endpoint = f.URL
	s, err := NewS3(source, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// s3ContractFetcher fills a bucket with files under a prefix, beside
// neighbours that the prefix must hide.
func s3ContractFetcher(t *testing.T, f *fakeS3, opts S3Options) mkFetcher {
	return func(t *testing.T, files map[string][]byte) Fetcher {
		t.Helper()
		for key, data := range files {
			f.put(t, "bkt", "pre/fix/"+key, data, nil)
		}
		f.put(t, "bkt", "pre/fixed", []byte("x"), nil)
		f.put(t, "bkt", "other", []byte("x"), nil)
		f.put(t, "bkt", "pre/fix/8_8_8/sub/", nil, nil) // a folder marker
		return s3Fetcher(t, f, "s3://bkt/pre/fix", opts)
	}
}

func TestS3Contract(t *testing.T) {
	t.Run("Keyed", func(t *testing.T) {
		s3Env(t, s3Key)
		f := startFakeS3(t, true)
		testContract(t, s3ContractFetcher(t, f, fastS3))
	})
	t.Run("Anonymous", func(t *testing.T) {
		s3Env(t, "")
		f := startFakeS3(t, false)
		var s *S3
		mk := s3ContractFetcher(t, f, fastS3)
		testContract(t, func(t *testing.T, files map[string][]byte) Fetcher {
			s = mk(t, files).(*S3)
			return s
		})
		if got := s.Auth(); !strings.Contains(got, "no AWS credentials found") {
			t.Errorf("Auth() = %q, want anonymous access for want of credentials", got)
		}
	})
	t.Run("AnonymousFlag", func(t *testing.T) {
		s3Env(t, s3Key)
		f := startFakeS3(t, false)
		opts := fastS3
		opts.Anonymous = true
		testContract(t, s3ContractFetcher(t, f, opts))
	})
}

// TestS3Refused checks that a 403 is ErrPermission, never retried, that
// its message names the credentials used and how to change them, and that
// it is logged once.
func TestS3Refused(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		anonymous bool
		wantAuth  string
		wantHint  string
	}{
		{"no credentials", "", false, "anonymous access (no AWS credentials found)", "give AWS credentials"},
		{"--anonymous", s3Key, true, "anonymous access (--anonymous)", "do not pass --anonymous"},
		{"other key", "AKIDOTHER", false, "AWS credentials from EnvConfigCredentials", "grant them s3:GetObject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s3Env(t, tc.key)
			f := startFakeS3(t, true)
			f.put(t, "priv", "info", []byte("{}"), nil)
			var logged bytes.Buffer
			opts := fastS3
			opts.Anonymous = tc.anonymous
			opts.Log = slog.New(slog.NewTextHandler(&logged, nil))
			s := s3Fetcher(t, f, "s3://priv", opts)
			ctx := context.Background()
			before := f.requests.Load()
			_, err := s.Get(ctx, "info", 1<<20)
			if !errors.Is(err, ErrPermission) {
				t.Fatalf("Get: got %v, want %v", err, ErrPermission)
			}
			for _, want := range []string{tc.wantAuth, tc.wantHint, "s3://priv/info", "AccessDenied"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if _, err := s.List(ctx, ""); !errors.Is(err, ErrPermission) {
				t.Errorf("List: got %v, want %v", err, ErrPermission)
			}
			// One HEAD to find the region, then one request each.
			if got := f.requests.Load() - before; got != 3 {
				t.Errorf("%d requests, want 3 (no retry of a 403)", got)
			}
			if n := strings.Count(logged.String(), "refused access"); n != 1 {
				t.Errorf("logged %d lines about the refusal, want 1:\n%s", n, logged.String())
			}
		})
	}
}

// TestS3Paging lists a directory of more than 20 000 keys, which S3 sends
// in pages of 1000, and checks that every key comes once.
func TestS3Paging(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	const n = 20_500
	for i := range n {
		f.put(t, "big", fmt.Sprintf("vol/s0/%d.0.0", i), []byte{byte(i)}, nil)
	}
	for i := range 3 {
		f.put(t, "big", fmt.Sprintf("vol/s0/sub%d/x", i), []byte("x"), nil)
	}
	s := s3Fetcher(t, f, "s3://big/vol", fastS3)
	before := f.requests.Load()
	entries, err := s.List(context.Background(), "s0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	files, dirs := 0, 0
	for _, e := range entries {
		if seen[e.Name] {
			t.Fatalf("%q listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.IsDir {
			dirs++
		} else if files++; e.Size != 1 {
			t.Fatalf("%q: size %d, want 1", e.Name, e.Size)
		}
	}
	if files != n || dirs != 3 {
		t.Errorf("got %d files and %d directories, want %d and 3", files, dirs, n)
	}
	// 20 503 entries in pages of 1000 (plus the HEAD that finds the region).
	if got, want := f.requests.Load()-before, int64(1+(n+3+999)/1000); got != want {
		t.Errorf("%d requests, want %d", got, want)
	}
}

// TestS3GzipEncoded checks that an object stored with Content-Encoding:
// gzip, as CloudVolume uploads them, is returned as stored and marked
// "gzip" by Get, and that GetRange and Stat see its stored bytes.
func TestS3GzipEncoded(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	plain := seq(100_000)
	stored := gzipBytes(t, plain)
	f.put(t, "gz", "img/0-64_0-64_0-64", stored, map[string]string{"Content-Encoding": "gzip", "Content-Type": "application/octet-stream"})
	s := s3Fetcher(t, f, "s3://gz/img", fastS3)
	ctx := context.Background()
	obj, err := s.Get(ctx, "0-64_0-64_0-64", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if obj.ContentEncoding != "gzip" || !bytes.Equal(obj.Data, stored) {
		t.Errorf("Get: got %d bytes, encoding %q, want the %d stored bytes, gzip", len(obj.Data), obj.ContentEncoding, len(stored))
	}
	if !obj.ID.Known() {
		t.Errorf("Get: no identity")
	}
	size, id, err := s.Stat(ctx, "0-64_0-64_0-64")
	if err != nil || size != int64(len(stored)) || id != obj.ID {
		t.Errorf("Stat: got %d %q %v, want %d %q", size, id, err, len(stored), obj.ID)
	}
	part, rid, err := s.GetRange(ctx, "0-64_0-64_0-64", 10, 100)
	if err != nil || !bytes.Equal(part, stored[10:110]) || rid != obj.ID {
		t.Errorf("GetRange: got %d bytes, %q, %v, want stored[10:110], %q", len(part), rid, err, obj.ID)
	}
}

// TestS3Identity checks that a rewritten object gets a new identity, so
// that the disk cache never serves what was made from the old one.
func TestS3Identity(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	f.put(t, "id", "k", []byte("one"), nil)
	s := s3Fetcher(t, f, "s3://id", fastS3)
	ctx := context.Background()
	_, id1, err := s.Stat(ctx, "k")
	if err != nil || !id1.Known() {
		t.Fatalf("Stat: %q, %v", id1, err)
	}
	f.put(t, "id", "k", []byte("two"), nil)
	obj, err := s.Get(ctx, "k", 100)
	if err != nil || obj.ID == id1 || !obj.ID.Known() {
		t.Errorf("Get after a rewrite: identity %q, %v; before it %q", obj.ID, err, id1)
	}
}

// TestS3MissingBucket checks that a bucket that does not exist is
// ErrNotExist for every call, the root's listing included, with a message
// that names it.
func TestS3MissingBucket(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	f.put(t, "there", "x", []byte("x"), nil)
	s := s3Fetcher(t, f, "s3://nosuchbucket", fastS3)
	ctx := context.Background()
	_, err := s.List(ctx, "")
	if !errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), `bucket "nosuchbucket" does not exist`) {
		t.Errorf("List: got %v, want %v naming the bucket", err, ErrNotExist)
	}
	if _, err := s.Get(ctx, "x", 10); !errors.Is(err, ErrNotExist) {
		t.Errorf("Get: got %v, want %v", err, ErrNotExist)
	}
}

// TestS3Retry checks that 503 SlowDown is retried until it passes, and
// that a server that keeps sending it fails with ErrTransient after
// MaxAttempts requests.
func TestS3Retry(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	f.put(t, "r", "k", seq(5000), nil)
	s := s3Fetcher(t, f, "s3://r", fastS3)
	ctx := context.Background()
	if _, _, err := s.Stat(ctx, "k"); err != nil { // settles the region
		t.Fatal(err)
	}
	f.fail.Store(3)
	got, _, err := s.GetRange(ctx, "k", 100, 50)
	if err != nil || !bytes.Equal(got, seq(5000)[100:150]) {
		t.Fatalf("GetRange after 3 SlowDowns: got %d bytes, %v", len(got), err)
	}
	if st := s.Stats(); st.Retries != 3 {
		t.Errorf("Retries = %d, want 3", st.Retries)
	}
	f.fail.Store(1000)
	before := f.requests.Load()
	if _, err := s.Get(ctx, "k", 1<<20); !errors.Is(err, ErrTransient) || !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("Get while every reply is 503 SlowDown: got %v, want %v", err, ErrTransient)
	}
	if n := f.requests.Load() - before; n != 6 {
		t.Errorf("%d requests, want 6 (MaxAttempts)", n)
	}
	f.fail.Store(0)
}

// TestS3RetryAfter checks that the retry policy of every source applies to
// S3: a 503 SlowDown with Retry-After waits what the server asks (in
// seconds or as an HTTP date), not the back-off's microseconds, and a
// Retry-After that the call's budget cannot hold gives up at once.
func TestS3RetryAfter(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	f.put(t, "ra", "k", seq(5000), nil)
	opts := S3Options{BaseBackoff: time.Microsecond, MaxBackoff: 10 * time.Second}
	s := s3Fetcher(t, f, "s3://ra", opts)
	ctx := context.Background()
	if _, _, err := s.Stat(ctx, "k"); err != nil { // settles the region
		t.Fatal(err)
	}
	for _, ra := range []string{"1", "date"} {
		if ra == "date" {
			ra = time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
		}
		f.retryAfter.Store(&ra)
		f.fail.Store(1)
		start := time.Now()
		got, _, err := s.GetRange(ctx, "k", 100, 50)
		if err != nil || !bytes.Equal(got, seq(5000)[100:150]) {
			t.Fatalf("Retry-After %q: GetRange: got %d bytes, %v", ra, len(got), err)
		}
		// An HTTP date has one-second resolution: at least 1s is left.
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("Retry-After %q: the retry came after %v, want about 1s or more", ra, d)
		}
	}

	// A Retry-After longer than the call may last: no wait at all.
	ra := "3600"
	f.retryAfter.Store(&ra)
	f.fail.Store(1000)
	short := s3Fetcher(t, f, "s3://ra", S3Options{BaseBackoff: time.Microsecond, MaxBackoff: time.Hour, CallTimeout: 5 * time.Second})
	start := time.Now()
	before := f.requests.Load()
	_, err := short.Get(ctx, "k", 1<<20)
	if !errors.Is(err, ErrTransient) || !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("Get while every reply asks for an hour: got %v, want %v", err, ErrTransient)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("gave up after %v, want at once (the wait exceeds the call's budget)", d)
	}
	if n := f.requests.Load() - before; n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	f.fail.Store(0)
}

// TestS3Open checks the s3:// URLs that Open takes and refuses.
func TestS3Open(t *testing.T) {
	for _, tc := range []struct {
		source, endpoint string
		want             string // String(), or "" for a refusal
	}{
		{"s3://bkt", "", "s3://bkt"},
		{"s3://bkt/", "", "s3://bkt"},
		{"s3://bkt/a/b/", "", "s3://bkt/a/b"},
		{"S3://bkt/a", "", "s3://bkt/a"},
		{"s3://", "", ""},
		{"s3:///x", "", ""},
		{"s3://bkt/../x", "", ""},
		{"s3://bkt", "ftp://host", ""},
		{"s3://bkt", "http://127.0.0.1:9", "s3://bkt"},
	} {
		f, err := Open(tc.source, Options{S3: S3Options{Endpoint: tc.endpoint}})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Open(%q, endpoint %q) = %v, want a refusal", tc.source, tc.endpoint, f)
		case tc.want != "" && (err != nil || f.String() != tc.want):
			t.Errorf("Open(%q, endpoint %q) = %v, %v, want %s", tc.source, tc.endpoint, f, err, tc.want)
		}
	}
}

// TestS3Stream reads an object as one stream from several offsets.
func TestS3Stream(t *testing.T) {
	s3Env(t, "")
	f := startFakeS3(t, false)
	data := seq(300_000)
	f.put(t, "st", "obj", data, nil)
	s := s3Fetcher(t, f, "s3://st", fastS3)
	for _, off := range []int64{0, 1, 150_000, 299_999, 300_000, 400_000} {
		rc, err := s.Stream(context.Background(), "obj", off)
		if err != nil {
			t.Errorf("Stream from %d: %v", off, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want := data[min(off, int64(len(data))):]
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Stream from %d: got %d bytes, %v, want %d", off, len(got), err, len(want))
		}
	}
	if _, err := s.Stream(context.Background(), "missing", 0); !errors.Is(err, ErrNotExist) {
		t.Errorf("Stream of a missing object: got %v, want %v", err, ErrNotExist)
	}
}

// TestS3ListEndless checks that a server that always answers "truncated"
// ends the listing with an error, quickly: with the same continuation
// token, at once; with a new token each time, after S3MaxListPages pages.
func TestS3ListEndless(t *testing.T) {
	s3Env(t, "")
	for _, fresh := range []bool{false, true} {
		var pages atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "HEAD" {
				return
			}
			n := pages.Add(1)
			token := "same"
			if fresh {
				token = fmt.Sprint("t", n)
			}
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken><Contents><Key>k%d</Key><Size>1</Size></Contents></ListBucketResult>`, token, n)
		}))
		t.Cleanup(srv.Close)
		s, err := NewS3("s3://b", S3Options{Endpoint: srv.URL, Region: "us-east-1", Anonymous: true})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = s.List(context.Background(), "")
		if err == nil || !strings.Contains(err.Error(), "s3://b") {
			t.Errorf("fresh tokens %v: got %v, want an error naming the listing", fresh, err)
		}
		want := int64(2)
		if fresh {
			want = S3MaxListPages
		}
		if n := pages.Load(); n != want {
			t.Errorf("fresh tokens %v: %d pages asked for, want %d", fresh, n, want)
		}
		if d := time.Since(start); d > 60*time.Second {
			t.Errorf("fresh tokens %v: listing took %v", fresh, d)
		}
	}
}

// listServer starts a loopback server that answers every listing with
// page (HEAD, the bucket's region probe, with nothing), and returns an
// anonymous s3://b fetcher of it.
func listServer(t *testing.T, page func(w io.Writer, r *http.Request)) *S3 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "HEAD" {
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		page(w, r)
	}))
	t.Cleanup(srv.Close)
	s, err := NewS3("s3://b", S3Options{Endpoint: srv.URL, Region: "us-east-1", Anonymous: true,
		BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3ListHugePage checks that a listing page whose reply runs past
// s3MaxListReply (a server that ignores max-keys: one page, not
// truncated, of 24 MiB) is refused with ErrTooLarge, once, instead of
// being decoded whole (on 0d63a2d
// a page of 3 million prefixes was taken whole, 765 MiB of heap, past
// S3MaxListEntries too).
func TestS3ListHugePage(t *testing.T) {
	s3Env(t, "")
	var sent, asked atomic.Int64
	s := listServer(t, func(w io.Writer, r *http.Request) {
		asked.Add(1)
		bw := bufio.NewWriter(w)
		defer bw.Flush()
		fmt.Fprint(bw, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix></Prefix><IsTruncated>false</IsTruncated>`)
		for i := 0; sent.Load() < 24<<20; i++ {
			n, err := fmt.Fprintf(bw, `<CommonPrefixes><Prefix>p%09d/</Prefix></CommonPrefixes>`, i)
			if err != nil {
				return
			}
			sent.Add(int64(n))
		}
		fmt.Fprint(bw, `</ListBucketResult>`)
	})
	entries, err := s.List(context.Background(), "")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "s3://b") {
		t.Fatalf("got %d entries, error %v; want an error naming the listing, wrapping %v", len(entries), err, ErrTooLarge)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the page was asked for %d times, want once (a reply too large is not retried)", n)
	}
}

// TestS3ListLastPageBound checks that S3MaxListEntries holds on the
// last page of a listing too: pages of 1000 keys, the one that passes the
// bound not truncated, end with an error, not with more entries than the
// bound (on 0d63a2d the bound was checked only before asking for another
// page).
func TestS3ListLastPageBound(t *testing.T) {
	s3Env(t, "")
	last := S3MaxListEntries/1000 + 1
	var pages atomic.Int64
	s := listServer(t, func(w io.Writer, r *http.Request) {
		n := int(pages.Add(1))
		bw := bufio.NewWriter(w)
		defer bw.Flush()
		fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix></Prefix><IsTruncated>%v</IsTruncated><NextContinuationToken>t%d</NextContinuationToken>`, n < last, n)
		for i := range 1000 {
			fmt.Fprintf(bw, `<Contents><Key>k%d-%d</Key><Size>1</Size></Contents>`, n, i)
		}
		fmt.Fprint(bw, `</ListBucketResult>`)
	})
	entries, err := s.List(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "s3://b") {
		t.Fatalf("got %d entries (bound %d), error %v; want an error naming the listing", len(entries), S3MaxListEntries, err)
	}
	if n := pages.Load(); n != int64(last) {
		t.Errorf("%d pages asked for, want %d", n, last)
	}
}

// TestS3ListTruncatedNoToken checks that a page said to be truncated
// that gives no continuation token ends the listing with an error, rather
// than a listing of its first page taken as whole (on 0d63a2d, k0 alone,
// no error: a kept and shared answer that hid every later key).
func TestS3ListTruncatedNoToken(t *testing.T) {
	s3Env(t, "")
	for _, token := range []string{"", "<NextContinuationToken></NextContinuationToken>"} {
		s := listServer(t, func(w io.Writer, r *http.Request) {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix>d/</Prefix><IsTruncated>true</IsTruncated>%s<Contents><Key>d/k0</Key><Size>1</Size></Contents></ListBucketResult>`, token)
		})
		entries, err := s.List(context.Background(), "d")
		if err == nil || errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), "s3://b/d/") {
			t.Errorf("token %q: got %v, error %v; want an error naming the listing", token, entries, err)
		}
	}
}

// TestS3ListNotAListing checks that a 200 reply to a listing that is not
// a listing (empty, not XML, HTML, an <Error> sent with 200) is an error,
// never an empty directory nor "no such directory" (on 0d63a2d the root
// listed empty and a prefix was ErrNotExist, which the keeping source
// keeps on disk and shares with the fleet as the origin's answer).
func TestS3ListNotAListing(t *testing.T) {
	s3Env(t, "")
	for _, body := range []string{
		"",
		"garbage",
		"<html><body>Please log in</body></html>",
		`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`,
	} {
		s := listServer(t, func(w io.Writer, r *http.Request) { fmt.Fprint(w, body) })
		for _, prefix := range []string{"", "d"} {
			entries, err := s.List(context.Background(), prefix)
			if err == nil || errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), "s3://b/") {
				t.Errorf("reply %q, prefix %q: got %v, error %v; want an error naming the listing, not %v", body, prefix, entries, err, ErrNotExist)
			}
		}
	}
}

// TestS3ListSlowPages checks that CallTimeout bounds a listing as a
// whole, as S3Options says: a server that answers every page in 300 ms,
// each truncated with a fresh token, fails the listing after CallTimeout
// (on 0d63a2d each page had its own bound, so the listing ran on for
// S3MaxListPages pages, 10 minutes here, hours at the default stall).
func TestS3ListSlowPages(t *testing.T) {
	s3Env(t, "")
	var pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "HEAD" {
			return
		}
		n := pages.Add(1)
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix></Prefix><IsTruncated>true</IsTruncated><NextContinuationToken>t%d</NextContinuationToken><Contents><Key>k%d</Key><Size>1</Size></Contents></ListBucketResult>`, n, n)
	}))
	t.Cleanup(srv.Close)
	s, err := NewS3("s3://b", S3Options{Endpoint: srv.URL, Region: "us-east-1", Anonymous: true, CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.List(ctx, "")
	if d := time.Since(start); ctx.Err() != nil || d > 10*time.Second {
		t.Fatalf("the listing ran %v (%d pages), past its CallTimeout of 2s: %v", d, pages.Load(), err)
	}
	if !errors.Is(err, ErrTransient) || !strings.Contains(err.Error(), "s3://b") {
		t.Errorf("got %v; want an error naming the listing, wrapping %v", err, ErrTransient)
	}
}

// TestS3ListForeignKeys checks what a listing of d/ takes from a server
// that names keys and prefixes outside d/, a key twice, and a key without
// its size: only d/'s own names, each once, and a size it was not told
// as -1 (Stat it), not 0 (on 0d63a2d "other" and "zz" showed in d/, "a"
// twice, and "b" as an empty file).
func TestS3ListForeignKeys(t *testing.T) {
	s3Env(t, "")
	s := listServer(t, func(w io.Writer, r *http.Request) {
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><Prefix>d/</Prefix><IsTruncated>false</IsTruncated>`+
			`<Contents><Key>d/a</Key><Size>3</Size><ETag>"1"</ETag></Contents>`+
			`<Contents><Key>other</Key><Size>5</Size></Contents>`+
			`<Contents><Key>d/a</Key><Size>7</Size><ETag>"2"</ETag></Contents>`+
			`<Contents><Key>d/b</Key><ETag>"3"</ETag></Contents>`+
			`<CommonPrefixes><Prefix>zz/</Prefix></CommonPrefixes>`+
			`<CommonPrefixes><Prefix>d/c/</Prefix></CommonPrefixes>`+
			`</ListBucketResult>`)
	})
	entries, err := s.List(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Name: "c", IsDir: true, Size: -1}, {Name: "a", Size: 3, ID: "etag:\"1\""}, {Name: "b", Size: -1, ID: "etag:\"3\""}}
	if fmt.Sprint(entries) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", entries, want)
	}
}

// TestS3StallOptionsPerFetcher checks that two s3:// fetchers sharing one
// client (same endpoint and bucket) each keep their own stall timeout: the
// first one's does not win for the second.
func TestS3StallOptionsPerFetcher(t *testing.T) {
	s3Env(t, "")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "HEAD" && r.URL.Path == "/b" {
			return // the bucket's region probe
		}
		// Half a reply, then nothing: the call's bound (its size at
		// MinRate) is far off, so only the stall timeout ends it.
		w.Header().Set("Content-Range", "bytes 0-104857599/104857600")
		w.Header().Set("Content-Length", "104857600")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(seq(10))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	opts := S3Options{Endpoint: srv.URL, Region: "us-east-1", Anonymous: true, MaxAttempts: 1}
	slow := opts
	slow.StallTimeout = time.Hour
	if _, err := NewS3("s3://b", slow); err != nil {
		t.Fatal(err)
	}
	quick := opts
	quick.StallTimeout = 300 * time.Millisecond
	s, err := NewS3("s3://b", quick)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = s.GetRange(context.Background(), "k", 0, 100<<20)
	if !errors.Is(err, ErrTransient) {
		t.Errorf("got %v, want a stall (%v)", err, ErrTransient)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the stall was seen after %v, want about 300ms (the second fetcher's StallTimeout)", d)
	}
}
