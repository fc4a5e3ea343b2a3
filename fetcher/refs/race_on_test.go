//go:build race

package refs

const raceOn = true
