//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le))

package main

// fstatatSyscall is the identity where the system calls have no
// newfstatat (32-bit Linux names it fstatat64).
func fstatatSyscall(nr int) int { return nr }
