package refs

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The Parquet reader allocates what a file's thrift structures declare (a
// byte string's length, a page's size) before it reads the bytes, so a
// file of a few bytes could make it allocate gigabytes. checkFooter and
// checkPages walk those structures first and refuse any length, count or
// page size that the file's own bytes cannot hold.

// errThrift is a thrift structure that does not fit its bytes.
var errThrift = errors.New("a thrift structure does not fit the file")

// thriftWalk checks the compact-protocol thrift struct at the start of b
// and returns its length in bytes.
func thriftWalk(b []byte) (int, error) {
	w := &walker{b: b}
	if err := w.structure(0); err != nil {
		return 0, err
	}
	return w.i, nil
}

type walker struct {
	b []byte
	i int
}

func (w *walker) byte1() (byte, error) {
	if w.i >= len(w.b) {
		return 0, errThrift
	}
	w.i++
	return w.b[w.i-1], nil
}

func (w *walker) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.i:])
	if n <= 0 {
		return 0, errThrift
	}
	w.i += n
	return v, nil
}

// skip advances n bytes that must lie in b.
func (w *walker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.i) {
		return errThrift
	}
	w.i += int(n)
	return nil
}

func (w *walker) structure(depth int) error {
	if depth > 32 {
		return errThrift
	}
	for {
		h, err := w.byte1()
		if err != nil {
			return err
		}
		if h == 0 { // stop
			return nil
		}
		if h>>4 == 0 { // the field id follows as a varint
			if _, err := w.uvarint(); err != nil {
				return err
			}
		}
		if t := h & 0x0f; t == 1 || t == 2 { // booleans are in the header
			continue
		}
		if err := w.value(h&0x0f, depth); err != nil {
			return err
		}
	}
}

