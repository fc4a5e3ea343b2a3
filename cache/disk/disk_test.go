package disk

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

func open(t *testing.T, dir string, max int64) *Cache {
	t.Helper()
	c, err := Open(Options{Dir: dir, MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// anyIdent accepts every identity.
func anyIdent([]byte) error { return nil }

// get is Get of a payload of size bytes, accepting any identity.
func get(c *Cache, key string, size int) ([]byte, bool) { return c.Get(key, int64(size), anyIdent) }

// path returns the path of key's file in c.
func path(c *Cache, key string) string { return filepath.Join(c.Dir(), fileName(key)) }

func TestPutGet(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	data := bytes.Repeat([]byte("chunk data "), 1000)
	if _, ok := get(c, "a/0-64", len(data)); ok {
		t.Error("empty cache: got a hit")
	}
	if err := c.Put("a/0-64", []byte("v1"), data); err != nil {
		t.Fatal(err)
	}
	if err := c.PutCompressed("a/64-128", []byte("v1"), data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/0-64", "a/64-128"} {
		var ident string
		got, ok := c.Get(k, int64(len(data)), func(id []byte) error { ident = string(id); return nil })
		if !ok || !bytes.Equal(got, data) || ident != "v1" {
			t.Errorf("%s: got %d bytes, %v, identity %q; want the %d bytes put, v1", k, len(got), ok, ident, len(data))
		}
	}
	s := c.Stats()
	if s.Hits != 2 || s.Misses != 1 || s.Files != 2 {
		t.Errorf("got %+v; want 2 hits, 1 miss, 2 files", s)
	}
	// Below 256 bytes zstd frames do not state their size.
	for _, n := range []int{0, 1, 32, 255, 256} {
		tiny := bytes.Repeat([]byte{9}, n)
		key := fmt.Sprint("tiny", n)
		if err := c.PutCompressed(key, nil, tiny); err != nil {
			t.Fatal(err)
		}
		if got, ok := get(c, key, n); !ok || !bytes.Equal(got, tiny) {
			t.Errorf("compressed payload of %d bytes: got %d bytes, %v", n, len(got), ok)
		}
	}
	if s.Bytes >= 2*int64(len(data)) {
		t.Errorf("holds %d bytes for %d stored and %d compressed: the compressed copy is not smaller", s.Bytes, len(data), len(data))
	}
}

// TestFileFormat checks a file against the layout in the package comment
// with independent references: crypto/hmac over the documented fields with
// the secret read from its file, and Debian's zstd tool for a compressed
// payload.
func TestFileFormat(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	if err := c.Put("1234", []byte("id"), []byte("56789")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path(c, "1234"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(raw), 64+4+2+5; got != want {
		t.Fatalf("file of %d bytes, want %d", got, want)
	}
	if string(raw[:4]) != "VDC3" || raw[4] != 0 || raw[5] != 1 || binary.LittleEndian.Uint64(raw[8:]) != 5 ||
		binary.LittleEndian.Uint32(raw[16:]) != 4 || binary.LittleEndian.Uint32(raw[20:]) != 2 {
		t.Errorf("header % x does not match the documented layout", raw[:64])
	}
	if string(raw[64:]) != "1234id56789" {
		t.Errorf("key, identity and payload %q, want 1234id56789", raw[64:])
	}
	secret, err := os.ReadFile(filepath.Join(c.Dir(), "secret"))
	if err != nil || len(secret) != 32 {
		t.Fatalf("secret: %d bytes, %v; want 32", len(secret), err)
	}
	// The CRC-32C check value of "56789" is not a published one; that of
	// "123456789" is 0xE3069283 (the iSCSI and Castagnoli references).
	if got := crc32.Checksum([]byte("123456789"), crc32.MakeTable(crc32.Castagnoli)); got != 0xE3069283 {
		t.Fatalf("CRC-32C(123456789) = %#x, want 0xE3069283", got)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(raw[:24])
	mac.Write(raw[64 : 64+4+2])
	binary.Write(mac, binary.LittleEndian, crc32.Checksum(raw[64+4+2:], crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(mac.Sum(nil), raw[32:64]) {
		t.Errorf("MAC % x, want HMAC-SHA256 of the header's first 24 bytes, key, identity and the payload's CRC-32C", raw[32:64])
	}

	zstdTool := testenv.LookPath(t, "zstd", "apt-get install zstd; bash .ci/run installs it")
	data := bytes.Repeat([]byte("voxels "), 5000)
	if err := c.PutCompressed("z", nil, data); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(path(c, "z"))
	if err != nil {
		t.Fatal(err)
	}
	if raw[4] != 1 {
		t.Fatalf("form %d, want 1 (zstd)", raw[4])
	}
	cmd := exec.Command(zstdTool, "-d", "-c")
	cmd.Stdin = bytes.NewReader(raw[64+1:])
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd -d: %v", err)
	}
	if !bytes.Equal(out, data) {
		t.Errorf("zstd -d gave %d bytes, want the %d put", len(out), len(data))
	}
}

// TestCorrupt: a damaged, truncated or forged file is a miss, deleted and
// counted.
func TestCorrupt(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	data := bytes.Repeat([]byte{7}, 4096)
	for i, damage := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)-1] ^= 1; return b },                         // a payload bit
		func(b []byte) []byte { return b[:len(b)-10] },                               // truncated
		func(b []byte) []byte { b[headerSize] ^= 1; return b },                       // the key
		func(b []byte) []byte { b[headerSize+1] ^= 1; return b },                     // the identity
		func(b []byte) []byte { copy(b, "XXXX"); return b },                          // the magic
		func(b []byte) []byte { b[4] = 9; return b },                                 // an unknown form
		func(b []byte) []byte { return b[:3] },                                       // shorter than a header
		func(b []byte) []byte { return append(b, 0) },                                // a byte too many
		func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 0); return b }, // the MAC
	} {
		key := fmt.Sprint("k", i)
		put := c.Put
		if i%2 == 1 {
			put = c.PutCompressed
		}
		if err := put(key, []byte("id"), data); err != nil {
			t.Fatal(err)
		}
		p := path(c, key)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, damage(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, ok := get(c, key, len(data)); ok {
			t.Errorf("damage %d: got a hit of %d bytes, want a miss", i, len(got))
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("damage %d: the file is still there (%v)", i, err)
		}
	}
	if s := c.Stats(); s.Corrupt != 9 || s.Files != 0 || s.Bytes != 0 {
		t.Errorf("got %+v; want 9 corrupt, nothing held", s)
	}
}

// TestStale: an entry whose check says ErrStale is deleted and counted;
// another error of check is a miss that keeps it; a Get of another size
// than the one put is refused.
func TestStale(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	data := bytes.Repeat([]byte{3}, 1000)
	if err := c.PutCompressed("k", []byte("v1"), data); err != nil {
		t.Fatal(err)
	}
	offline := errors.New("source unreachable")
	if _, ok := c.Get("k", 1000, func([]byte) error { return offline }); ok {
		t.Error("check failed: got a hit")
	}
	if _, ok := get(c, "k", 1000); !ok {
		t.Error("after a check that could not tell: the entry is gone")
	}
	isV2 := func(id []byte) error {
		if string(id) != "v2" {
			return fmt.Errorf("made from %s: %w", id, ErrStale)
		}
		return nil
	}
	if _, ok := c.Get("k", 1000, isV2); ok {
		t.Error("stale entry: got a hit")
	}
	if _, err := os.Lstat(path(c, "k")); !os.IsNotExist(err) {
		t.Errorf("stale entry still on disk (%v)", err)
	}
	if s := c.Stats(); s.Stale != 1 || s.Files != 0 {
		t.Errorf("got %+v; want 1 stale, nothing held", s)
	}
	// An entry of another size than the caller expects is of no use.
	if err := c.PutCompressed("k", []byte("v1"), data); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(c, "k", 999); ok {
		t.Error("Get of 999 bytes of an entry of 1000: got a hit")
	}
	if s := c.Stats(); s.Corrupt != 1 || s.Files != 0 {
		t.Errorf("got %+v; want the entry of another size counted as corrupt and deleted", s)
	}
}

// TestHostileEntries: what sits at an entry's name but is not an entry
// the cache wrote for that key is a prompt miss, never read past its
// header: a FIFO (which would block a read), a link to /dev/zero (which
// would never end), a sparse file of 6 GB, a well-formed entry made with
// another secret (planted), and another key's entry moved there.
func TestHostileEntries(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<30)
	other := open(t, t.TempDir(), 1<<20)
	data := bytes.Repeat([]byte{5}, 4096)
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, p string)
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"link to /dev/zero", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"sparse 6 GB", func(t *testing.T, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(6 << 30)
			f.Close()
		}},
		{"planted", func(t *testing.T, p string) {
			key := "planted"
			if err := other.Put(key, []byte("id"), data); err != nil {
				t.Fatal(err)
			}
			raw, _ := os.ReadFile(path(other, key))
			os.WriteFile(p, raw, 0o600)
		}},
		{"moved", func(t *testing.T, p string) {
			// A key of the same length, so that only the key and MAC differ.
			if err := c.Put("mover", []byte("id"), data); err != nil {
				t.Fatal(err)
			}
			raw, _ := os.ReadFile(path(c, "mover"))
			os.WriteFile(p, raw, 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.name
			p := path(c, key)
			os.MkdirAll(filepath.Dir(p), 0o700)
			tc.plant(t, p)
			done := make(chan bool, 1)
			go func() {
				_, ok := get(c, key, len(data))
				done <- ok
			}()
			select {
			case ok := <-done:
				if ok {
					t.Error("got a hit, want a miss")
				}
			case <-time.After(time.Minute):
				t.Fatal("Get blocked for a minute")
			}
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("still at the entry's name (%v)", err)
			}
			// The name serves again once written.
			if err := c.Put(key, nil, data); err != nil {
				t.Fatal(err)
			}
			if got, ok := get(c, key, len(data)); !ok || !bytes.Equal(got, data) {
				t.Errorf("after a put: got %d bytes, %v", len(got), ok)
			}
		})
	}
}

