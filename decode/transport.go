package decode

import "github.com/volfs/volfs/decode/codec"

// TransportGzip reports whether an object fetched from key with the
// declared Content-Encoding is gzip-compressed as transport, on top of the
// format's own encoding; see codec.TransportGzip.
func TransportGzip(contentEncoding, key string) (bool, error) {
	return codec.TransportGzip(contentEncoding, key)
}

// Gunzip decompresses the gzip stream src (all members) into at most limit
// bytes, allocating want bytes (0: the size the trailer states) at first;
// errors wrap ErrCorrupt. See codec.Gunzip.
func Gunzip(src []byte, want, limit int) ([]byte, error) {
	return codec.Gunzip(src, want, limit)
}
