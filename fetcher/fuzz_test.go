package fetcher

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseIndex: any HTML index yields entries, each once, that are
// clean one-element keys, so no listing can name a key outside its
// directory.
func FuzzParseIndex(f *testing.F) {
	for _, seed := range []string{
		// Go's http.FileServer
		"<pre>\n<a href=\"8_8_8/\">8_8_8/</a>\n<a href=\"info\">info</a>\n</pre>\n",
		// Python's http.server
		`<!DOCTYPE HTML><html><body><ul><li><a href="info">info</a></li><li><a href="sp%20ace/">sp ace/</a></li></ul></body></html>`,
		// nginx autoindex
		`<html><body><h1>Index of /vol/</h1><hr><pre><a href="../">../</a>
<a href="0-64_0-64_0-64.gz">0-64_0-64_0-64.gz</a>  01-Jan-2024 00:00  1234
</pre><hr></body></html>`,
		// Apache, with sort links and a parent link
		`<table><tr><th><a href="?C=N;O=D">Name</a></th></tr><tr><td><a href="/vol/">Parent Directory</a></td></tr><tr><td><a href="a.raw">a.raw</a></td></tr></table>`,
		// links that try to leave
		`<a href="../x">x</a><a href="/etc/passwd">p</a><a href="http://elsewhere/vol/x">e</a><a href="a/b">deep</a><a href="%2e%2e/">dots</a><a href="a%2fb">slash</a><a href=".">dot</a>`,
	} {
		f.Add([]byte(seed))
	}
	dir, err := url.Parse("http://example.org/vol/")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, index []byte) {
		entries, err := parseIndex(bytes.NewReader(index), dir)
		if err != nil {
			return
		}
		seen := make(map[string]bool)
		for _, e := range entries {
			if err := CheckKey(e.Name); err != nil || strings.Contains(e.Name, "/") {
				t.Fatalf("entry %q is not a one-element key: %v", e.Name, err)
			}
			if seen[e.Name] {
				t.Fatalf("entry %q listed twice", e.Name)
			}
			seen[e.Name] = true
			if e.Size != -1 {
				t.Fatalf("entry %q has size %d, want -1", e.Name, e.Size)
			}
		}
	})
}