// TestOwnDirectory: the cache keeps its files in a directory of its own,
// mode 0700, and refuses that directory when it is a link, another user's
// or writable by others, with a message saying what to do; it deletes its
// own temporary files left by a process that is gone, and nothing else.
func TestOwnDirectory(t *testing.T) {
	parent := t.TempDir()
	// Files of the user's that a careless --cache-dir (a home) holds.
	foreign := []string{"notes.tmp", "00/draft.tmp", "volfs-" + strconv.Itoa(os.Geteuid()) + "-not/x.tmp"}
	for _, f := range foreign {
		os.MkdirAll(filepath.Join(parent, filepath.Dir(f)), 0o755)
		writeFileT(t, filepath.Join(parent, f), "mine")
	}
	c := open(t, parent, 1<<20)
	own := filepath.Join(parent, "volfs-"+strconv.Itoa(os.Geteuid()))
	if c.Dir() != own {
		t.Errorf("Dir() = %s, want %s", c.Dir(), own)
	}
	fi, err := os.Lstat(own)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("own directory: %v %v, want a directory of mode 0700", fi.Mode(), err)
	}
	if err := c.Put("k", nil, []byte("v")); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Dir(path(c, "k"))
	// A temporary file of a process that is gone, one of a live process
	// (this one), and files of the user's in the cache's own directory.
	dead := exec.Command("true")
	dead.Run()
	orphan := fmt.Sprintf("tmp-%d-0123456789abcdef", dead.Process.Pid)
	live := fmt.Sprintf("tmp-%d-0123456789abcdef", os.Getpid())
	for _, f := range []string{orphan, live, "x.tmp", "tmp-notes"} {
		writeFileT(t, filepath.Join(sub, f), "partial")
	}
	c.Close()
	c = open(t, parent, 1<<20)
	if _, ok := get(c, "k", 1); !ok {
		t.Error("reopened: the entry is gone")
	}
	if _, err := os.Lstat(filepath.Join(sub, orphan)); !os.IsNotExist(err) {
		t.Errorf("the temporary file of a process that is gone survived Open (%v)", err)
	}
	for _, f := range []string{filepath.Join(sub, live), filepath.Join(sub, "x.tmp"), filepath.Join(sub, "tmp-notes")} {
		if _, err := os.Lstat(f); err != nil {
			t.Errorf("%s: deleted by Open (%v), want it kept", f, err)
		}
	}
	for _, f := range foreign {
		if _, err := os.Lstat(filepath.Join(parent, f)); err != nil {
			t.Errorf("%s under the cache dir: deleted by Open (%v), want it kept", f, err)
		}
	}
	c.Close()

	refused := func(t *testing.T, parent, want string) {
		t.Helper()
		c, err := Open(Options{Dir: parent, MaxBytes: 1 << 20})
		if err == nil {
			c.Close()
			t.Fatalf("Open: got a cache, want a refusal saying %q", want)
		}
		if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open: got %v, want ErrUnsafeDir saying %q", err, want)
		}
	}
	t.Run("group-writable", func(t *testing.T) {
		os.Chmod(own, 0o770)
		defer os.Chmod(own, 0o700)
		refused(t, parent, "writable by its group or by others (mode 0770): refusing it, as ssh refuses such a directory; run chmod 700")
	})
	t.Run("other-writable", func(t *testing.T) {
		os.Chmod(own, 0o707)
		defer os.Chmod(own, 0o700)
		refused(t, parent, "(mode 0707)")
	})
	t.Run("symlink", func(t *testing.T) {
		p := t.TempDir()
		os.Symlink(own, filepath.Join(p, filepath.Base(own)))
		refused(t, p, "is a symbolic link")
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory away")
		}
		p := t.TempDir()
		d := filepath.Join(p, filepath.Base(own))
		os.Mkdir(d, 0o700)
		os.Chown(d, 65534, 65534)
		refused(t, p, "belongs to uid 65534, not to this user")
	})
	t.Run("subdirectory link", func(t *testing.T) {
		// A subdirectory that is a link to another directory: an entry
		// behind it is never read, and a put does not write through it.
		p := t.TempDir()
		c := open(t, p, 1<<20)
		elsewhere := open(t, t.TempDir(), 1<<20)
		elsewhere.Put("k", nil, []byte("v"))
		s := filepath.Dir(path(c, "k"))
		os.RemoveAll(s)
		os.Symlink(filepath.Dir(path(elsewhere, "k")), s)
		if _, ok := get(c, "k", 1); ok {
			t.Error("entry behind a linked subdirectory: got a hit")
		}
		if err := c.Put("k", nil, []byte("w")); err == nil {
			t.Error("put through a linked subdirectory: no error")
		}
	})
}