func (w *walker) value(t byte, depth int) error {
	switch t {
	case 1, 2, 3: // a boolean element of a list, or a byte
		return w.skip(1)
	case 4, 5, 6: // zigzag varints
		_, err := w.uvarint()
		return err
	case 7: // double
		return w.skip(8)
	case 8: // binary: a length, then the bytes
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		return w.skip(n)
	case 9, 10: // list, set: size and element type, then the elements
		h, err := w.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return err
			}
		}
		if n > uint64(len(w.b)-w.i) { // each element takes a byte at least
			return errThrift
		}
		for range n {
			if err := w.value(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 11: // map: size, key and value types, then the pairs
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte1()
		if err != nil {
			return err
		}
		if n > uint64(len(w.b)-w.i)/2 {
			return errThrift
		}
		for range n {
			if err := w.value(kv>>4, depth+1); err != nil {
				return err
			}
			if err := w.value(kv&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case 12:
		return w.structure(depth + 1)
	}
	return errThrift
}

// checkFooter checks the thrift of a file's footer before the reader
// decodes it.
func checkFooter(data []byte) error {
	if len(data) < 12 || string(data[:4]) != "PAR1" || string(data[len(data)-4:]) != "PAR1" {
		return errors.New("not a Parquet file (no PAR1 magic at both ends)")
	}
	n := uint64(binary.LittleEndian.Uint32(data[len(data)-8:]))
	if n > uint64(len(data)-12) {
		return fmt.Errorf("its footer of %d bytes is longer than the file", n)
	}
	if _, err := thriftWalk(data[len(data)-8-int(n) : len(data)-8]); err != nil {
		return fmt.Errorf("its footer: %w", err)
	}
	return nil
}

// checkPages walks the page headers of the column chunks of pf's leaf
// columns cols (those that will be read), whose bytes are data, and refuses a header that does not fit, a page larger
// than its column chunk or than maxRecordDecodedBytes decompressed, and a
// page of more values than the file's rows.
func checkPages(pf *parquet.File, data []byte, cols map[int]bool) error {
	rows := pf.NumRows()
	var decoded int64
	for _, rg := range pf.Metadata().RowGroups {
		for j, c := range rg.Columns {
			if !cols[j] {
				continue
			}
			md := c.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset != 0 { // where the reader starts too
				start = md.DictionaryPageOffset
			}
			if start < 4 || md.TotalCompressedSize < 0 || start > int64(len(data)) || md.TotalCompressedSize > int64(len(data))-start {
				return fmt.Errorf("a column chunk [%d, +%d) lies outside the file", start, md.TotalCompressedSize)
			}
			chunk := data[start : start+md.TotalCompressedSize]
			for i := 0; i < len(chunk); {
				n, err := thriftWalk(chunk[i:])
				if err != nil {
					return fmt.Errorf("a page header: %w", err)
				}
				var h format.PageHeader
				if err := thrift.Unmarshal(&thrift.CompactProtocol{}, chunk[i:i+n], &h); err != nil {
					return fmt.Errorf("a page header: %w", err)
				}
				i += n
				if h.CompressedPageSize < 0 || int(h.CompressedPageSize) > len(chunk)-i ||
					h.UncompressedPageSize < 0 || int64(h.UncompressedPageSize) > maxRecordDecodedBytes {
					return fmt.Errorf("a page of %d bytes (%d decompressed) does not fit its column chunk", h.CompressedPageSize, h.UncompressedPageSize)
				}
				page := chunk[i : i+int(h.CompressedPageSize)]
				i += int(h.CompressedPageSize)
				decoded += int64(h.UncompressedPageSize)
				if decoded > maxRecordDecodedBytes {
					return fmt.Errorf("its pages claim more than %d bytes decompressed", maxRecordDecodedBytes)
				}
				if v2, ok := h.DataPageHeaderV2.Get(); ok {
					levels := int64(v2.DefinitionLevelsByteLength) + int64(v2.RepetitionLevelsByteLength)
					if v2.DefinitionLevelsByteLength < 0 || v2.RepetitionLevelsByteLength < 0 || levels > int64(len(page)) || levels > int64(h.UncompressedPageSize) {
						return errors.New("a page's levels do not fit it")
					}
					if c, set := v2.IsCompressed.Get(); set && !c {
						page = nil
					} else {
						page = page[levels:]
						h.UncompressedPageSize -= int32(levels)
					}
				}
				if page != nil {
					if err := checkDecompressed(md.Codec, page, int64(h.UncompressedPageSize)); err != nil {
						return err
					}
				}
				var nv int32
				switch {
				case h.DataPageHeader.Valid:
					nv = h.DataPageHeader.V.NumValues
				case h.DataPageHeaderV2.Valid:
					nv = h.DataPageHeaderV2.V.NumValues
				case h.DictionaryPageHeader.Valid:
					if int64(h.DictionaryPageHeader.V.NumValues) > rows || h.DictionaryPageHeader.V.NumValues < 0 {
						return fmt.Errorf("a dictionary of %d values, more than the file's %d rows", h.DictionaryPageHeader.V.NumValues, rows)
					}
				}
				if nv < 0 || int64(nv) > rows {
					return fmt.Errorf("a page of %d values, more than the file's %d rows", nv, rows)
				}
			}
		}
	}
	return nil
}

// checkDecompressed refuses a compressed page b that decompresses to more
// than its header's n bytes (the reader's decoders do not stop there), or
// whose codec volfs does not read.
func checkDecompressed(codec format.CompressionCodec, b []byte, n int64) error {
	var r io.Reader
	switch codec {
	case format.Uncompressed:
		return nil
	case format.Snappy:
		m, err := snappy.DecodedLen(b)
		if err != nil || int64(m) > n {
			return fmt.Errorf("a snappy page that decompresses to %d bytes, not its header's %d (%v)", m, n, err)
		}
		return nil
	case format.Lz4Raw:
		if _, err := lz4.UncompressBlock(b, make([]byte, n)); err != nil {
			return fmt.Errorf("an lz4 page that is not %d bytes: %w", n, err)
		}
		return nil
	case format.Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("a gzip page: %w", err)
		}
		r = zr
	case format.Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(64<<20), zstd.WithDecoderMaxMemory(64<<20))
		if err != nil {
			return fmt.Errorf("a zstd page: %w", err)
		}
		defer zr.Close()
		r = zr
	case format.Brotli:
		r = brotli.NewReader(bytes.NewReader(b))
	default:
		return fmt.Errorf("pages compressed with %v, which volfs does not read", codec)
	}
	m, err := io.Copy(io.Discard, io.LimitReader(r, n+1))
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("a %v page: %w", codec, err)
	}
	if m > n {
		return fmt.Errorf("a %v page that decompresses to more than its header's %d bytes", codec, n)
	}
	return nil
}
