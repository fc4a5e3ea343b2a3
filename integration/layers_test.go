package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers enforces the one-way dependencies of DESIGN.md: cmd -> fs ->
// cache, decode, fetcher, and nothing back up.
func TestLayers(t *testing.T) {
	const mod = "github.com/volfs/volfs/"
	allowed := map[string][]string{
		"decode":     nil,
		"fetcher":    nil,
		"cache":      nil,
		"cache/disk": nil,
		"fs":         {"cache", "cache/disk", "decode", "fetcher", "fs/view"},
		"fs/view":    nil, // the stitched views know only their own Grid and Chunks
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		ok, ruled := allowed[pkg]
		if !ruled {
			continue
		}
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, mod)
			if !ours {
				continue
			}
			if !contains(ok, dep) {
				t.Errorf("%s imports %s: against the layering (allowed: %v)", pkg, dep, ok)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
