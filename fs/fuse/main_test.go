package fuse

import (
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// TestMain poisons internal/mem's pools for the package's tests
// (testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m) }
