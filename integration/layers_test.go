package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers enforces the one-way dependencies of DESIGN.md: cmd -> fs ->
// cache, decode, fetcher, and nothing back up. cache/mem, the pool of the
// read path's large buffers, is a leaf below all three: fetchers read
// objects into its buffers, decoders allocate into them, and fs gives
// them back once a chunk is decoded.
func TestLayers(t *testing.T) {
	const mod = "github.com/volfs/volfs/"
	allowed := map[string][]string{
		"decode":     {"cache/mem"},
		"fetcher":    {"cache/mem"},
		"cache":      nil,
		"cache/mem":  nil,
		"cache/disk": nil,
		"fs":         {"cache", "cache/disk", "cache/mem", "decode", "fetcher", "fs/view"},
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
