package codec

import "strings"

// Dialect is a format's way of spelling codec names in its metadata.
type Dialect int

const (
	// Numcodecs spells codecs by their numcodecs ids, the registered
	// names themselves (Zarr v2's "compressor" and "filters").
	Numcodecs Dialect = iota
	// Zarr3 spells them by the names of the Zarr v3 codec registry
	// ("gzip", "zstd", "crc32c", ...) and numcodecs' codecs as
	// "numcodecs.<id>" (zarr-python 3).
	Zarr3
	// N5 spells them by N5's compression "type" ("bzip2", "lz4", ...).
	N5
)

// n5Names maps N5 compression types onto registered codec names. A type
// not listed is one volfs does not read. "zlib" is what a "gzip" type
// with "useZlib": true stands for.
var n5Names = map[string]string{
	"gzip": "gzip", "zlib": "zlib", "bzip2": "bz2", "blosc": "blosc",
	"zstd": "zstd", "xz": "xz", "lz4": "n5.lz4",
}

// filters are the registered codecs that are array-to-array in Zarr v3:
// the numcodecs filters that zarr-python 3 places before the bytes codec.
// Every other codec is bytes-to-bytes.
var filters = map[string]bool{"delta": true, "fixedscaleoffset": true, "bitround": true, "quantize": true, "astype": true}

// Name returns the registered name of the codec that a format of dialect
// d spells as spelling, for NewStage and Lookup. ok is false when the
// dialect has no such codec; a name it returns may still be unregistered,
// which NewStage reports as ErrUnsupported.
func Name(d Dialect, spelling string) (name string, ok bool) {
	switch d {
	case N5:
		name, ok = n5Names[spelling]
		return name, ok
	case Zarr3:
		return strings.TrimPrefix(spelling, "numcodecs."), true
	}
	return spelling, true
}

// IsFilter reports whether the codec registered as name is array-to-array
// in a Zarr v3 chain (a numcodecs filter such as delta or astype) rather
// than bytes-to-bytes.
func IsFilter(name string) bool { return filters[name] }
