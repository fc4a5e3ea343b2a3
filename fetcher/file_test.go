package fetcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want error
	}{
		{"info", nil},
		{"8_8_8/0-64_0-64_0-64", nil},
		{"c/0/0/0", nil},
		{"0.0.0", nil},
		{"..a/b..", nil},
		{"sp ace/%?#", nil},
		{"", ErrInvalidKey},
		{"/abs", ErrInvalidKey},
		{"..", ErrInvalidKey},
		{"../x", ErrInvalidKey},
		{"a/../b", ErrInvalidKey},
		{"a/..", ErrInvalidKey},
		{".", ErrInvalidKey},
		{"./a", ErrInvalidKey},
		{"a//b", ErrInvalidKey},
		{"a/", ErrInvalidKey},
		{"a\\b", ErrInvalidKey},
		{"a\x00b", ErrInvalidKey},
	} {
		if got := CheckKey(tc.key); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("CheckKey(%q): got %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestNewFile(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"file": []byte("x")})
	f, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.String(), "file://"+filepath.ToSlash(dir); got != want {
		t.Errorf("String: got %v, want %v", got, want)
	}
	for _, root := range []string{filepath.Join(dir, "missing"), filepath.Join(dir, "file")} {
		if _, err := NewFile(root); err == nil {
			t.Errorf("NewFile(%q): got nil error, want one", root)
		}
	}
}

func TestFileSymlinks(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"real/a": []byte("abc"), "target": []byte("12345")})
	for link, target := range map[string]string{
		"linkdir":  "real",
		"linkfile": "target",
		"dangling": "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	entries, err := f.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	want := []Entry{
		{Name: "linkdir", IsDir: true, Size: -1},
		{Name: "linkfile", Size: 5},
		{Name: "real", IsDir: true, Size: -1},
		{Name: "target", Size: 5},
	}
	if !slices.Equal(entries, want) {
		t.Errorf("List: got %v, want %v", entries, want)
	}
	if obj, err := f.Get(ctx, "linkdir/a", 1<<30); err != nil || string(obj.Data) != "abc" {
		t.Errorf("Get through a link: got %q, %v, want %q", obj.Data, err, "abc")
	}
	if _, err := f.Get(ctx, "dangling", 1<<30); !errors.Is(err, ErrNotExist) {
		t.Errorf("Get of a dangling link: got %v, want %v", err, ErrNotExist)
	}
}

// TestFilePermission: a file or directory the user may not read is
// ErrPermission, not ErrNotExist. Root reads every file, so under root the
// test runs again as an unprivileged user.
func TestFilePermission(t *testing.T) {
	if testenv.RerunAsNobody(t) {
		return
	}
	dir := writeTree(t, map[string][]byte{"secret": []byte("x"), "closed/a": []byte("y")})
	for _, p := range []string{"secret", "closed"} {
		if err := os.Chmod(filepath.Join(dir, p), 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "closed"), 0o755) })
	f, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.Get(ctx, "secret", 1<<30); !errors.Is(err, ErrPermission) {
		t.Errorf("Get: got %v, want %v", err, ErrPermission)
	}
	if _, err := f.List(ctx, "closed"); !errors.Is(err, ErrPermission) {
		t.Errorf("List: got %v, want %v", err, ErrPermission)
	}
}

func TestFileListNotExist(t *testing.T) {
	f, err := NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.List(context.Background(), "missing"); !errors.Is(err, ErrNotExist) {
		t.Errorf("got %v, want %v", err, ErrNotExist)
	}
}

