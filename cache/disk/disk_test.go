package disk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

func open(t *testing.T, dir string, max int64) *Cache {
	t.Helper()
	c, err := Open(Options{Dir: dir, MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPutGet(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	data := bytes.Repeat([]byte("chunk data "), 1000)
	if _, ok := c.Get("a/0-64"); ok {
		t.Error("empty cache: got a hit")
	}
	if err := c.Put("a/0-64", data); err != nil {
		t.Fatal(err)
	}
	if err := c.PutCompressed("a/64-128", data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/0-64", "a/64-128"} {
		got, ok := c.Get(k)
		if !ok || !bytes.Equal(got, data) {
			t.Errorf("%s: got %d bytes, %v; want the %d bytes put", k, len(got), ok, len(data))
		}
	}
	s := c.Stats()
	if s.Hits != 2 || s.Misses != 1 || s.Files != 2 {
		t.Errorf("got %+v; want 2 hits, 1 miss, 2 files", s)
	}
	if s.Bytes >= 2*int64(len(data)) {
		t.Errorf("holds %d bytes for %d stored and %d compressed: the compressed copy is not smaller", s.Bytes, len(data), len(data))
	}
}

// TestFileFormat checks a file against the layout in the package comment
// with independent references: the CRC-32C check value of "123456789"
// (0xE3069283, from the iSCSI and Castagnoli references) and Debian's zstd
// tool for a compressed payload.
func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<20)
	if err := c.Put("1234", []byte("56789")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, fileName("1234")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(raw), headerSize+4+5; got != want {
		t.Fatalf("file of %d bytes, want %d", got, want)
	}
	if string(raw[:4]) != "VDC1" || raw[4] != 0 || binary.LittleEndian.Uint64(raw[8:]) != 5 || binary.LittleEndian.Uint16(raw[20:]) != 4 {
		t.Errorf("header % x does not match the documented layout", raw[:headerSize])
	}
	if got, want := binary.LittleEndian.Uint32(raw[16:]), uint32(0xE3069283); got != want {
		t.Errorf("checksum %#x, want CRC-32C(\"123456789\") = %#x", got, want)
	}
	if string(raw[headerSize:]) != "123456789" {
		t.Errorf("key and payload %q, want 123456789", raw[headerSize:])
	}

	zstdTool := testenv.LookPath(t, "zstd", "apt-get install zstd; bash .ci/run installs it")
	data := bytes.Repeat([]byte("voxels "), 5000)
	if err := c.PutCompressed("z", data); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(dir, fileName("z")))
	if err != nil {
		t.Fatal(err)
	}
	if raw[4] != 1 {
		t.Fatalf("form %d, want 1 (zstd)", raw[4])
	}
	cmd := exec.Command(zstdTool, "-d", "-c")
	cmd.Stdin = bytes.NewReader(raw[headerSize+1:])
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd -d: %v", err)
	}
	if !bytes.Equal(out, data) {
		t.Errorf("zstd -d gave %d bytes, want the %d put", len(out), len(data))
	}
}

// TestCorrupt: a damaged or truncated file is a miss, deleted and counted.
func TestCorrupt(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<20)
	data := bytes.Repeat([]byte{7}, 4096)
	for i, damage := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)-1] ^= 1; return b },                         // a payload bit
		func(b []byte) []byte { return b[:len(b)-10] },                               // truncated
		func(b []byte) []byte { b[headerSize] ^= 1; return b },                       // the key
		func(b []byte) []byte { copy(b, "XXXX"); return b },                          // the magic
		func(b []byte) []byte { b[4] = 9; return b },                                 // an unknown form
		func(b []byte) []byte { return b[:3] },                                       // shorter than a header
		func(b []byte) []byte { return append(b, 0) },                                // a byte too many
		func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 0); return b }, // the checksum
	} {
		key := fmt.Sprint("k", i)
		put := c.Put
		if i%2 == 1 {
			put = c.PutCompressed
		}
		if err := put(key, data); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fileName(key))
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, damage(raw), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok := c.Get(key); ok {
			t.Errorf("damage %d: got a hit of %d bytes, want a miss", i, len(got))
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("damage %d: the file is still there (%v)", i, err)
		}
	}
	if s := c.Stats(); s.Corrupt != 8 || s.Files != 0 || s.Bytes != 0 {
		t.Errorf("got %+v; want 8 corrupt, nothing held", s)
	}
}

// TestEvictionAndRestart: the bound evicts the least recently used, and a
// reopened cache keeps the files and their order, and drops temporaries.
func TestEvictionAndRestart(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1000)
	size := int64(headerSize + 1 + len(data))
	c := open(t, dir, 3*size)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Put(k, data); err != nil {
			t.Fatal(err)
		}
	}
	c.Get("a") // b is now the least recent
	if err := c.Put("d", data); err != nil {
		t.Fatal(err)
	}
	has := func(c *Cache, keys ...string) string {
		var s string
		for _, k := range keys {
			if _, ok := c.Get(k); ok {
				s += k
			}
		}
		return s
	}
	if got := c.Stats(); got.Evictions != 1 || got.Bytes != 3*size {
		t.Errorf("got %+v; want 1 eviction, %d bytes", got, 3*size)
	}
	if got := has(c, "b"); got != "" {
		t.Errorf("b was not evicted")
	}
	// Order now, least recent first: c, a, d (the miss of b touched nothing).
	os.MkdirAll(filepath.Join(dir, "0a"), 0o755)
	os.WriteFile(filepath.Join(dir, "0a", "left-by-a-crash.tmp"), []byte("x"), 0o644)

	r := open(t, dir, 2*size) // smaller: the least recent, c, goes
	if s := r.Stats(); s.Files != 2 || s.Evictions != 1 {
		t.Errorf("reopened: got %+v; want 2 files after 1 eviction", s)
	}
	if got := has(r, "a", "c", "d"); got != "ad" {
		t.Errorf("reopened: held %q, want ad", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "0a", "left-by-a-crash.tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary file survived Open (%v)", err)
	}
}

func TestConcurrent(t *testing.T) {
	c := open(t, t.TempDir(), 20*5000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := fmt.Sprint((g + i) % 30)
				want := bytes.Repeat([]byte(key), 5000/len(key))
				if got, ok := c.Get(key); ok && !bytes.Equal(got, want) {
					t.Errorf("%s: got wrong bytes", key)
				}
				if err := c.PutCompressed(key, want); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if s := c.Stats(); s.Bytes > 20*5000 || s.Corrupt != 0 {
		t.Errorf("got %+v; want at most %d bytes, nothing corrupt", s, 20*5000)
	}
}

func TestOpenRefusesZeroSize(t *testing.T) {
	if _, err := Open(Options{Dir: t.TempDir()}); err == nil {
		t.Error("a cache of 0 bytes opened")
	}
}
