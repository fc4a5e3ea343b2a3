package refs

import (
	"fmt"
	"slices"
	"testing"
)

// TestManifestPacked: the packed manifest finds every key, a key added
// again takes its new reference, and each directory lists its own names
// in order ("a" before "a.b" although "a/c" sorts after it), a name that
// is both a key and a directory once, as the directory.
func TestManifestPacked(t *testing.T) {
	m := NewManifest()
	keys := []string{"a.b", "a/c", "a", "b/x/y", "b0", "b/x/z", "b/w"}
	for i, k := range keys {
		if err := m.Add(k, Ref{URL: "u" + fmt.Sprint(i%2), Offset: int64(i), Length: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5000 {
		if err := m.Add(fmt.Sprintf("big/%d", i), Ref{Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Add("a.b", Ref{Data: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if r, ok := m.Lookup("a.b"); !ok || string(r.Data) != "new" || r.URL != "" {
		t.Errorf("a.b added again: %+v %v", r, ok)
	}
	if r, ok := m.Lookup("b/x/z"); !ok || r.URL != "u1" || r.Offset != 5 || r.Length != 10 {
		t.Errorf("b/x/z: %+v %v", r, ok)
	}
	if r, ok := m.Lookup("big/4321"); !ok || string(r.Data) != "4321" {
		t.Errorf("big/4321: %+v %v", r, ok)
	}
	if _, ok := m.Lookup("b/x"); ok {
		t.Error("the directory b/x looks up as a key")
	}
	if m.Len() != len(keys)+5000 || !slices.Equal(m.URLs(), []string{"u0", "u1"}) {
		t.Errorf("Len %d, URLs %v", m.Len(), m.URLs())
	}
	for dir, want := range map[string]string{
		"":    "[a/ a.b b/ b0 big/]",
		"a":   "[c]",
		"b":   "[w x/]",
		"b/x": "[y z]",
	} {
		es, ok := m.entries(dir)
		var got []string
		for _, e := range es {
			if e.IsDir {
				got = append(got, e.Name+"/")
			} else {
				got = append(got, e.Name)
			}
		}
		if !ok || fmt.Sprint(got) != want {
			t.Errorf("entries(%q) = %v, %v; want %s", dir, got, ok, want)
		}
	}
	if es, _ := m.entries("big"); len(es) != 5000 {
		t.Errorf("big holds %d names, want 5000", len(es))
	}
	for _, dir := range []string{"c", "a/c", "b/x/y", "bi"} {
		if _, ok := m.entries(dir); ok {
			t.Errorf("%q lists as a directory", dir)
		}
	}
}
