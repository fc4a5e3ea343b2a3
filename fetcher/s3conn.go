package fetcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
)

// s3Conn is the client that every s3:// fetcher of the process for one
// bucket, endpoint and credential choice shares: one session (a pooled,
// keep-alive transport of at most S3Options.Conns connections) and, once
// settled, one SDK client.
type s3Conn struct {
	bucket string
	opts   S3Options
	sess   *session
	http   *http.Client // the session's transport, watched (and counted: see Metrics)

	lock  chan struct{}           // held by the one settle at work; a channel so that waiting honours ctx
	cfg   *aws.Config             // GUARDED_BY(lock); the configuration and credentials, once found
	auth  *s3State                // GUARDED_BY(lock); with cfg: auth and hint filled in
	state atomic.Pointer[s3State] // nil until settled
}

// s3State is what the first call settles: the credentials, the region and
// the client made with them.
type s3State struct {
	client *s3.Client
	region string
	auth   string // how requests are signed, for messages
	hint   string // how to change it
	where  string // the endpoint, for messages
}

// s3Conns holds one s3Conn per bucket, endpoint and credential choice, for
// the life of the process; a mount makes one.
var s3Conns = struct {
	mu sync.Mutex
	m  map[string]*s3Conn // GUARDED_BY(mu)
}{m: make(map[string]*s3Conn)}

// s3ConnFor returns the process's s3Conn for bucket and opts (with their
// defaults), making it if it is the first.
func s3ConnFor(bucket string, opts S3Options) *s3Conn {
	key := strings.Join([]string{bucket, opts.Endpoint, fmt.Sprint(opts.Anonymous), opts.Profile, opts.Region,
		os.Getenv("AWS_PROFILE"), os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_REGION")}, "|")
	s3Conns.mu.Lock()
	defer s3Conns.mu.Unlock()
	if c, ok := s3Conns.m[key]; ok {
		return c
	}
	c := &s3Conn{bucket: bucket, opts: opts, sess: newSession(opts.Conns), lock: make(chan struct{}, 1)}
	rt := &stallTransport{base: c.sess.transport, timeout: opts.StallTimeout, minRate: opts.MinRate}
	c.http = &http.Client{
		Transport: rt,
		// S3 names another region with a 301 and no Location: the SDK
		// reads the reply, never a redirect's target.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s3Conns.m[key] = c
	return c
}

// settle returns the settled state, settling it if no call has yet. Its
// errors wrap the fetcher's sentinels where one applies.
func (c *s3Conn) settle(ctx context.Context) (*s3State, error) {
	if st := c.state.Load(); st != nil {
		return st, nil
	}
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.lock }()
	if st := c.state.Load(); st != nil {
		return st, nil
	}
	st, err := c.newState(ctx)
	if err != nil {
		return nil, err
	}
	c.state.Store(st)
	return st, nil
}

// s3CredentialsTimeout bounds the search of the credential chain, whose
// last link asks the instance metadata service: off EC2 that request may
// wait for a timeout.
const s3CredentialsTimeout = 10 * time.Second

// loadConfig loads the AWS configuration and looks for credentials, once
// per s3Conn: the state it returns has auth, hint and where filled in.
func (c *s3Conn) loadConfig(ctx context.Context) (aws.Config, *s3State, error) {
	o := c.opts
	// The configuration's own HTTP client (for the credential providers)
	// is the SDK's, which alone can take AWS_CA_BUNDLE; its roots are
	// copied to the session below.
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithLogger(logging.LoggerFunc(func(cl logging.Classification, format string, v ...any) {
			o.Log.Debug("fetcher: aws-sdk: " + fmt.Sprintf(format, v...))
		})),
	}
	if o.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(o.Profile))
	}
	if o.Anonymous {
		load = append(load, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return aws.Config{}, nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		if tc := bc.GetTransport().TLSClientConfig; tc != nil && tc.RootCAs != nil {
			// Set before the first request on the session.
			c.sess.transport.TLSClientConfig = &tls.Config{RootCAs: tc.RootCAs}
		}
	}
	st := &s3State{where: "AWS S3"}
	if o.Endpoint != "" {
		st.where = o.Endpoint
	}
	anonHint := "for a private bucket, give AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile of ~/.aws with --profile or AWS_PROFILE) and do not pass --anonymous"
	switch {
	case o.Anonymous:
		st.auth, st.hint = "anonymous access (--anonymous)", anonHint
	default:
		rctx, cancel := context.WithTimeout(ctx, s3CredentialsTimeout)
		creds, err := cfg.Credentials.Retrieve(rctx)
		cancel()
		switch {
		case err == nil:
			st.auth = "AWS credentials from " + creds.Source
			if p := cmpOr(o.Profile, os.Getenv("AWS_PROFILE")); p != "" {
				st.auth += " (profile " + p + ")"
			}
			st.hint = "grant them s3:GetObject and s3:ListBucket on the bucket, choose others with --profile or AWS_PROFILE, or pass --anonymous for a public bucket"
		case ctx.Err() != nil:
			return aws.Config{}, nil, ctx.Err()
		case o.Profile != "":
			// Named but unusable: falling back to anonymous would hide it.
			return aws.Config{}, nil, fmt.Errorf("s3: --profile %s: %w", o.Profile, err)
		default:
			st.auth, st.hint = "anonymous access (no AWS credentials found)", anonHint
			cfg.Credentials = aws.AnonymousCredentials{}
		}
	}
	return cfg, st, nil
}

