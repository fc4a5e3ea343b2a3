package mem

import "unsafe"

// addr returns the address of b's first byte (b must have a capacity).
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
