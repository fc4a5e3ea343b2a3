package mem

import "golang.org/x/sys/unix"

const pageSize = 4096

// prefault makes the kernel map every whole page of b now, in one call
// (MADV_POPULATE_WRITE, Linux 5.14), rather than on first touch. The
// contents of b do not change. It is only a hint: on an older kernel, or
// on failure, pages fault in on touch as before.
func prefault(b []byte) {
	a := addr(b)
	lo := int((pageSize - a%pageSize) % pageSize)
	hi := len(b) - int((a+uintptr(len(b)))%pageSize)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_POPULATE_WRITE)
}
