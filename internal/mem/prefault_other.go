//go:build !linux

package mem

func prefault([]byte) {}
