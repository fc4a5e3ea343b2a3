package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// layers is the import graph of the read path, one way down: cmd -> fs ->
// cache, decode, fetcher, and nothing back up. Each package may import only
// the module's packages listed for it (test files aside).
//
//   - internal/mem, the pool of the read path's large buffers, is a leaf
//     below all four: fetchers read objects into its buffers, decoders
//     allocate into them, fs gives them back once a chunk is decoded, and
//     the chunk store gives a decoded chunk back once nobody holds it
//     (cache/recycle.go).
//   - decode/codec, the byte codecs and their registry, is a leaf below
//     the formats of decode: a codec knows no format, and fs reaches the
//     codecs only through decode.
//   - cache (the chunk store) and its tiers, cache/disk (--cache-dir) and
//     cache/shared (--shared-cache), sit beside decode and fetcher, not
//     below them: neither decode nor fetcher imports anything under cache/,
//     directly or through another package. A tier knows nothing of the
//     store (it satisfies cache.Tier by its methods); the store adapts the
//     disk cache (cache.DiskTier), and cmd hands it the shared tier. Both
//     tiers keep their values in cache/envelope's format, a leaf.
//   - fetcher/keep, the keeping source, wraps a fetcher: what volfs keeps of
//     the origin (metadata, listings, absences, identities, the offline
//     state); it keeps them in a disk cache through its own Store interface
//     and knows no tier package, no tree and no front end.
//   - fs/view, the stitched views, knows only its own Grid and Chunks;
//     decode/ngobj, the skeleton, mesh and annotation conversions, only
//     bytes.
//   - fs is the tree core; its two front ends sit beside each other on it:
//     serve, the HTTP and WebDAV front end, and fs/fuse, the go-fuse
//     adapter. Each reads the tree through its exported API, and nothing
//     below it but fetcher (a check of a key; a local source's modes) and,
//     for fs/fuse, decode's Array (inode numbers by grid index). Only
//     fs/fuse and cmd import go-fuse (goFUSE).
var layers = map[string][]string{
	"internal/mem":   nil,
	"decode":         {"decode/codec", "internal/mem"},
	"decode/codec":   {"internal/mem"},
	"decode/ngobj":   nil,
	"fetcher":        {"internal/mem"},
	"fetcher/keep":   {"cache", "fetcher"},
	"cache":          {"cache/disk", "internal/mem"},
	"cache/disk":     {"cache/envelope"},
	"cache/shared":   {"cache/envelope"},
	"cache/envelope": nil,
	"fs":             {"cache", "internal/mem", "decode", "decode/ngobj", "fetcher", "fetcher/keep", "fs/view"},
	"fs/view":        nil,
	"serve":          {"fs", "fetcher"},
	"fs/fuse":        {"fs", "fetcher", "decode"},
}

// goFUSE is go-fuse's module path: no ruled package but fs/fuse imports it.
const goFUSE = "github.com/hanwen/go-fuse/"

// noCache are the packages that must not depend on anything under cache/,
// even transitively: the pool and the formats and sources it serves.
var noCache = []string{"internal/mem", "decode", "decode/codec", "fetcher"}

// TestLayers enforces layers on the direct imports of every ruled package
// and noCache on their transitive dependencies, as `go list` reports them.
func TestLayers(t *testing.T) {
	const mod = "github.com/volfs/volfs/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		ok, ruled := layers[pkg]
		if !ruled {
			continue
		}
		seen[pkg] = true
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, goFUSE) && pkg != "fs/fuse" {
				t.Errorf("%s imports %s: only the adapter, fs/fuse, speaks FUSE", pkg, imp)
			}
			dep, ours := strings.CutPrefix(imp, mod)
			if !ours {
				continue
			}
			if !contains(ok, dep) {
				t.Errorf("%s imports %s: against the layering (allowed: %v)", pkg, dep, ok)
			}
		}
	}
	for pkg := range layers {
		if !seen[pkg] {
			t.Errorf("%s: ruled by the layering but not in the module (moved? update layers)", pkg)
		}
	}

	for _, pkg := range noCache {
		out, err := exec.Command("go", "list", "-f", `{{join .Deps " "}}`, "../"+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if rel, ours := strings.CutPrefix(dep, mod); ours && (rel == "cache" || strings.HasPrefix(rel, "cache/")) {
				t.Errorf("%s depends on %s: decode, fetcher and the pool must import nothing of cache", pkg, rel)
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
