package main

import (
	"fmt"

	"github.com/volfs/volfs/fs"
)

// infoDepth is how many directories below SOURCE `volfs info` looks for
// volumes: a volume at SOURCE/a/b/c/d/e/f is listed, one a level deeper
// is not (README, volfs info).
const infoDepth = 6

// printSkipped says what `volfs info` did not walk, if anything, so that
// a listing cut short is never mistaken for the whole tree.
func printSkipped(s fs.WalkSkipped) {
	if s.Deeper > 0 {
		fmt.Printf("not walked: %d directories %d levels down (volumes deeper than that are not listed; run volfs info on a subdirectory)\n", s.Deeper, infoDepth)
	}
	if s.Entries > 0 {
		fmt.Printf("not walked: %d entries (%d directories) past the first %d examined (run volfs info on a subdirectory)\n", s.Entries, s.Dirs, fs.MaxWalkEntries)
	}
}
