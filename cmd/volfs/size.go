package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/dustin/go-humanize"
)

// sizeUnits is the help text on sizes, shown by --help and the man page.
const sizeUnits = `SIZES (--cache-size, --read-ahead, --disk-cache-size, --min-rate,
--passthrough-min-size) are a number and a unit: KiB, MiB, GiB, TiB are powers of 1024;
KB, MB, GB, TB powers of 1000; a bare K, M, G or T is KiB, MiB, GiB or TiB, as dd(1) and
rclone read them; no unit (or B) is bytes. Units are case-insensitive and a space may come
before them: 512MiB, 1.5GiB, 100MB, 2G, 1048576. Anything else (NaN, Inf, a sign, an
exponent, 1,000) is refused.`

// sizeRE is what parseSize accepts before handing the text to humanize:
// digits with an optional fraction, and letters for the unit. It keeps out
// what strconv.ParseFloat would also take (NaN, Inf, signs, exponents,
// hexadecimal) and humanize's thousands separators.
var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?) ?([A-Za-z]*)$`)

// maxSize is the largest size accepted: any larger cannot be an int64
// after the float arithmetic of a fractional size.
const maxSize = 1 << 62

// parseSize reads a byte count as sizeUnits describes: "512MiB", "2G" (2
// GiB), "100MB" (10^8), "1048576". humanize.ParseBytes holds the unit
// table; a bare K, M, G, T, P or E is made binary here.
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("not a size: %q (want a number and a unit: 512MiB, 2GiB, 100MB)", s)
	}
	unit := m[2]
	switch strings.ToUpper(unit) {
	case "K", "M", "G", "T", "P", "E":
		unit += "i"
	}
	n, err := humanize.ParseBytes(m[1] + unit)
	if err != nil {
		return 0, fmt.Errorf("not a size: %q: unknown unit %q (want B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, K, M, G or T)", s, m[2])
	}
	if n > maxSize {
		return 0, fmt.Errorf("not a size: %q is more than 4 EiB", s)
	}
	return int64(n), nil
}

// formatSize writes n in binary units, as parseSize reads them back.
func formatSize(n int64) string {
	return humanize.IBytes(uint64(n))
}
