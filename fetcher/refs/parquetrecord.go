package refs

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/volfs/volfs/fetcher"
)

// Bounds of one record file.
const (
	// maxRecordFileBytes bounds a record file as stored (100,000
	// references of kerchunk's default record_size take a few MB).
	maxRecordFileBytes = 256 << 20
	// maxRecordDecodedBytes bounds its column chunks decompressed, as its
	// footer states them, so that a small file cannot claim a huge decode.
	maxRecordDecodedBytes = 256 << 20
)

// record is one loaded record file: row i is the reference of the i-th
// key of its range of the grid.
type record struct {
	rows  []recRow
	urls  []string // the distinct paths, which rows index
	bytes int64    // an estimate of the memory it holds
}

type recRow struct {
	raw       []byte // non-nil: the inline bytes (an empty raw is non-nil)
	url       int32  // index into record.urls; -1: the path is null
	off, size int64
}

// decodeRecordObject decodes a record file fetched whole
// (parquetSet.loadRecord).
func decodeRecordObject(obj fetcher.Object, recordSize int64) (*record, error) {
	if obj.ContentEncoding != "" {
		return nil, fmt.Errorf("served with Content-Encoding %q, not supported", obj.ContentEncoding)
	}
	return decodeRecord(obj.Data, recordSize)
}

// recordColumns are the columns of a record file, each optional (a
// record of inline bytes only may have only raw, one of ranges only no
// raw).
var recordColumns = []string{"path", "offset", "size", "raw"}

// decodeRecord decodes a record file of at most recordSize rows. Any
// failure of the Parquet reader, a panic included, is an error.
func decodeRecord(data []byte, recordSize int64) (rec *record, err error) {
	defer func() {
		if v := recover(); v != nil {
			rec, err = nil, fmt.Errorf("not a readable Parquet file: %v", v)
		}
	}()
	if err := checkFooter(data); err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(64<<10))
	if err != nil {
		return nil, fmt.Errorf("not a Parquet file: %w", err)
	}
	n := pf.NumRows()
	if n < 0 || n > recordSize {
		return nil, fmt.Errorf("the record file has %d rows, more than record_size %d", n, recordSize)
	}
	var decoded int64
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			s := c.MetaData.TotalUncompressedSize
			if s < 0 || decoded > maxRecordDecodedBytes-s {
				return nil, fmt.Errorf("the record file's columns claim more than %d bytes decompressed", maxRecordDecodedBytes)
			}
			decoded += s
		}
	}
	rec = &record{rows: make([]recRow, n), bytes: n * 48}
	for i := range rec.rows {
		rec.rows[i].url = -1
	}
	cols := map[int]bool{}
	for _, name := range recordColumns {
		col := pf.Root().Column(name)
		if col == nil {
			continue
		}
		if !col.Leaf() || col.MaxRepetitionLevel() != 0 {
			return nil, fmt.Errorf("column %q is not a flat column", name)
		}
		cols[col.Index()] = true
	}
	if err := checkPages(pf, data, cols); err != nil {
		return nil, err
	}
	interned := map[string]int32{}
	for _, name := range recordColumns {
		col := pf.Root().Column(name)
		if col == nil {
			continue
		}
		err := readColumn(col, n, func(i int64, v parquet.Value) error {
			if v.IsNull() {
				return nil
			}
			row := &rec.rows[i]
			switch name {
			case "path", "raw":
				if v.Kind() != parquet.ByteArray {
					return fmt.Errorf("column %q holds %v, not byte arrays", name, v.Kind())
				}
				b := v.ByteArray()
				if name == "raw" {
					row.raw = append([]byte{}, b...)
					rec.bytes += int64(len(b))
					return nil
				}
				u, ok := interned[string(b)]
				if !ok {
					if len(rec.urls) >= 1<<31-1 {
						return errors.New("too many distinct paths")
					}
					u = int32(len(rec.urls))
					interned[string(b)] = u
					rec.urls = append(rec.urls, string(b))
					rec.bytes += int64(len(b)) + 16
				}
				row.url = u
			default:
				var x int64
				switch v.Kind() {
				case parquet.Int64:
					x = v.Int64()
				case parquet.Int32:
					x = int64(v.Int32())
				default:
					return fmt.Errorf("column %q holds %v, not integers", name, v.Kind())
				}
				if name == "offset" {
					row.off = x
				} else {
					row.size = x
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// readColumn calls fn with each of col's n values in row order, and fails
// when the column does not hold exactly n.
func readColumn(col *parquet.Column, n int64, fn func(int64, parquet.Value) error) error {
	pages := col.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 1024)
	var i int64
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("column %q: %w", col.Name(), err)
		}
		vals := p.Values()
		for {
			k, err := vals.ReadValues(buf)
			for _, v := range buf[:k] {
				if i >= n {
					return fmt.Errorf("column %q holds more values than the file's %d rows", col.Name(), n)
				}
				if err := fn(i, v); err != nil {
					return err
				}
				i++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("column %q: %w", col.Name(), err)
			}
			if k == 0 {
				return fmt.Errorf("column %q: %w", col.Name(), io.ErrNoProgress)
			}
		}
	}
	if i != n {
		return fmt.Errorf("column %q holds %d values, not the file's %d rows", col.Name(), i, n)
	}
	return nil
}
