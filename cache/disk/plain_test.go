package disk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// readAll reads f from its start and closes it.
func readAll(t *testing.T, f *os.File) []byte {
	t.Helper()
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPlain: a plain entry reads back through Get and OpenPlain, counts
// both its files against the bound, and its data file, once opened, keeps
// the bytes it was opened on across a replacement and an eviction. A data
// file that does not match its entry (damaged, cut, missing) is a miss
// and the entry is deleted.
func TestPlain(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<20)
	v1 := bytes.Repeat([]byte("version one "), 20000) // 240000 bytes
	v2 := bytes.Repeat([]byte("version two "), 20000)
	if err := c.PutPlain("k", []byte("id1"), v1); err != nil {
		t.Fatal(err)
	}
	if !c.Plain("k") {
		t.Error("Plain: false after PutPlain")
	}
	if got, ok := get(c, "k", len(v1)); !ok || !bytes.Equal(got, v1) {
		t.Fatalf("Get of a plain entry: %v, %d bytes", ok, len(got))
	}
	if st := c.Stats(); st.Bytes < int64(len(v1)) || st.Files != 1 {
		t.Errorf("stats %+v: want one entry of at least %d bytes (its data file counted)", st, len(v1))
	}
	f, ok := c.OpenPlain("k", int64(len(v1)), anyIdent)
	if !ok {
		t.Fatal("OpenPlain: a miss")
	}
	// Replaced while open: the open file keeps version one.
	if err := c.PutPlain("k", []byte("id2"), v2); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); !bytes.Equal(got, v1) {
		t.Error("a data file open across a replacement did not read its version whole")
	}
	g, ok := c.OpenPlain("k", int64(len(v2)), anyIdent)
	if !ok || !bytes.Equal(readAll(t, g), v2) {
		t.Error("OpenPlain after the replacement did not read the new version")
	}
	// Evicted while open.
	f, _ = c.OpenPlain("k", int64(len(v2)), anyIdent)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := c.PutPlain(k, nil, v1); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := get(c, "k", len(v2)); ok {
		t.Error("k not evicted")
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), dataName(fileName("k")))); !os.IsNotExist(err) {
		t.Errorf("k's data file after its eviction: %v", err)
	}
	if got := readAll(t, f); !bytes.Equal(got, v2) {
		t.Error("a data file open across its eviction did not read whole")
	}
	// A compressed entry is not plain, and OpenPlain leaves it.
	if err := c.PutCompressed("e", nil, v1); err != nil {
		t.Fatal(err)
	}
	if c.Plain("e") {
		t.Error("Plain: true of a compressed entry")
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), dataName(fileName("e")))); !os.IsNotExist(err) {
		t.Errorf("the data file of an entry replaced by a compressed one: %v", err)
	}
	if _, ok := c.OpenPlain("e", int64(len(v1)), anyIdent); ok {
		t.Error("OpenPlain of a compressed entry: a hit")
	}
	if got, ok := get(c, "e", len(v1)); !ok || !bytes.Equal(got, v1) {
		t.Error("OpenPlain's miss left the compressed entry unreadable")
	}

	// Damage: the same length, a byte changed, in a new file or in
	// place, seen by another process (a restart); cut short; a link; a
	// FIFO; gone.
	for _, damage := range []func(p string){
		func(p string) {
			b, _ := os.ReadFile(p)
			b[1000] ^= 1
			os.Remove(p)
			os.WriteFile(p, b, 0o600)
		},
		func(p string) {
			// In place: the same inode, a new change time.
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.WriteAt([]byte{'x'}, 1000)
			f.Close()
		},
		func(p string) { os.Truncate(p, 1000) },
		func(p string) {
			// A link to a file of the same bytes, and a FIFO: never
			// followed, never opened to block.
			b, _ := os.ReadFile(p)
			os.WriteFile(p+".real", b, 0o600)
			os.Remove(p)
			os.Symlink(p+".real", p)
		},
		func(p string) {
			os.Remove(p)
			syscall.Mkfifo(p, 0o600)
		},
		func(p string) { os.Remove(p) },
	} {
		c := open(t, t.TempDir(), 1<<20)
		if err := c.PutPlain("d", nil, v1); err != nil {
			t.Fatal(err)
		}
		damage(filepath.Join(c.Dir(), dataName(fileName("d"))))
		c2 := open(t, filepath.Dir(c.Dir()), 1<<20)
		if f, ok := c2.OpenPlain("d", int64(len(v1)), anyIdent); ok {
			f.Close()
			t.Error("OpenPlain of a damaged data file: a hit")
		}
		if _, err := os.Stat(path(c, "d")); !os.IsNotExist(err) {
			t.Errorf("the entry of a damaged data file was kept: %v", err)
		}
		if st := c2.Stats(); st.Corrupt != 1 {
			t.Errorf("stats %+v, want one corrupt", st)
		}
	}
}

// TestPlainRestart: a restart counts a plain entry with its data file and
// deletes a data file without an entry.
func TestPlainRestart(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 1<<20)
	v := bytes.Repeat([]byte{7}, 100000)
	if err := c.PutPlain("k", nil, v); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(c.Dir(), dataName(fileName("orphan")))
	os.MkdirAll(filepath.Dir(orphan), 0o700)
	if err := os.WriteFile(orphan, v, 0o600); err != nil {
		t.Fatal(err)
	}
	want := c.Stats().Bytes
	c2 := open(t, dir, 1<<20)
	if st := c2.Stats(); st.Bytes != want || st.Files != 1 || !c2.Plain("k") {
		t.Errorf("after a restart: %+v, plain %v; want %d bytes in 1 plain entry", st, c2.Plain("k"), want)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("a data file without an entry survived a restart: %v", err)
	}
	f, ok := c2.OpenPlain("k", int64(len(v)), anyIdent)
	if !ok || !bytes.Equal(readAll(t, f), v) {
		t.Error("OpenPlain after a restart")
	}
}

// TestPlainMissCountedOnce: a read that finds no plain entry falls back to
// Get, which counts the miss; OpenPlain does not count it a second time.
func TestPlainMissCountedOnce(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	accept := func([]byte) error { return nil }
	if f, ok := c.OpenPlain("k", 3, accept); ok {
		f.Close()
		t.Fatal("a plain entry where none was put")
	}
	if _, ok := c.Get("k", 3, accept); ok {
		t.Fatal("a hit where nothing was put")
	}
	if st := c.Stats(); st.Misses != 1 {
		t.Errorf("misses %d after one read that found nothing, want 1", st.Misses)
	}
}

// TestPlainEntryWriteFails: a plain entry whose data file was written but
// whose entry could not be (the disk full after the data: a tmpfs of one
// page more than the secret and the data) leaves no data file behind,
// where on 0d63a2d it stayed until the next Open, outside the bound's
// count, holding the room every later write needed.
func TestPlainEntryWriteFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	const data = 16 << 12 // 16 pages; the tmpfs holds 17
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=69632,mode=0755"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	c := open(t, dir, 1<<30)
	err := c.PutPlain("k", []byte("id"), bytes.Repeat([]byte{7}, data))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("PutPlain on a full disk: %v, want ENOSPC (the tmpfs's size does not fit this test)", err)
	}
	left, _ := filepath.Glob(filepath.Join(c.Dir(), "*", "*"+dataSuffix))
	if len(left) != 0 {
		t.Errorf("data files left after a failed PutPlain: %v", left)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bfree) * st.Bsize; free < data {
		t.Errorf("%d bytes free after a failed PutPlain, want at least the %d it wrote", free, data)
	}
}
