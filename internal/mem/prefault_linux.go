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
	hugepage(b)
	_ = unix.Madvise(b[lo:hi], unix.MADV_POPULATE_WRITE)
}

const hugePageSize = 2 << 20

// hugepage asks for transparent huge pages (MADV_HUGEPAGE) over the whole
// 2 MiB pages inside b, before they are faulted in: one fault and one TLB
// entry per 2 MiB instead of 512, where the machine's THP mode is
// "madvise" (numpy asks the same for its large arrays). A hint only.
func hugepage(b []byte) {
	a := addr(b)
	lo := int((hugePageSize - a%hugePageSize) % hugePageSize)
	hi := len(b) - int((a+uintptr(len(b)))%hugePageSize)
	if hi-lo < hugePageSize {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_HUGEPAGE)
}
