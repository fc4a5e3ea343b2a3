package mem

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestMakeAsksForHugePages: a buffer of 8 MiB from Make is in a mapping
// that the kernel may back with transparent huge pages (THPeligible)
// where the THP mode is "madvise" (where it is "always" every mapping is;
// where it is "never", or the kernel has no THP, none is).
func TestMakeAsksForHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("THP mode is not madvise (%q, %v): nothing to ask", mode, err)
	}
	b := Make(8 << 20)
	a := addr(b) + 4<<20 // inside the whole 2 MiB pages of b
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, eligible := false, ""
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := vmaRange(line); ok {
			in = lo <= a && a < hi
			continue
		}
		if v, ok := strings.CutPrefix(line, "THPeligible:"); ok && in {
			eligible = strings.TrimSpace(v)
		}
	}
	if eligible != "1" {
		t.Errorf("THPeligible of the mapping holding an 8 MiB buffer from Make: got %q, want 1", eligible)
	}
	b[0] = 1 // keep b alive past the scan
}

// vmaRange parses the range of an smaps mapping line "lo-hi perms ...".
func vmaRange(line string) (lo, hi uintptr, ok bool) {
	r, _, ok := strings.Cut(line, " ")
	if !ok {
		return 0, 0, false
	}
	l, h, ok := strings.Cut(r, "-")
	if !ok {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(l, 16, 64)
	y, err2 := strconv.ParseUint(h, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(x), uintptr(y), true
}
