package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		h               string
		size            int64
		off, n          int64
		ok, satisfiable bool
	}{
		{"bytes=0-99", 1000, 0, 100, true, true},
		{"bytes=100-", 1000, 100, 900, true, true},
		{"bytes=-50", 1000, 950, 50, true, true},
		{"bytes=-5000", 1000, 0, 1000, true, true},
		{"bytes=990-5000", 1000, 990, 10, true, true},
		{"bytes=999-999", 1000, 999, 1, true, true},
		{"bytes=1000-", 1000, 0, 0, true, false},
		{"bytes=-0", 1000, 0, 0, true, false},
		{"bytes=0-", 0, 0, 0, true, false},
		{"bytes=5-4", 1000, 0, 0, false, false},
		{"bytes=0-1,5-6", 1000, 0, 0, false, false},
		{"bytes=a-b", 1000, 0, 0, false, false},
		{"bytes=--5", 1000, 0, 0, false, false},
		{"items=0-5", 1000, 0, 0, false, false},
		{"bytes=9223372036854775807-", 1000, 0, 0, true, false},
		{"bytes=0-9223372036854775807", 1000, 0, 1000, true, true},
	} {
		off, n, ok, sat := parseRange(tc.h, tc.size)
		if off != tc.off || n != tc.n || ok != tc.ok || sat != tc.satisfiable {
			t.Errorf("parseRange(%q, %d) = %d, %d, %v, %v; want %d, %d, %v, %v", tc.h, tc.size, off, n, ok, sat, tc.off, tc.n, tc.ok, tc.satisfiable)
		}
	}
}

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		target string
		want   string
		ok     bool
	}{
		{"/", "", true},
		{"/info", "info", true},
		{"/s0/", "s0", true},
		{"/s0/0-64_0-64_0-32", "s0/0-64_0-64_0-32", true},
		{"/a%20b/c", "a b/c", true},
		{"http://example.com/info", "info", true},
		{"/../info", "", false},
		{"/s0/../info", "", false},
		{"/./info", "", false},
		{"//info", "", false},
		{"/s0//x", "", false},
		{"/..%2finfo", "", false},
		{"/s0%2Finfo", "", false},
		{"/%2e%2e/info", "", false},
		{"/s0/..%5cinfo", "", false},
		{"/s0/%00", "", false},
		{"http://example.com/../info", "", false},
	} {
		r, err := http.NewRequest("GET", "http://volfs"+tc.target, nil)
		if tc.target[0] != '/' {
			r, err = http.NewRequest("GET", tc.target, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		got, ok := cleanPath(r)
		if got != tc.want || ok != tc.ok {
			t.Errorf("cleanPath(%s) = %q, %v; want %q, %v", tc.target, got, ok, tc.want, tc.ok)
		}
	}
}

func TestContentType(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"img/info", "application/json"},
		{"img/s0/.zarray", "application/json"},
		{"img/zarr.json", "application/json"},
		{"img/s0/sections/z0001.tif", "image/tiff"},
		{"img/s0/volume.nhdr", "text/plain; charset=utf-8"},
		{"img/s0/volume.raw", "application/octet-stream"},
		{"img/s0/0-64_0-64_0-32", "application/octet-stream"},
		{"img/evil.html", "application/octet-stream"},
		{"img/evil.svg", "application/octet-stream"},
		{"img/evil.js", "application/octet-stream"},
	} {
		if got := contentType(tc.p); got != tc.want {
			t.Errorf("contentType(%s) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("# comment\n\nann:"+string(hash)+"\n"), 0o600)
	fromFile, err := LoadHtpasswd(good)
	if err != nil {
		t.Fatal(err)
	}
	one, err := ParseAuth("ann:pw")
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]*Auth{"--auth": one, "--auth-file": fromFile} {
		for _, tc := range []struct {
			user, pass string
			set, want  bool
		}{
			{"ann", "pw", true, true},
			{"ann", "pw", true, true}, // again: from the cache of good credentials
			{"ann", "PW", true, false},
			{"bob", "pw", true, false},
			{"", "", false, false},
		} {
			r, _ := http.NewRequest("GET", "http://volfs/", nil)
			if tc.set {
				r.SetBasicAuth(tc.user, tc.pass)
			}
			if got := a.Check(r); got != tc.want {
				t.Errorf("%s: Check(%q, %q) = %v, want %v", name, tc.user, tc.pass, got, tc.want)
			}
		}
	}
	for _, tc := range []struct{ name, content string }{
		{"md5", "bob:$apr1$Q8R5eTtA$0ZkWZ8mO1QvDbVvDnqGmM/\n"},
		{"sha", "bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n"},
		{"empty", "# nobody\n"},
		{"no colon", "bob\n"},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, []byte(tc.content), 0o600)
		if _, err := LoadHtpasswd(p); err == nil {
			t.Errorf("LoadHtpasswd(%s) accepted %q", tc.name, tc.content)
		}
	}
	for _, s := range []string{"ann", "ann:", ":pw", ""} {
		if _, err := ParseAuth(s); err == nil {
			t.Errorf("ParseAuth(%q) accepted", s)
		}
	}
}

func TestLocalHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:8080": true, "127.0.0.1": true, "127.1.2.3:80": true, "[::1]:8080": true, "::1": true,
		"evil.example": false, "evil.example:8080": false, "10.0.0.1": false, "localhost.evil.example": false, "": false,
	} {
		if got := LocalHost(host); got != want {
			t.Errorf("LocalHost(%q) = %v, want %v", host, got, want)
		}
	}
}
