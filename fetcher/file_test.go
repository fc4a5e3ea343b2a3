package fetcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

func TestFilePermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
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
