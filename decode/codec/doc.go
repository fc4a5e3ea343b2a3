// Package codec holds the byte codecs of volfs: the decoders that undo one
// stage of a chunk's stored encoding, and their registry.
//
// A codec is registered by name (Register) with a Factory that builds its
// Stage from the metadata's configuration; the formats of package decode
// find codecs only through the registry (NewStage, Lookup) and the one
// table of the names each format spells them by (Name, IsFilter), so that
// a new codec, with or without parameters, touches this package and its
// tests only. Registered here: gzip, zlib (volfs's own whole-buffer
// inflate), bz2, zstd, lz4, lz4 blocks (N5), xz and lzma, blosc (with its
// blosclz, lz4, zlib, zstd and snappy inner codecs and its byte and bit
// shuffles), the crc32, crc32c, adler32 and fletcher32 checksums, and
// numcodecs' filters (shuffle, delta, fixedscaleoffset, quantize,
// bitround, astype; categorize is refused by name, as it decodes to
// strings), and TIFF's LZW and PackBits as tifffile's reference sets name
// them (imagecodecs_lzw, imagecodecs_packbits; every other imagecodecs_*
// id is refused by name).
//
// The precomputed encodings that decode bytes to an array of a known
// extent are functions of their own, not registered: JPEG, PNG and
// CompressedSegmentation. Murmur3X86_128 is the hash of precomputed
// sharding; Gunzip and TransportGzip undo a gzip transport encoding.
//
// # Contract
//
// Every decoder is safe for concurrent use, never retains its input or
// output, and never returns bytes of the wrong length. Input that does not
// decode is an error wrapping ErrCorrupt; a valid option the decoder does
// not implement wraps ErrUnsupported. No decoder allocates more than the
// limit it is given plus a small constant, whatever sizes the input
// claims. Large outputs come from package internal/mem.
package codec