// newState settles the configuration (once), the region and the client.
func (c *s3Conn) newState(ctx context.Context) (*s3State, error) {
	if c.cfg == nil {
		cfg, st, err := c.loadConfig(ctx)
		if err != nil {
			return nil, err
		}
		c.cfg, c.auth = &cfg, st
	}
	o, cfg, st := c.opts, *c.cfg, new(*c.auth)
	var err error
	if st.region = o.Region; st.region == "" {
		if st.region, err = c.discoverRegion(ctx); err != nil {
			return nil, err
		}
		if st.region == "" {
			st.region = cmpOr(cfg.Region, "us-east-1")
		}
	}
	st.client = s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.Region = st.region
		so.HTTPClient = c.http
		so.Retryer = aws.NopRetryer{}
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			// S3-compatible stores answer path-style requests; virtual
			// hosts would need a DNS name per bucket.
			so.UsePathStyle = true
		}
		// No checksums to compute on reads: ranged replies carry none,
		// and a whole body is bounded by the metadata's sizes.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	return st, nil
}

// discoverRegion sends an unsigned HEAD of the bucket and returns the
// region that its x-amz-bucket-region header names, which S3 sends
// whatever the status (200, 301 from another region, 403 of a private
// bucket), or "" when the reply has none (many S3-compatible stores). A
// 404 means that the bucket does not exist.
func (c *s3Conn) discoverRegion(ctx context.Context) (string, error) {
	base := "https://s3.amazonaws.com"
	if c.opts.Endpoint != "" {
		base = strings.TrimSuffix(c.opts.Endpoint, "/")
	}
	u := base + "/" + url.PathEscape(c.bucket)
	ctx, cancel := context.WithTimeout(ctx, attemptBound(c.opts.StallTimeout, c.opts.MinRate, 0))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "HEAD", u, nil)
	if err != nil {
		return "", fmt.Errorf("s3: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if cerr := context.Cause(ctx); cerr != nil && errors.Is(err, cerr) {
			return "", fmt.Errorf("s3: HEAD %s: %w: %w", u, err, ErrTransient)
		}
		return "", fmt.Errorf("s3: HEAD %s (is the endpoint right?): %w", u, transportError(err))
	}
	drain(resp.Body)
	if r := resp.Header.Get("X-Amz-Bucket-Region"); r != "" {
		return r, nil
	}
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound:
		return "", fmt.Errorf("bucket %q does not exist at %s (check the bucket's name and the endpoint): %w", c.bucket, base, ErrNotExist)
	case code == http.StatusTooManyRequests || code >= 500:
		return "", fmt.Errorf("s3: HEAD %s: %w", u, statusError(resp))
	}
	return "", nil
}
