package refs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/volfs/volfs/fetcher"
)

// MaxSetBytes bounds the JSON of a reference set that Load reads.
const MaxSetBytes = 1 << 30

// sniffBytes is how much of a candidate object Load reads to decide whether
// it is a reference set before reading it whole; sniffStrictBytes is that
// of a candidate whose name does not say it is one (Options.Sniff).
const (
	sniffBytes       = 64 << 10
	sniffStrictBytes = 16 << 10
)

// Options configures Load.
type Options struct {
	// Open makes the fetcher of a root: a plain local directory path or a
	// URL fetcher.Open accepts. One fetcher is made per root and shared by
	// every target under it.
	Open func(root string) (fetcher.Fetcher, error)
	// Allow names further roots targets may lie under (URLs or local
	// directories). By default a target must lie under the directory that
	// holds the reference file, on its scheme, host and port; a file://
	// target of a remote set is refused unless a root here allows it.
	Allow []string
	// Log receives one line per failing key (the key and the target URL).
	Log    *slog.Logger
	Limits Limits
	// Sniff says that nothing but its content tells whether source is a
	// reference set (an http(s), gs:// or s3:// URL whose name does not
	// end in ".json", which may as well name a directory source): Load
	// reads its first 16 KiB in one request and accepts only a JSON object
	// whose members begin as a reference set's do (looksLikeSetStrict);
	// anything else, a failed request included, is ErrNotReferenceSet.
	Sniff bool
}

// Fetcher serves a Manifest; see the package documentation.
type Fetcher struct {
	m     *Manifest
	src   string // the reference set's URL, for String
	base  *url.URL
	roots []*root
	opts  Options
	lazy  *parquetSet // keys beyond m, for a Parquet set; nil for JSON

	lanes lanes // coalesces the ranged reads of each remote target

	mu       sync.Mutex
	resolved map[string]target // GUARDED_BY(mu): per target URL
	logged   map[string]bool   // GUARDED_BY(mu): keys whose failure was logged
}

type root struct {
	u    *url.URL // scheme, host and directory path (no trailing slash)
	spec string   // what Open is given
	once sync.Once
	f    fetcher.Fetcher
	err  error
	// opened holds f once it is opened, for Stats, which must not open it.
	opened atomic.Pointer[fetcher.Fetcher]
}

type target struct {
	f   fetcher.Fetcher
	key string
	tag string // names the resolved target in identities (targetID)
	// remote is set for a target on another machine, whose neighbouring
	// ranges coalesce (lanes).
	remote bool
	err    error
}

// Load reads the reference set at source (a local file path or a URL
// fetcher.Open accepts) and returns its Fetcher. It returns an error
// wrapping ErrNotReferenceSet when source is not a JSON reference set, and
// one wrapping fetcher.ErrNotExist when there is no object at source, so
// a caller sniffing sources may try them as directories.
func Load(ctx context.Context, source string, opts Options) (*Fetcher, error) {
	f, err := newSetFetcher(source, source, opts)
	if err != nil {
		return nil, err
	}
	opts = f.opts
	base := f.base
	name := path.Base(base.Path)
	home := f.roots[0]
	hf, err := home.fetcher(opts.Open)
	if err != nil {
		return nil, err
	}
	if opts.Sniff {
		head, _, err := hf.GetRange(ctx, name, 0, sniffStrictBytes)
		if err != nil {
			return nil, fmt.Errorf("refs: %q: %w (%v)", source, ErrNotReferenceSet, err)
		}
		if !looksLikeSetStrict(head) {
			return nil, fmt.Errorf("refs: %q: %w", source, ErrNotReferenceSet)
		}
	} else {
		head, _, err := hf.GetRange(ctx, name, 0, sniffBytes)
		if err != nil {
			return nil, err
		}
		if !looksLikeSet(head) {
			return nil, fmt.Errorf("refs: %q: %w", source, ErrNotReferenceSet)
		}
	}
	// Streamed in blocks, so that only the manifest is held, not the JSON.
	// The decoder leaves a few hundred bytes of garbage per reference: a
	// collection at every quarter of growth, while the set loads, keeps
	// the peak near the manifest's own size rather than twice it.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	br := &blockReader{ctx: ctx, f: hf, key: name}
	if f.m, err = ParseKerchunk(br, opts.Limits); err != nil {
		if br.err != nil {
			return nil, br.err
		}
		return nil, err
	}
	return f, nil
}

// setBlock is how much of a reference file one request of blockReader reads.
const setBlock = 4 << 20