// TestFileSymlinkOutside: what a link whose target leaves the root leads
// to is refused (ErrPermission, never ErrNotExist: it exists), wherever it
// points and however it is spelled, a missing object behind it too, unless
// FollowSymlinks; the link is listed; links that stay inside still work.
func TestFileSymlinkOutside(t *testing.T) {
	outside := writeTree(t, map[string][]byte{"secret": []byte("shh"), "dir/x": []byte("x")})
	dir := writeTree(t, map[string][]byte{"in/a": []byte("abc")})
	links := map[string]string{
		"abs":       filepath.Join(outside, "secret"),
		"rel":       filepath.Join("..", filepath.Base(outside), "secret"),
		"absdir":    filepath.Join(outside, "dir"),
		"in/up":     "../abs", // a link inside to a link outside
		"absinside": filepath.Join(dir, "in", "a"),
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var logs bytes.Buffer
	f, err := NewFileWith(dir, FileOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"abs", "rel", "in/up", "absdir/x", "absdir/missing", "absdir/no/such"} {
		if obj, err := f.Get(ctx, key, 1<<20); !errors.Is(err, ErrPermission) || !strings.Contains(fmt.Sprint(err), "outside the source") {
			t.Errorf("Get(%q): got %q, %v, want %v saying why", key, obj.Data, err, ErrPermission)
		}
		if _, _, err := f.GetRange(ctx, key, 0, 10); !errors.Is(err, ErrPermission) {
			t.Errorf("GetRange(%q): got %v, want %v", key, err, ErrPermission)
		}
		if _, _, err := f.Stat(ctx, key); !errors.Is(err, ErrPermission) {
			t.Errorf("Stat(%q): got %v, want %v", key, err, ErrPermission)
		}
		if _, err := f.Mode(ctx, key); !errors.Is(err, ErrPermission) {
			t.Errorf("Mode(%q): got %v, want %v", key, err, ErrPermission)
		}
	}
	if _, err := f.List(ctx, "absdir"); !errors.Is(err, ErrPermission) {
		t.Errorf("List(absdir): got %v, want %v", err, ErrPermission)
	}
	if _, err := f.Get(ctx, "in/missing", 1<<20); !errors.Is(err, ErrNotExist) {
		t.Errorf("Get of a missing object inside: got %v, want %v", err, ErrNotExist)
	}
	if obj, err := f.Get(ctx, "absinside", 1<<20); err != nil || string(obj.Data) != "abc" {
		t.Errorf("Get of an absolute link inside: got %q, %v, want %q", obj.Data, err, "abc")
	}
	names := func(f *File, prefix string) []string {
		t.Helper()
		entries, err := f.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range entries {
			n = append(n, e.Name)
		}
		slices.Sort(n)
		return n
	}
	if got, want := names(f, ""), []string{"abs", "absdir", "absinside", "in", "rel"}; !slices.Equal(got, want) {
		t.Errorf("List: got %v, want %v", got, want)
	}
	if got := strings.Count(logs.String(), "not followed"); got != 1 {
		t.Errorf("log lines about links not followed: got %v, want %v:\n%s", got, 1, logs.String())
	}

	follow, err := NewFileWith(dir, FileOptions{FollowSymlinks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"abs", "rel", "in/up"} {
		if obj, err := follow.Get(ctx, key, 1<<20); err != nil || string(obj.Data) != "shh" {
			t.Errorf("FollowSymlinks: Get(%q): got %q, %v, want %q", key, obj.Data, err, "shh")
		}
	}
	if got, want := names(follow, ""), []string{"abs", "absdir", "absinside", "in", "rel"}; !slices.Equal(got, want) {
		t.Errorf("FollowSymlinks: List: got %v, want %v", got, want)
	}

	// An excluded directory (the mountpoint) is never read, even when
	// every link is followed.
	excl, err := NewFileWith(dir, FileOptions{FollowSymlinks: true, Exclude: []string{filepath.Join(outside, "dir")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := excl.Get(ctx, "absdir/x", 1<<20); !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "mountpoint") {
		t.Errorf("Exclude: Get(absdir/x): got %v, want %v naming the mountpoint", err, ErrPermission)
	}
	if _, err := excl.List(ctx, "absdir"); !errors.Is(err, ErrPermission) {
		t.Errorf("Exclude: List(absdir): got %v, want %v", err, ErrPermission)
	}
	if obj, err := excl.Get(ctx, "abs", 1<<20); err != nil || string(obj.Data) != "shh" {
		t.Errorf("Exclude: Get(abs): got %q, %v, want %q", obj.Data, err, "shh")
	}
}

// TestFileSymlinkedRoot: a root that is itself a link is the source; its
// links inside stay inside.
func TestFileSymlinkedRoot(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"a": []byte("abc")})
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(dir, root); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b"} {
		if obj, err := f.Get(context.Background(), key, 1<<20); err != nil || string(obj.Data) != "abc" {
			t.Errorf("Get(%q): got %q, %v, want %q", key, obj.Data, err, "abc")
		}
	}
}

// TestFileNotRegular: a FIFO without a writer, a device and a socket are
// absent, at once; none is read.
func TestFileNotRegular(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"sub/x": []byte("x")})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, opts := range []FileOptions{{}, {FollowSymlinks: true}} {
		f, err := NewFileWith(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"fifo", "zero", "sock", "sub"} {
			want := ErrNotExist
			if key == "zero" && !opts.FollowSymlinks {
				want = ErrPermission // a link out of the source, refused before the type is looked at
			}
			if _, err := f.Get(ctx, key, 1<<20); !errors.Is(err, want) {
				t.Errorf("%+v: Get(%q): got %v, want %v", opts, key, err, want)
			}
			if _, _, err := f.GetRange(ctx, key, 0, 1<<20); !errors.Is(err, want) {
				t.Errorf("%+v: GetRange(%q): got %v, want %v", opts, key, err, want)
			}
			if _, _, err := f.Stat(ctx, key); !errors.Is(err, want) {
				t.Errorf("%+v: Stat(%q): got %v, want %v", opts, key, err, want)
			}
		}
	}
}

// TestFileSparseTooLarge: a file larger than the limit is refused from its
// size, without reading it.
func TestFileSparseTooLarge(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Truncate(6 << 30); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	f, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(context.Background(), "big", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("got %v, want %v", err, ErrTooLarge)
	}
}

func TestFileMode(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"open": []byte("x"), "private": []byte("y"), "closed/a": []byte("z")})
	for p, mode := range map[string]os.FileMode{"private": 0o600, "closed": 0o700} {
		if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("private", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	rootInfo, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want os.FileMode
	}{
		{"", rootInfo.Mode()},
		{"open", 0o644},
		{"private", 0o600},
		{"link", 0o600},
		{"closed", os.ModeDir | 0o700},
	} {
		if got, err := f.Mode(context.Background(), tc.key); err != nil || got != tc.want {
			t.Errorf("Mode(%q): got %v, %v, want %v", tc.key, got, err, tc.want)
		}
	}
	if _, err := f.Mode(context.Background(), "missing"); !errors.Is(err, ErrNotExist) {
		t.Errorf("Mode(missing): got %v, want %v", err, ErrNotExist)
	}
}

// BenchmarkFileGet reads a 128 KiB chunk, with the symlink confinement
// (resolving the path, then checking the open descriptor) and without.
func BenchmarkFileGet(b *testing.B) {
	const size = 128 << 10
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "layer", "s0"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "layer", "s0", "0-64_0-64_0-32"), seq(size), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, opts := range []FileOptions{{}, {FollowSymlinks: true}} {
		b.Run(fmt.Sprintf("FollowSymlinks=%v", opts.FollowSymlinks), func(b *testing.B) {
			f, err := NewFileWith(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Get(ctx, "layer/s0/0-64_0-64_0-32", 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
