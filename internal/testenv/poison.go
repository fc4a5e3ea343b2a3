package testenv

import (
	"flag"
	"os"
	"testing"

	"github.com/volfs/volfs/internal/mem"
)

// Main runs a package's tests with internal/mem's pools poisoned
// (mem.Poison), and sets VOLFS_MEM_POISON=1 so that the volfs processes
// they start poison theirs too: a decoder that relies on a pooled
// buffer's undefined contents, or a reader of a buffer given back for
// reuse, then reads bytes no codec makes, and a test that compares bytes
// fails. A run of benchmarks is not poisoned: it would skew their figures.
// Call it from TestMain; it does not return.
func Main(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		mem.Poison(true)
		os.Setenv("VOLFS_MEM_POISON", "1")
	}
	os.Exit(m.Run())
}
