package mem

import "unsafe"

// addr returns the address of b's first byte (b must have a capacity).
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Addr returns the address of b's first byte, as a number (one that does
// not keep b's memory alive), or 0 for a slice without capacity.
func Addr(b []byte) uintptr {
	if cap(b) == 0 {
		return 0
	}
	return addr(b)
}

// SameStart reports whether a and b begin at the same byte of memory:
// one is the other, or a prefix of it.
func SameStart(a, b []byte) bool { return cap(a) > 0 && Addr(a) == Addr(b) }
