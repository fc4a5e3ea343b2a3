package refs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/volfs/volfs/fetcher"
)

func parse(t *testing.T, s string) *Manifest {
	t.Helper()
	m, err := ParseKerchunk(strings.NewReader(s), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantRef(t *testing.T, m *Manifest, key string, want Ref) {
	t.Helper()
	got, ok := m.Lookup(key)
	if !ok {
		t.Fatalf("%s: absent", key)
	}
	if string(got.Data) != string(want.Data) || got.URL != want.URL || got.Offset != want.Offset || got.Length != want.Length {
		t.Errorf("%s = %+v, want %+v", key, got, want)
	}
}

// TestParseSpecExample parses the version 1 example of fsspec's
// ReferenceFileSystem specification: templates, gen with an arithmetic
// offset, inline, base64 and ranged references.
func TestParseSpecExample(t *testing.T) {
	m := parse(t, `{
	  "version": 1,
	  "templates": {"u": "server.domain/path", "f": "unused"},
	  "gen": [{"key": "gen_key{{i}}", "url": "http://{{u}}_{{i}}", "offset": "{{(i + 1) * 1000}}", "length": "1000",
	           "dimensions": {"i": {"stop": 5}}}],
	  "refs": {"key0": "data", "key1": ["http://target_url", 10000, 100], "key2": ["http://{{u}}", 10000, 100], "key4": "base64:aGVsbG8=", "key5": ["s3://bucket/whole"],
	           "a/.zarray": {"zarr_format": 2}}
	}`)
	wantRef(t, m, "key0", Ref{Data: []byte("data")})
	wantRef(t, m, "key1", Ref{URL: "http://target_url", Offset: 10000, Length: 100})
	wantRef(t, m, "key2", Ref{URL: "http://server.domain/path", Offset: 10000, Length: 100})
	wantRef(t, m, "key4", Ref{Data: []byte("hello")})
	wantRef(t, m, "key5", Ref{URL: "s3://bucket/whole", Length: -1})
	wantRef(t, m, "a/.zarray", Ref{Data: []byte(`{"zarr_format":2}`)})
	for i := 0; i < 5; i++ {
		wantRef(t, m, fmt.Sprintf("gen_key%d", i), Ref{URL: fmt.Sprintf("http://server.domain/path_%d", i), Offset: int64(i+1) * 1000, Length: 1000})
	}
	if _, ok := m.Lookup("gen_key5"); ok {
		t.Error("gen_key5 generated past stop")
	}
}

func TestParseVersion0(t *testing.T) {
	m := parse(t, `{".zgroup": "{\"zarr_format\": 2}", "x/0": ["data.bin", 3, 4]}`)
	wantRef(t, m, ".zgroup", Ref{Data: []byte(`{"zarr_format": 2}`)})
	wantRef(t, m, "x/0", Ref{URL: "data.bin", Offset: 3, Length: 4})
}

func TestParseGenListsAndProduct(t *testing.T) {
	m := parse(t, `{"version": 1, "gen": [{"key": "v/{{t}}.{{j}}", "url": "f_{{t}}.h5", "offset": "{{j * 10 + 5}}", "length": "10",
	  "dimensions": {"t": ["a", "b"], "j": {"start": 2, "stop": 8, "step": 3}}}]}`)
	if m.Len() != 4 {
		t.Fatalf("%d keys, want 4", m.Len())
	}
	wantRef(t, m, "v/b.5", Ref{URL: "f_b.h5", Offset: 55, Length: 10})
}

// TestParseGenListEscapes: a list dimension's strings are their values,
// as fsspec reads them: Python's json.dump writes "données" as
// "donn\u00e9es", which was kept escaped (a URL of no file, EIO), and a
// quote inside a name kept its backslash.
func TestParseGenListEscapes(t *testing.T) {
	m := parse(t, `{"version": 1, "gen": [{"key": "v/{{n}}", "url": "{{f}}.bin", "offset": "0", "length": "1",
	  "dimensions": {"f": ["donn\u00e9es", "a\"b"], "n": [7]}}]}`)
	if m.Len() != 1 {
		t.Fatalf("%d keys, want 1", m.Len())
	}
	wantRef(t, m, "v/7", Ref{URL: `a"b.bin`, Length: 1})
	m = parse(t, `{"version": 1, "gen": [{"key": "v/{{f}}", "url": "{{f}}.bin", "offset": "0", "length": "1",
	  "dimensions": {"f": ["donn\u00e9es", 3]}}]}`)
	wantRef(t, m, "v/données", Ref{URL: "données.bin", Length: 1})
	wantRef(t, m, "v/3", Ref{URL: "3.bin", Length: 1})
}

// TestEvalIntPython: gen arithmetic is Python's, as jinja2 renders it for
// fsspec: // and % floor toward negative infinity (Go's truncate, which
// made (0-3)//2 -1, not -2, and read another range of the target), and
// a result past int64 is refused, not wrapped. The values are jinja2
// 3.1's.
func TestEvalIntPython(t *testing.T) {
	vars := map[string]string{"i": "0", "big": "9223372036854775807"}
	for expr, want := range map[string]int64{
		"(i - 3) // 2 + 10": 8, "(i - 3) % 4 * 100": 100, "7 // (0 - 2)": -4, "(i - 7) % (0 - 3)": -1,
		"7 // 2": 3, "7 % 3": 1, "(0 - 7) // (0 - 2)": 3, "(0 - 7) % (0 - 2)": -1, "6 // (0 - 3)": -2, "(0 - 6) % 3": 0,
		"big - 1 + 1": 9223372036854775807, "3037000499 * 3037000499": 9223372030926249001,
	} {
		got, err := evalInt(expr, vars)
		if err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", expr, got, err, want)
		}
	}
	for _, expr := range []string{"big + 1", "0 - big - 2", "3037000500 * 3037000500", "big * 2", "(0 - big - 1) // (0 - 1)", "(0 - big - 1) * (0 - 1)"} {
		if got, err := evalInt(expr, vars); !errors.Is(err, errOverflow) {
			t.Errorf("%s = %d, %v; want an overflow refused", expr, got, err)
		}
	}
}

// TestParseRefuses: hostile sets are refused quickly, naming the problem.
func TestParseRefuses(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"2^63 length":     {`{"a/0": ["f", 0, 9223372036854775807]}`, "out of bounds"},
		"length overflow": {`{"a/0": ["f", 9223372036854775807, 10]}`, "out of bounds"},
		"negative":        {`{"a/0": ["f", -1, 10]}`, "offset"},
		"huge gen":        {`{"version": 1, "gen": [{"key": "k{{i}}", "url": "f", "offset": "0", "length": "1", "dimensions": {"i": {"stop": 9000000000000000000}}}]}`, "more than"},
		"gen product":     {`{"version": 1, "gen": [{"key": "k{{i}}{{j}}", "url": "f", "offset": "0", "length": "1", "dimensions": {"i": {"stop": 100000}, "j": {"stop": 100000}}}]}`, "more than"},
		"nested":          {`{"a": {"b": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}`, "nested deeper"},
		"climbing key":    {`{"../x": "a"}`, "not a clean"},
		"bad version":     {`{"version": 2, "refs": {}}`, "version"},
		"number value":    {`{"a": 5}`, "want a string"},
		"bad base64":      {`{"a": "base64:!!"}`, "base64"},
		"trailing data":   {`{"a": "b"} {}`, "after"},
	} {
		start := time.Now()
		_, err := ParseKerchunk(strings.NewReader(c.body), Limits{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", name, err, c.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	if _, err := ParseKerchunk(strings.NewReader(`[1]`), Limits{}); !errors.Is(err, ErrNotReferenceSet) {
		t.Errorf("an array: %v, want ErrNotReferenceSet", err)
	}
}

// TestParseExpansionBound: what templates and gen make is bounded in
// bytes, naming the key: a template of 60 KiB named by 100 distinct short
// URLs (6 MB made of 2 KB of JSON; a million of them held 60 GB), and a
// gen of 1000 keys each of a 4000-byte template. A gen of many keys
// sharing one URL counts that URL once, and the two bounds are met
// exactly when allowed.
func TestParseExpansionBound(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, `{"version": 1, "templates": {"t": "%s"}, "refs": {".zgroup": "{}"`, strings.Repeat("x", 60000))
	for i := range 100 {
		fmt.Fprintf(&b, `, "a/%d": ["{{t}}/%d", 0, 1]`, i, i)
	}
	b.WriteString("}}")
	lim := Limits{MaxExpanded: 5 << 20}
	if _, err := ParseKerchunk(strings.NewReader(b.String()), lim); err == nil || !strings.Contains(err.Error(), `key "a/`) || !strings.Contains(err.Error(), "expand to more than 5242880 bytes") {
		t.Errorf("templates: err %v, want a refusal naming a key and the bound", err)
	}
	if _, err := ParseKerchunk(strings.NewReader(b.String()), Limits{MaxExpanded: 100 * 60003}); err != nil {
		t.Errorf("templates within the bound: %v", err)
	}
	gen := fmt.Sprintf(`{"version": 1, "templates": {"k": "%s"}, "gen": [{"key": "{{k}}/{{i}}", "url": "f", "offset": "0", "length": "1", "dimensions": {"i": {"stop": 1000}}}]}`, strings.Repeat("k", 4000))
	if _, err := ParseKerchunk(strings.NewReader(gen), Limits{MaxExpanded: 1 << 20}); err == nil || !strings.Contains(err.Error(), "refs: gen") || !strings.Contains(err.Error(), "expand to more than") {
		t.Errorf("gen: err %v, want a refusal naming the gen key and the bound", err)
	}
	if m, err := ParseKerchunk(strings.NewReader(gen), Limits{MaxExpanded: 1 + 1000*4001 + 2890}); err != nil || m.Len() != 1000 {
		t.Errorf("gen within the bound: %v", err)
	}
}

// TestParseMillion: a million references parse in seconds.
func TestParseMillion(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("a timing test: not under -short or -race")
	}
	var b strings.Builder
	b.WriteString(`{"version": 1, "refs": {".zgroup": "{}"`)
	for i := 0; i < 1000000; i++ {
		fmt.Fprintf(&b, `, "v/%d.%d": ["data.h5", %d, 1000]`, i/1000, i%1000, i*1000)
	}
	b.WriteString("}}")
	start := time.Now()
	m, err := ParseKerchunk(strings.NewReader(b.String()), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1000001 || len(m.URLs()) != 1 {
		t.Fatalf("%d keys, %d URLs", m.Len(), len(m.URLs()))
	}
	t.Logf("1e6 references (%d MB of JSON) parsed in %v", b.Len()>>20, time.Since(start))
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestResolve: targets resolve against the reference file; only its own
// directory tree is reachable unless allowed.
func TestResolve(t *testing.T) {
	root := t.TempDir()
	set := filepath.Join(root, "set")
	other := filepath.Join(root, "other")
	for _, d := range []string{set, other, filepath.Join(set, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(set, "sub", "d.bin"), []byte("0123456789"), 0o644)
	os.WriteFile(filepath.Join(other, "o.bin"), []byte("abcdefghij"), 0o644)
	body := fmt.Sprintf(`{"version": 1, "refs": {"rel": ["sub/d.bin", 2, 3], "abs": ["%s/sub/d.bin", 1, 2], "url": ["file://%s/sub/d.bin", 0, 1],
	  "climb": ["../other/o.bin", 0, 2], "other": ["%s/o.bin", 0, 2], "host": ["http://example.com/x", 0, 1], "past": ["sub/d.bin", 8, 4],
	  "whole": ["sub/d.bin"], "enc": ["sub/%%2e%%2e/../../other/o.bin", 0, 1], "in": "inline"}}`, set, set, other)
	os.WriteFile(filepath.Join(set, "refs.json"), []byte(body), 0o644)
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	ctx := context.Background()
	f, err := Load(ctx, filepath.Join(set, "refs.json"), Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"rel": "234", "abs": "12", "url": "0", "whole": "0123456789", "in": "inline"} {
		obj, err := f.Get(ctx, key, 100)
		if err != nil || string(obj.Data) != want {
			t.Errorf("%s: %q, %v; want %q", key, obj.Data, err, want)
		}
	}
	for _, key := range []string{"climb", "other", "host", "past", "enc"} {
		_, err := f.Get(ctx, key, 100)
		if err == nil || errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s: %v, want an error that is not ErrNotExist", key, err)
		}
	}
	if _, err := f.Get(ctx, "absent", 100); !errors.Is(err, fetcher.ErrNotExist) {
		t.Errorf("absent: %v, want ErrNotExist", err)
	}
	if _, err := f.Get(ctx, "rel", 2); !errors.Is(err, fetcher.ErrTooLarge) {
		t.Errorf("rel with limit 2: %v, want ErrTooLarge", err)
	}
	if _, _, err := f.Stat(ctx, "past"); err == nil {
		t.Error("Stat of a range past the end succeeded")
	}
	if b, _, err := f.GetRange(ctx, "rel", 1, 10); err != nil || string(b) != "34" {
		t.Errorf("GetRange(rel, 1, 10) = %q, %v", b, err)
	}
	// Allowing the other directory lets "climb" and "other" through.
	f, err = Load(ctx, filepath.Join(set, "refs.json"), Options{Open: open, Allow: []string{other}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"climb", "other"} {
		if obj, err := f.Get(ctx, key, 100); err != nil || string(obj.Data) != "ab" {
			t.Errorf("%s allowed: %q, %v", key, obj.Data, err)
		}
	}
	es, err := f.List(ctx, "")
	if err != nil || len(es) != 10 {
		t.Errorf("List: %v, %v", es, err)
	}
}

// TestResolveRemote: a set served over HTTP reaches its own directory on
// its own host and port only; file:// targets, other directories and
// other ports are refused unless allowed.
func TestResolveRemote(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"set", "other"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "set", "x.bin"), []byte("xxxx"), 0o644)
	os.WriteFile(filepath.Join(dir, "other", "y.bin"), []byte("yyyy"), 0o644)
	local := filepath.Join(dir, "other", "y.bin")
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	other := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer other.Close()
	os.WriteFile(filepath.Join(dir, "set", "refs.json"), []byte(fmt.Sprintf(`{"version": 1, "refs": {
	  "own": ["x.bin", 1, 2], "file": ["file://%s", 0, 2], "path": ["%s", 0, 2], "dir": ["/other/y.bin", 0, 2],
	  "climb": ["../other/y.bin", 0, 2], "port": ["%s/set/x.bin", 0, 2]}}`, local, local, other.URL)), 0o644)
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	ctx := context.Background()
	f, err := Load(ctx, srv.URL+"/set/refs.json", Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if obj, err := f.Get(ctx, "own", 10); err != nil || string(obj.Data) != "xx" {
		t.Errorf("own: %q, %v", obj.Data, err)
	}
	for _, key := range []string{"file", "path", "dir", "climb", "port"} {
		if obj, err := f.Get(ctx, key, 10); err == nil || errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s: %q, %v; want refused", key, obj.Data, err)
		}
	}
	f, err = Load(ctx, srv.URL+"/set/refs.json", Options{Open: open, Allow: []string{srv.URL + "/other", "file://" + filepath.Dir(local)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"file", "dir", "climb"} {
		if obj, err := f.Get(ctx, key, 10); err != nil || string(obj.Data) != "yy" {
			t.Errorf("%s allowed: %q, %v", key, obj.Data, err)
		}
	}
	if _, err := f.Get(ctx, "port", 10); err == nil {
		t.Error("port: read although its port is not allowed")
	}
	if _, err := Load(ctx, srv.URL+"/set/x.bin", Options{Open: open}); !errors.Is(err, ErrNotReferenceSet) {
		t.Errorf("a non-JSON object: %v, want ErrNotReferenceSet", err)
	}
}
