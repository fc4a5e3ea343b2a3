package refs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/volfs/volfs/fetcher"
)

// pqRow is a record file row as kerchunk writes it.
type pqRow struct {
	Path   *string `parquet:"path,optional"`
	Offset int64   `parquet:"offset"`
	Size   int64   `parquet:"size"`
	Raw    *[]byte `parquet:"raw,optional"` // a pointer: parquet-go v0.32.1 writes a nil []byte after a non-nil one as empty, not null
}

func str(s string) *string { return &s }

func raw(s string) *[]byte { b := []byte(s); return &b }

func writeRecord(t *testing.T, p string, rows []pqRow) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := parquet.Write(&b, rows, parquet.Compression(&parquet.Zstd)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZmetadata(t *testing.T, set string, recordSize int, meta string) {
	t.Helper()
	if err := os.MkdirAll(set, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"metadata": %s, "record_size": %d}`, meta, recordSize)
	if err := os.WriteFile(filepath.Join(set, ".zmetadata"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// countingOpen opens local roots and counts the record files read.
func countingOpen(n *atomic.Int64) func(string) (fetcher.Fetcher, error) {
	return func(s string) (fetcher.Fetcher, error) {
		f, err := fetcher.Open(s, fetcher.Options{})
		return &countingFetcher{Fetcher: f, n: n}, err
	}
}

type countingFetcher struct {
	fetcher.Fetcher
	n *atomic.Int64
}

func (c *countingFetcher) Get(ctx context.Context, key string, limit int64) (fetcher.Object, error) {
	if strings.HasSuffix(key, ".parq") {
		c.n.Add(1)
	}
	return c.Fetcher.Get(ctx, key, limit)
}

// TestParquetLayout: a chunk key maps to row (linear index % record_size)
// of record file linear index / record_size; raw is inline, offset = size
// = 0 the whole file, a null path or a record file that does not exist
// absent (ErrNotExist), a key outside the grid absent too; the metadata
// keys are inline.
func TestParquetLayout(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "refs.parq")
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), []byte("0123456789abcdefghij"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a: grid 3 x 2 (shape 5 x 4, chunks 2 x 2); record_size 4: records 0
	// (rows 0.0 0.1 1.0 1.1) and 1 (2.0 2.1). b: nested keys, grid 2 x 2,
	// record 0 only; its record 1 does not exist. c: a scalar.
	writeZmetadata(t, set, 4, `{
	  ".zgroup": {"zarr_format": 2},
	  "a/.zarray": {"zarr_format": 2, "shape": [5, 4], "chunks": [2, 2], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"},
	  "a/.zattrs": {"x": 1},
	  "g/b/.zarray": {"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C", "dimension_separator": "/"},
	  "c/.zarray": {"zarr_format": 2, "shape": [], "chunks": [], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}
	}`)
	writeRecord(t, filepath.Join(set, "a", "refs.0.parq"), []pqRow{
		{Path: str("data.bin"), Offset: 2, Size: 3},
		{Raw: raw("inline")},
		{},
		{Path: str("data.bin")},
	})
	writeRecord(t, filepath.Join(set, "a", "refs.1.parq"), []pqRow{
		{Path: str("data.bin"), Offset: 10, Size: 4},
		{Path: str("data.bin"), Offset: 18, Size: 4}, // past the end
		{}, {},
	})
	writeRecord(t, filepath.Join(set, "g", "b", "refs.0.parq"), []pqRow{
		{}, {}, {}, {Path: str("data.bin"), Offset: 5, Size: 1},
	})
	writeRecord(t, filepath.Join(set, "c", "refs.0.parq"), []pqRow{{Raw: raw("s")}})
	var loads atomic.Int64
	ctx := context.Background()
	var logs bytes.Buffer
	f, err := LoadParquet(ctx, set, Options{Open: countingOpen(&loads), Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if loads.Load() != 0 {
		t.Errorf("loading the set read %d record files, want none", loads.Load())
	}
	for key, want := range map[string]string{
		"a/0.0": "234", "a/0.1": "inline", "a/1.1": "0123456789abcdefghij", "a/2.0": "abcd",
		"g/b/1/1": "5", "c/0": "s", ".zgroup": `{"zarr_format":2}`, "a/.zattrs": `{"x":1}`,
	} {
		obj, err := f.Get(ctx, key, 100)
		if err != nil || string(obj.Data) != want {
			t.Errorf("%s: %q, %v; want %q", key, obj.Data, err, want)
		}
	}
	if n := loads.Load(); n != 4 {
		t.Errorf("read %d record files, want 4 (each once)", n)
	}
	for _, key := range []string{"a/1.0", "a/2.2", "a/3.0", "a/0", "a/00.0", "a/-0.0", "g/b/0/0", "g/b/1.1", "x/0.0", "c/1", "a/.zarray/0"} {
		if _, err := f.Get(ctx, key, 100); !errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s: %v, want ErrNotExist", key, err)
		}
	}
	if _, err := f.Get(ctx, "a/2.1", 100); err == nil || errors.Is(err, fetcher.ErrNotExist) {
		t.Errorf("a/2.1 (past the end of data.bin): %v, want an error that is not ErrNotExist", err)
	}
	if !strings.Contains(logs.String(), "key=a/2.1") {
		t.Errorf("no log line names a/2.1: %s", logs.String())
	}
	es, err := f.List(ctx, "")
	if err != nil || len(es) != 4 {
		t.Errorf("List: %v, %v; want .zgroup a c g", es, err)
	}
}

// TestParquetHostile: record files that are not Parquet, are truncated,
// hold too many rows or columns of the wrong type, and rows whose range
// is negative or 2^63 long, are errors that are not ErrNotExist, each
// logged with its key, in bounded time.
func TestParquetHostile(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "refs.parq")
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	var meta []string
	for _, v := range []string{"junk", "trunc", "garbled", "rows", "ranges", "types", "empty"} {
		meta = append(meta, fmt.Sprintf(`"%s/.zarray": {"zarr_format": 2, "shape": [3], "chunks": [1], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}`, v))
	}
	meta = append(meta, `"huge/.zarray": {"zarr_format": 2, "shape": [9223372036854775807, 9223372036854775807], "chunks": [1, 1], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}`)
	writeZmetadata(t, set, 3, "{"+strings.Join(meta, ",")+"}")
	os.MkdirAll(filepath.Join(set, "junk"), 0o755)
	os.WriteFile(filepath.Join(set, "junk", "refs.0.parq"), []byte("this is not a parquet file at all"), 0o644)
	writeRecord(t, filepath.Join(set, "trunc", "refs.0.parq"), []pqRow{{Path: str("data.bin"), Offset: 1, Size: 2}, {}, {}})
	b, _ := os.ReadFile(filepath.Join(set, "trunc", "refs.0.parq"))
	os.WriteFile(filepath.Join(set, "trunc", "refs.0.parq"), b[:len(b)/2], 0o644)
	writeRecord(t, filepath.Join(set, "garbled", "refs.0.parq"), []pqRow{{Path: str("data.bin"), Offset: 1, Size: 2}, {Raw: raw("abc")}, {}})
	b, _ = os.ReadFile(filepath.Join(set, "garbled", "refs.0.parq"))
	for i := 4; i < len(b)/2; i++ {
		b[i] = 0xff
	}
	os.WriteFile(filepath.Join(set, "garbled", "refs.0.parq"), b, 0o644)
	writeRecord(t, filepath.Join(set, "rows", "refs.0.parq"), []pqRow{{}, {}, {}, {}})
	writeRecord(t, filepath.Join(set, "ranges", "refs.0.parq"), []pqRow{
		{Path: str("data.bin"), Offset: -1, Size: 2},
		{Path: str("data.bin"), Offset: 1, Size: 1<<63 - 1},
		{Path: str("data.bin"), Offset: 1<<63 - 1, Size: 1},
	})
	type wrongRow struct {
		Path float64 `parquet:"path"`
	}
	var wb bytes.Buffer
	parquet.Write(&wb, []wrongRow{{1}, {2}, {3}})
	os.MkdirAll(filepath.Join(set, "types"), 0o755)
	os.WriteFile(filepath.Join(set, "types", "refs.0.parq"), wb.Bytes(), 0o644)
	os.MkdirAll(filepath.Join(set, "empty"), 0o755)
	os.WriteFile(filepath.Join(set, "empty", "refs.0.parq"), nil, 0o644)

	var logs bytes.Buffer
	ctx := context.Background()
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	f, err := LoadParquet(ctx, set, Options{Open: open, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, key := range []string{"junk/0", "trunc/0", "garbled/0", "garbled/1", "rows/1", "ranges/0", "ranges/1", "ranges/2", "types/0", "empty/0", "huge/0.0"} {
		_, err := f.Get(ctx, key, 1<<20)
		if err == nil || errors.Is(err, fetcher.ErrNotExist) {
			t.Errorf("%s: %v, want an error that is not ErrNotExist", key, err)
		}
		if _, _, err := f.Stat(ctx, key); err == nil {
			t.Errorf("%s: Stat succeeded", key)
		}
		t.Log(err)
		if got := strings.Count(logs.String(), "key="+key+" "); got != 1 {
			t.Errorf("%s: %d log lines name it, want 1:\n%s", key, got, logs.String())
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the hostile keys took %v", d)
	}

	for name, body := range map[string]string{
		"no record_size":   `{"metadata": {}}`,
		"not JSON":         `PAR1`,
		"consolidated v2":  `{"metadata": {".zgroup": {"zarr_format": 2}}, "zarr_consolidated_format": 1}`,
		"zero record_size": `{"metadata": {}, "record_size": 0}`,
		"2^63 record_size": `{"metadata": {}, "record_size": 9223372036854775808}`,
		"climbing key":     `{"metadata": {"../x/.zarray": {}}, "record_size": 3}`,
	} {
		os.WriteFile(filepath.Join(set, ".zmetadata"), []byte(body), 0o644)
		_, err := LoadParquet(ctx, set, Options{Open: open})
		if err == nil {
			t.Errorf("%s: loaded", name)
		}
		if strings.HasPrefix(body, `{"metadata": {}}`) || name == "not JSON" || name == "consolidated v2" {
			if !errors.Is(err, ErrNotReferenceSet) {
				t.Errorf("%s: %v, want ErrNotReferenceSet", name, err)
			}
		}
	}
	if _, err := LoadParquet(ctx, filepath.Join(dir, "nothing"), Options{Open: open}); !errors.Is(err, fetcher.ErrNotExist) {
		t.Errorf("a directory without .zmetadata: %v, want ErrNotExist", err)
	}
}

// TestParquetRecordCache: loaded records stay within the cache's byte
// budget (least recently used out), and concurrent readers of one record
// share one load.
func TestParquetRecordCache(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "refs.parq")
	os.WriteFile(filepath.Join(dir, "data.bin"), []byte("0123456789"), 0o644)
	writeZmetadata(t, set, 100, `{"v/.zarray": {"zarr_format": 2, "shape": [1000], "chunks": [1], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}}`)
	for r := 0; r < 10; r++ {
		rows := make([]pqRow, 100)
		for i := range rows {
			rows[i] = pqRow{Path: str("data.bin"), Offset: int64((r*100 + i) % 10), Size: 1}
		}
		writeRecord(t, filepath.Join(set, "v", fmt.Sprintf("refs.%d.parq", r)), rows)
	}
	var loads atomic.Int64
	ctx := context.Background()
	f, err := LoadParquet(ctx, set, Options{Open: countingOpen(&loads)})
	if err != nil {
		t.Fatal(err)
	}
	f.lazy.records.budget = 3 * 100 * 48 // about three records
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if obj, err := f.Get(ctx, fmt.Sprint(i), 1); err == nil || !errors.Is(err, fetcher.ErrNotExist) {
				_ = obj // not a key: a plain name under no array
			}
			if obj, err := f.Get(ctx, fmt.Sprintf("v/%d", 500+i), 1); err != nil || string(obj.Data) != fmt.Sprint(i%10) {
				t.Errorf("v/%d: %q, %v", 500+i, obj.Data, err)
			}
		}()
	}
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Errorf("16 concurrent readers of one record loaded it %d times, want 1", n)
	}
	for r := 0; r < 10; r++ {
		if obj, err := f.Get(ctx, fmt.Sprintf("v/%d", r*100+7), 1); err != nil || string(obj.Data) != "7" {
			t.Errorf("v/%d: %q, %v", r*100+7, obj.Data, err)
		}
	}
	c := f.lazy.records
	c.mu.Lock()
	held, used := c.lru.Len(), c.used
	c.mu.Unlock()
	if used > c.budget || held > 3 {
		t.Errorf("the cache holds %d records of %d bytes, over its budget of %d", held, used, c.budget)
	}
	before := loads.Load()
	f.Get(ctx, "v/907", 1) // the most recent record: still held
	if loads.Load() != before {
		t.Error("the most recently used record was evicted")
	}
	f.Get(ctx, "v/7", 1) // the oldest: evicted, loaded again
	if loads.Load() != before+1 {
		t.Error("the least recently used record was not evicted")
	}
}

// TestParquetOverHTTP reads a set from an http directory: the record
// files and targets resolve against its URL. The server refuses HEAD, as
// a URL signed for GET does: the set is read with GETs only.
func TestParquetOverHTTP(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "s", "refs.parq")
	os.MkdirAll(filepath.Join(dir, "s"), 0o755)
	os.WriteFile(filepath.Join(dir, "s", "data.bin"), []byte("0123456789"), 0o644)
	writeZmetadata(t, set, 10, `{"v/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [1], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}}`)
	writeRecord(t, filepath.Join(set, "v", "refs.0.parq"), []pqRow{{Path: str("data.bin"), Offset: 3, Size: 2}, {Path: str("../data.bin"), Offset: 3, Size: 2}})
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			// As a presigned URL, signed for GET only, answers.
			http.Error(w, "signature does not match", http.StatusForbidden)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx := context.Background()
	open := func(s string) (fetcher.Fetcher, error) { return fetcher.Open(s, fetcher.Options{}) }
	f, err := LoadParquet(ctx, srv.URL+"/s/refs.parq/", Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if obj, err := f.Get(ctx, "v/0", 10); err != nil || string(obj.Data) != "34" {
		t.Errorf("v/0: %q, %v", obj.Data, err)
	}
	if _, err := f.Get(ctx, "v/1", 10); err == nil {
		t.Error("v/1 climbs out of the set's directory, yet reads")
	}
}

// FuzzDecodeRecord: any bytes decode to a record of at most record_size
// rows or an error, never a panic.
func FuzzDecodeRecord(f *testing.F) {
	for _, rows := range [][]pqRow{
		{{Path: str("data.bin"), Offset: 1, Size: 2}, {Raw: raw("abc")}, {}},
		{{Path: str("a")}, {Path: str("a"), Offset: 5, Size: 6}},
	} {
		var b bytes.Buffer
		if err := parquet.Write(&b, rows, parquet.Compression(&parquet.Zstd)); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord(data, 4)
		if err == nil && len(r.rows) > 4 {
			t.Errorf("%d rows, more than record_size", len(r.rows))
		}
	})
}

// TestParquetMutatedBounded decodes thousands of mutations of record files
// (bytes changed, lengths set to 2^31-1, bytes inserted and removed): each
// decodes or fails within a second, allocating at most 64 MiB, although
// the Parquet reader allocates what a file declares before reading it.
func TestParquetMutatedBounded(t *testing.T) {
	var seeds [][]byte
	for _, c := range []compress.Codec{&parquet.Zstd, &parquet.Snappy, &parquet.Gzip, &parquet.Uncompressed} {
		var b bytes.Buffer
		rows := []pqRow{{Path: str("data.bin"), Offset: 1, Size: 2}, {Raw: raw("abc")}, {}, {Path: str("data.bin")}}
		if err := parquet.Write(&b, rows, parquet.Compression(c)); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b.Bytes())
	}
	rng := rand.New(rand.NewSource(7))
	var ms runtime.MemStats
	for it := range 4000 {
		d := bytes.Clone(seeds[it%len(seeds)])
		for range 1 + rng.Intn(4) {
			p := rng.Intn(len(d))
			switch rng.Intn(4) {
			case 0:
				d[p] = byte(rng.Intn(256))
			case 1:
				if p+4 < len(d) {
					copy(d[p:], []byte{0xff, 0xff, 0xff, 0x7f})
				}
			case 2:
				d = append(d[:p:p], append([]byte{byte(rng.Intn(256)), byte(rng.Intn(256))}, d[p:]...)...)
			case 3:
				if p+2 < len(d) {
					d = append(d[:p:p], d[p+2:]...)
				}
			}
		}
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		start := time.Now()
		rec, err := decodeRecord(d, 4)
		if err == nil && len(rec.rows) > 4 {
			t.Fatalf("mutation %d: %d rows", it, len(rec.rows))
		}
		runtime.ReadMemStats(&ms)
		if a := ms.TotalAlloc - before; a > 64<<20 {
			t.Fatalf("mutation %d allocated %d MiB (%v)", it, a>>20, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("mutation %d took %v", it, d)
		}
	}
}

// TestParquetBomb: a page that decompresses to more than its header says
// is refused before the reader decodes it.
func TestParquetBomb(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(make([]byte, 32<<20))
	w.Close()
	if err := checkDecompressed(format.Gzip, z.Bytes(), 1000); err == nil {
		t.Errorf("a gzip page of %d bytes that decompresses to 32 MiB passed as 1000 bytes", z.Len())
	}
	if err := checkDecompressed(format.Gzip, z.Bytes(), 32<<20); err != nil {
		t.Errorf("the same page with its true size: %v", err)
	}
	// a thrift byte string that claims 2^31-1 bytes
	if _, err := thriftWalk([]byte{0x18, 0xff, 0xff, 0xff, 0xff, 0x07, 'a', 0}); err == nil {
		t.Error("a thrift string longer than its bytes passed")
	}
}

// TestParquetSetPinned: a Parquet set is one version for as long as it is
// mounted. A record file read before and rewritten since (read again once
// evicted) is refused, and so is a record file read for the first time
// after .zmetadata was rewritten: both with errors wrapping
// fetcher.ErrChanged, never the new rows under the old metadata.
func TestParquetSetPinned(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "refs.parq")
	os.WriteFile(filepath.Join(dir, "data.bin"), []byte("0123456789"), 0o644)
	meta := `{"v/.zarray": {"zarr_format": 2, "shape": [6], "chunks": [1], "dtype": "|u1", "compressor": null, "filters": null, "fill_value": 0, "order": "C"}}`
	writeZmetadata(t, set, 2, meta)
	record := func(r int, first int64) {
		t.Helper()
		p := filepath.Join(set, "v", fmt.Sprintf("refs.%d.parq", r))
		writeRecord(t, p, []pqRow{{Path: str("data.bin"), Offset: first, Size: 1}, {Path: str("data.bin"), Offset: first + 1, Size: 1}})
		// A distinct modification time, whatever the file system's
		// timestamp granularity.
		mt := time.Now().Add(time.Duration(r+int(first)) * time.Hour)
		os.Chtimes(p, mt, mt)
	}
	for r := range 3 {
		record(r, int64(2*r))
	}
	ctx := context.Background()
	f, err := LoadParquet(ctx, set, Options{Open: countingOpen(new(atomic.Int64)), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.lazy.records.budget = 1 // one record held at a time
	read := func(key string) (string, error) {
		obj, err := f.Get(ctx, key, 1)
		return string(obj.Data), err
	}
	for _, key := range []string{"v/0", "v/2"} { // record 1 evicts record 0
		if got, err := read(key); err != nil || got != key[2:] {
			t.Fatalf("%s: %q, %v; want %q", key, got, err, key[2:])
		}
	}
	// Record 0, read once and evicted by record 1, is rewritten.
	record(0, 6)
	if got, err := read("v/0"); !errors.Is(err, fetcher.ErrChanged) {
		t.Errorf("v/0 after its record was rewritten: %q, %v; want ErrChanged", got, err)
	}
	// The set is regenerated: record 2, never read, is new, and so is
	// .zmetadata.
	record(2, 7)
	writeZmetadata(t, set, 2, strings.Replace(meta, `"fill_value": 0`, `"fill_value": 1`, 1))
	mt := time.Now().Add(10 * time.Hour)
	os.Chtimes(filepath.Join(set, ".zmetadata"), mt, mt)
	if got, err := read("v/4"); !errors.Is(err, fetcher.ErrChanged) {
		t.Errorf("v/4 of a record first read after .zmetadata was rewritten: %q, %v; want ErrChanged", got, err)
	}
	// Record 1 is still held, from the version mounted.
	if got, err := read("v/3"); err != nil || got != "3" {
		t.Errorf("v/3: %q, %v; want \"3\"", got, err)
	}
}