func writeFileT(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEvictionAndRestart: the bound evicts the least recently used, and a
// reopened cache keeps the files and their order.
func TestEvictionAndRestart(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 1000)
	size := int64(headerSize + 1 + len(data))
	c := open(t, dir, 3*size)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Put(k, nil, data); err != nil {
			t.Fatal(err)
		}
	}
	get(c, "a", len(data)) // b is now the least recent
	if err := c.Put("d", nil, data); err != nil {
		t.Fatal(err)
	}
	has := func(c *Cache, keys ...string) string {
		var s string
		for _, k := range keys {
			if _, ok := get(c, k, len(data)); ok {
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
	r := open(t, dir, 2*size) // smaller: the least recent, c, goes
	if s := r.Stats(); s.Files != 2 || s.Evictions != 1 {
		t.Errorf("reopened: got %+v; want 2 files after 1 eviction", s)
	}
	if got := has(r, "a", "c", "d"); got != "ad" {
		t.Errorf("reopened: held %q, want ad", got)
	}
}

func TestConcurrent(t *testing.T) {
	c := open(t, t.TempDir(), 20*5000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprint((g + i) % 30)
				want := bytes.Repeat([]byte(key), 5000/len(key))
				if got, ok := get(c, key, len(want)); ok && !bytes.Equal(got, want) {
					t.Errorf("%s: got wrong bytes", key)
				}
				if err := c.PutCompressed(key, []byte(key), want); err != nil {
					t.Error(err)
				}
			}
		})
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

// TestOldVersion: an entry of the format before cache/envelope ("VDC2",
// a 56-byte header) is a miss, deleted, and no error.
func TestOldVersion(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	if err := c.Put("k", []byte("id"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 56+1+2+3)
	copy(old, "VDC2")
	binary.LittleEndian.PutUint64(old[8:], 3)
	binary.LittleEndian.PutUint32(old[16:], 1)
	binary.LittleEndian.PutUint32(old[20:], 2)
	copy(old[56:], "kidold")
	if err := os.WriteFile(path(c, "k"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get("k", 3, func([]byte) error { return nil }); ok {
		t.Fatalf("served %q from an entry of the old format", got)
	}
	if _, err := os.Stat(path(c, "k")); !os.IsNotExist(err) {
		t.Errorf("the old entry is still there: %v", err)
	}
	if st := c.Stats(); st.Errors != 0 || st.Misses != 1 {
		t.Errorf("stats %+v, want one miss and no error", st)
	}
}