// blockReader reads an object in order by ranged reads of setBlock bytes,
// all of one version of it, and at most MaxSetBytes of it.
type blockReader struct {
	ctx  context.Context
	f    fetcher.Fetcher
	key  string
	off  int64
	id   fetcher.Identity
	buf  []byte
	done bool
	err  error // the read's own failure, which Load returns as it is
}

func (r *blockReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		if r.off >= MaxSetBytes {
			r.err = fmt.Errorf("refs: %s: more than %d bytes", r.key, int64(MaxSetBytes))
			return 0, r.err
		}
		b, id, err := r.f.GetRange(fetcher.WithVersion(r.ctx, r.key, r.id), r.key, r.off, setBlock)
		switch {
		case err != nil:
			r.err = fmt.Errorf("refs: reading %s: %w", r.key, err)
		case r.off > 0 && id != r.id:
			r.err = fmt.Errorf("refs: %s changed while it was read: %w", r.key, fetcher.ErrChanged)
		}
		if r.err != nil {
			return 0, r.err
		}
		r.id = id
		r.off += int64(len(b))
		r.done = len(b) < setBlock
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// looksLikeSet reports whether head starts a JSON object that names a
// reference set's keys.
func looksLikeSet(head []byte) bool {
	t := bytes.TrimLeft(head, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	for _, k := range []string{`"refs"`, `".zgroup"`, `".zarray"`, `"version"`, `/.zarray"`} {
		if bytes.Contains(head, []byte(k)) {
			return true
		}
	}
	return false
}

// looksLikeSetStrict reports whether head, the first bytes of an object
// whose name says nothing, starts a reference set: a JSON object whose
// first members are "version": 1, or "refs": {...} (after "templates" or
// "gen", if any), or, for version 0, whose first member is a Zarr v2
// metadata key (".zgroup", ".zarray", ".zattrs", ".zmetadata", alone or
// after a path) with a string value. A Zarr ".zattrs" with "version":
// "0.4", a consolidated ".zmetadata", an HTML or JSON directory listing
// are not.
func looksLikeSetStrict(head []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for first := true; ; first = false {
		tok, err := dec.Token()
		k, ok := tok.(string)
		if err != nil || !ok {
			return false
		}
		switch {
		case k == "version":
			tok, err := dec.Token()
			n, ok := tok.(json.Number)
			return err == nil && ok && n.String() == "1"
		case k == "refs":
			tok, err := dec.Token()
			return err == nil && tok == json.Delim('{')
		case k == "templates" || k == "gen":
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return false
			}
		case first && zarrMetaKey(k):
			rest := bytes.TrimLeft(head[dec.InputOffset():], " \t\r\n")
			if len(rest) == 0 || rest[0] != ':' {
				return false
			}
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
			return len(rest) > 0 && rest[0] == '"'
		default:
			return false
		}
	}
}

func zarrMetaKey(k string) bool {
	for _, m := range []string{".zgroup", ".zarray", ".zattrs", ".zmetadata"} {
		if k == m || strings.HasSuffix(k, "/"+m) {
			return true
		}
	}
	return false
}

// sourceURL parses a URL, or makes a file URL of a local path.
func sourceURL(s string) (*url.URL, error) {
	if scheme, _, ok := strings.Cut(s, "://"); !ok || strings.ContainsAny(scheme, `/\`) {
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, fmt.Errorf("refs: %w", err)
		}
		return &url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("refs: %w", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if u.Scheme == "file" && u.Host == "localhost" {
		u.Host = ""
	}
	return u, nil
}

// rootSpec is what Options.Open is given for a root.
func rootSpec(u *url.URL) string {
	if u.Scheme == "file" {
		if u.Path == "" {
			return "/"
		}
		return u.Path
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func (r *root) fetcher(open func(string) (fetcher.Fetcher, error)) (fetcher.Fetcher, error) {
	r.once.Do(func() {
		if r.f, r.err = open(r.spec); r.err == nil {
			r.opened.Store(&r.f)
		}
	})
	return r.f, r.err
}

// Manifest returns the manifest f serves.
func (f *Fetcher) Manifest() *Manifest { return f.m }

// resolve finds the fetcher and key of a target URL, refusing one outside
// every allowed root.
func (f *Fetcher) resolve(raw string) target {
	f.mu.Lock()
	t, ok := f.resolved[raw]
	f.mu.Unlock()
	if ok {
		return t
	}
	t = f.resolveNew(raw)
	f.mu.Lock()
	if len(f.resolved) < 1<<16 {
		f.resolved[raw] = t
	}
	f.mu.Unlock()
	return t
}

func (f *Fetcher) resolveNew(raw string) target {
	ref, err := url.Parse(raw)
	if err != nil {
		return target{err: fmt.Errorf("not a URL: %v", err)}
	}
	if ref.RawQuery != "" || ref.Fragment != "" {
		return target{err: errors.New("targets with a query or fragment are not supported")}
	}
	u := f.base.ResolveReference(ref)
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if u.Scheme == "file" && u.Host == "localhost" {
		u.Host = ""
	}
	for _, e := range strings.Split(u.Path, "/") {
		if e == "." || e == ".." {
			return target{err: errors.New("the target path climbs")}
		}
	}
	for _, r := range f.roots {
		if r.u.Scheme != u.Scheme || r.u.Host != u.Host {
			continue
		}
		key, ok := strings.CutPrefix(u.Path, r.u.Path+"/")
		if !ok || key == "" {
			continue
		}
		rf, err := r.fetcher(f.opts.Open)
		if err != nil {
			return target{err: err}
		}
		h := sha256.Sum256([]byte(rootSpec(r.u) + "\x00" + key))
		return target{f: rf, key: key, tag: hex.EncodeToString(h[:8]), remote: r.u.Scheme != "file"}
	}
	return target{err: fmt.Errorf("refused: %s lies outside the allowed roots (the reference file's directory %s; allow more with --refs-allow)", u.Redacted(), rootSpec(f.roots[0].u))}
}

// fail logs key's failure once and returns it as an error that wraps no
// fetcher sentinel (so it is EIO, never fill), except a context's end and
// fetcher.ErrChanged (not logged: the load that pinned the target decides).
func (f *Fetcher) fail(ctx context.Context, key, url string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	if errors.Is(err, fetcher.ErrChanged) {
		// The target is no longer the version the load pinned: the load
		// runs again (and the tree answers ESTALE at a second change).
		return fmt.Errorf("refs: key %q (%s): %w", key, url, err)
	}
	f.mu.Lock()
	first := !f.logged[key]
	if first && len(f.logged) < 1<<16 {
		f.logged[key] = true
	}
	f.mu.Unlock()
	if first {
		f.opts.Log.Error("reference set: cannot read a referenced chunk", "key", key, "url", url, "err", err.Error())
	}
	return fmt.Errorf("refs: key %q (%s): %v", key, url, err)
}

func (f *Fetcher) lookup(ctx context.Context, key string) (Ref, error) {
	r, ok := f.m.Lookup(key)
	if !ok && f.lazy != nil {
		return f.lazy.lookup(ctx, f, key)
	}
	if !ok {
		return Ref{}, fmt.Errorf("refs: %q: %w", key, fetcher.ErrNotExist)
	}
	return r, nil
}

func inlineID(b []byte) fetcher.Identity {
	h := sha256.Sum256(b)
	return fetcher.Identity("inline:" + hex.EncodeToString(h[:12]))
}

// targetID is the identity of a key served from the version id of target
// t: the target's own identity (ETag, generation, size and mtime), then
// which target it is and the byte range (negative length: the whole
// object). Naming the target keeps a tier entry from passing its check
// when the set is rewritten to point the key at another file whose
// identity happens to read the same (a Last-Modified and size, an ETag
// made of them as nginx makes it).
func targetID(id fetcher.Identity, t target, off, n int64) fetcher.Identity {
	if !id.Known() {
		return ""
	}
	return id + fetcher.Identity(idSuffix(t, off, n))
}

func idSuffix(t target, off, n int64) string {
	if n < 0 {
		return fmt.Sprintf(" @%s", t.tag)
	}
	return fmt.Sprintf(" @%s:%d+%d", t.tag, off, n)
}

// pinTarget passes a pin of key (fetcher.WithVersion, made from an
// identity targetID returned) on to the target, so that its fetcher sends
// the precondition its source supports (If-Match, ifGenerationMatch).
func pinTarget(ctx context.Context, key string, t target, r Ref) context.Context {
	id, ok := fetcher.Pinned(ctx, key)
	if !ok {
		return ctx
	}
	own, ok := strings.CutSuffix(string(id), idSuffix(t, r.Offset, r.Length))
	if !ok {
		return ctx
	}
	return fetcher.WithVersion(ctx, t.key, fetcher.Identity(own))
}

// Get implements fetcher.Fetcher.
func (f *Fetcher) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	r, err := f.lookup(ctx, key)
	if err != nil {
		return fetcher.Object{}, err
	}
	if r.URL == "" {
		if int64(len(r.Data)) > limit {
			return fetcher.Object{}, fmt.Errorf("refs: %q: %d bytes: %w", key, len(r.Data), fetcher.ErrTooLarge)
		}
		return fetcher.Object{Data: bytes.Clone(r.Data), ID: inlineID(r.Data)}, nil
	}
	t := f.resolve(r.URL)
	if t.err != nil {
		return fetcher.Object{}, f.fail(ctx, key, r.URL, t.err)
	}
	if r.Length < 0 {
		obj, err := t.f.Get(pinTarget(ctx, key, t, r), t.key, limit)
		if errors.Is(err, fetcher.ErrTooLarge) {
			return obj, err
		}
		if err != nil {
			return obj, f.fail(ctx, key, r.URL, err)
		}
		obj.ID = targetID(obj.ID, t, r.Offset, r.Length)
		return obj, nil
	}
	if r.Length > limit {
		return fetcher.Object{}, fmt.Errorf("refs: %q: reference of %d bytes: %w", key, r.Length, fetcher.ErrTooLarge)
	}
	b, id, err := f.lanes.read(pinTarget(ctx, key, t, r), t, r.Offset, r.Length)
	if err != nil {
		return fetcher.Object{}, f.fail(ctx, key, r.URL, err)
	}
	if int64(len(b)) != r.Length {
		return fetcher.Object{}, f.fail(ctx, key, r.URL, fmt.Errorf("the target ends before the range [%d, %d+%d)", r.Offset, r.Offset, r.Length))
	}
	return fetcher.Object{Data: b, ID: targetID(id, t, r.Offset, r.Length)}, nil
}

// GetRange implements fetcher.Fetcher.
func (f *Fetcher) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, fetcher.Identity, error) {
	r, err := f.lookup(ctx, key)
	if err != nil {
		return nil, "", err
	}
	if offset < 0 || length < 0 {
		return nil, "", fmt.Errorf("refs: %q: negative range", key)
	}
	if r.URL == "" {
		n := int64(len(r.Data))
		if offset >= n {
			return []byte{}, "", nil
		}
		return bytes.Clone(r.Data[offset:min(n, offset+min(length, n))]), inlineID(r.Data), nil
	}
	t := f.resolve(r.URL)
	if t.err != nil {
		return nil, "", f.fail(ctx, key, r.URL, t.err)
	}
	if r.Length < 0 {
		b, id, err := t.f.GetRange(pinTarget(ctx, key, t, r), t.key, offset, length)
		if err != nil {
			return nil, "", f.fail(ctx, key, r.URL, err)
		}
		return b, targetID(id, t, r.Offset, r.Length), nil
	}
	if offset >= r.Length {
		return []byte{}, "", nil
	}
	n := min(length, r.Length-offset)
	b, id, err := f.lanes.read(pinTarget(ctx, key, t, r), t, r.Offset+offset, n)
	if err != nil {
		return nil, "", f.fail(ctx, key, r.URL, err)
	}
	if int64(len(b)) != n {
		return nil, "", f.fail(ctx, key, r.URL, fmt.Errorf("the target ends before the range [%d, %d+%d)", r.Offset, r.Offset, r.Length))
	}
	return b, targetID(id, t, r.Offset, r.Length), nil
}

// Stat implements fetcher.Fetcher. For a ranged reference it asks the
// target, and refuses a target that ends before the range.
func (f *Fetcher) Stat(ctx context.Context, key string) (int64, fetcher.Identity, error) {
	r, err := f.lookup(ctx, key)
	if err != nil {
		return 0, "", err
	}
	if r.URL == "" {
		return int64(len(r.Data)), inlineID(r.Data), nil
	}
	t := f.resolve(r.URL)
	if t.err != nil {
		return 0, "", f.fail(ctx, key, r.URL, t.err)
	}
	size, id, err := t.f.Stat(ctx, t.key)
	if err != nil {
		return 0, "", f.fail(ctx, key, r.URL, err)
	}
	if r.Length < 0 {
		return size, targetID(id, t, r.Offset, r.Length), nil
	}
	if size < r.Offset+r.Length {
		return 0, "", f.fail(ctx, key, r.URL, fmt.Errorf("the target of %d bytes ends before the range [%d, %d+%d)", size, r.Offset, r.Offset, r.Length))
	}
	return r.Length, targetID(id, t, r.Offset, r.Length), nil
}

// List implements fetcher.Fetcher over the manifest's keys.
func (f *Fetcher) List(ctx context.Context, prefix string) ([]fetcher.Entry, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	es, ok := f.m.entries(prefix)
	if !ok {
		return nil, fmt.Errorf("refs: %q: %w", prefix, fetcher.ErrNotExist)
	}
	return es, nil
}

// String implements fetcher.Fetcher.
func (f *Fetcher) String() string { return "refs+" + f.base.String() }
