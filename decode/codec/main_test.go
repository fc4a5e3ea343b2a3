package codec

import (
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// TestMain poisons internal/mem's pools for the package's tests
// (testenv.Main): a codec that leaves bytes of a pooled output unwritten
// reads as poison.
func TestMain(m *testing.M) { testenv.Main(m) }
