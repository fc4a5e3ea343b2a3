//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import "golang.org/x/sys/unix"

// fstatatSyscall maps newfstatat (what stat(2) and lstat(2) are on 64-bit
// Linux) to faccessat, whose path argument is in the same place, for
// waitsInside; any other call number is returned as it is.
func fstatatSyscall(nr int) int {
	if nr == unix.SYS_NEWFSTATAT {
		return unix.SYS_FACCESSAT
	}
	return nr
}
