package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/volfs/volfs/internal/testenv"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// mustCodec returns the codec registered under name.
func mustCodec(t testing.TB, name string) Func {
	t.Helper()
	c, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// zarrCompressor returns the numcodecs id of the compressor of the zarr
// v2 array in dir ("" for none).
func zarrCompressor(t *testing.T, dir string) string {
	t.Helper()
	var meta struct {
		Compressor *struct {
			ID string `json:"id"`
		} `json:"compressor"`
	}
	if err := json.Unmarshal(readFixture(t, filepath.Join(dir, ".zarray")), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Compressor == nil {
		return ""
	}
	return meta.Compressor.ID
}

// TestZarrPythonCompat decodes every chunk of zarr-python's own
// compatibility fixture (zlib, bz2, blosc zstd with no shuffle, byte
// shuffle and bitshuffle, blosc lz4) and compares it with the same chunk
// that zarr-python stored uncompressed (array <i>/0).
func TestZarrPythonCompat(t *testing.T) {
	fixtures := testenv.Fixtures(t)
	root := filepath.Join(fixtures, "zarr-v2-zarr-python-compat")
	dirs, err := filepath.Glob(filepath.Join(root, "*", "[1-6]"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no arrays in %s: %v", root, err)
	}
	checked := map[string]int{}
	var out []byte
	for _, dir := range dirs {
		rel, _ := filepath.Rel(fixtures, dir)
		codec := mustCodec(t, zarrCompressor(t, rel))
		raw := filepath.Join(filepath.Dir(dir), "0")
		chunks, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunks {
			if c.Name()[0] == '.' {
				continue
			}
			src := readFixture(t, filepath.Join(rel, c.Name()))
			want, err := os.ReadFile(filepath.Join(raw, c.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out, err = codec(out, src, len(want))
			if err != nil {
				t.Errorf("%s/%s: %v", rel, c.Name(), err)
				continue
			}
			if i := firstDiff(out, want); i >= 0 {
				t.Errorf("%s/%s: %d bytes, want %d; first difference at %d", rel, c.Name(), len(out), len(want), i)
			}
			if _, err := codec(nil, src, len(want)-1); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s/%s with a limit one byte short: %v, want ErrCorrupt", rel, c.Name(), err)
			}
			checked[zarrCompressor(t, rel)]++
		}
	}
	for _, id := range []string{"zlib", "bz2", "blosc"} {
		if checked[id] == 0 {
			t.Errorf("no %s chunk checked", id)
		}
	}
}

// TestZarrPythonCodecs decodes the one-chunk arrays that zarr-python wrote
// with each compressor: every one holds the int16 values 1 2 3 4, or the
// int32 ones for the default (blosc) i4 array.
func TestZarrPythonCodecs(t *testing.T) {
	i2 := []byte{1, 0, 2, 0, 3, 0, 4, 0}
	i4 := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}
	for _, tc := range []struct {
		array, codec string
		want         []byte
	}{
		{"1d.contiguous.zlib.i2", "zlib", i2},
		{"1d.contiguous.blosc.i2", "blosc", i2},
		{"1d.contiguous.lz4.i2", "lz4", i2},
		{"1d.contiguous.zstd.i2", "zstd", i2},
		{"1d.contiguous.i4", "blosc", i4},
	} {
		rel := filepath.Join("zarr-v2-zarr-python", "data.zarr", tc.array)
		if got := zarrCompressor(t, rel); got != tc.codec {
			t.Fatalf("%s: compressor %q, want %q", tc.array, got, tc.codec)
		}
		src := readFixture(t, filepath.Join(rel, "0"))
		got, err := mustCodec(t, tc.codec)(nil, src, len(tc.want))
		if err != nil || string(got) != string(tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.array, got, err, tc.want)
		}
		if _, err := mustCodec(t, tc.codec)(nil, src, len(tc.want)-1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a limit one byte short: %v, want ErrCorrupt", tc.array, err)
		}
	}
}

// TestCRC32C checks the shard indexes that zarrita wrote with an index
// codec chain of bytes + crc32c: the last 16*n+4 bytes of a shard of n
// inner chunks carry their own checksum.
func TestCRC32C(t *testing.T) {
	codec := mustCodec(t, "crc32c")
	for _, tc := range []struct {
		shard string
		inner int
	}{
		{"1d.chunked.compressed.sharded.i2/c/0", 2},
		{"1d.chunked.compressed.sharded.i2/c/1", 2},
		{"2d.chunked.compressed.sharded.i2/c/0/0", 4},
		{"3d.chunked.compressed.sharded.i2/c/1/1/1", 8},
	} {
		shard := readFixture(t, filepath.Join("zarr-v3-zarrita", "data.zarr", tc.shard))
		n := 16*tc.inner + 4
		if len(shard) < n {
			t.Fatalf("%s: %d bytes", tc.shard, len(shard))
		}
		index := shard[len(shard)-n:]
		got, err := codec(nil, index, n-4)
		if err != nil || string(got) != string(index[:n-4]) {
			t.Errorf("%s: got %d bytes, %v", tc.shard, len(got), err)
		}
		bad := append([]byte{}, index...)
		bad[0] ^= 1
		if _, err := codec(nil, bad, n-4); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a flipped bit: %v, want ErrCorrupt", tc.shard, err)
		}
		if _, err := codec(nil, index, n-5); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a limit one byte short: %v, want ErrCorrupt", tc.shard, err)
		}
	}
	// RFC 3720's check value: CRC-32C of "123456789" is e3069283.
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Errorf("crc32c(123456789) = %08x", got)
	}
	check := binary.LittleEndian.AppendUint32([]byte("123456789"), 0xe3069283)
	if got, err := codec(nil, check, 9); err != nil || string(got) != "123456789" {
		t.Errorf("check value: got %q, %v", got, err)
	}
	if _, err := codec(nil, []byte{1, 2, 3}, 10); !errors.Is(err, ErrCorrupt) {
		t.Errorf("3 bytes: %v, want ErrCorrupt", err)
	}
}

// allocated returns the bytes that f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBombs: streams that decode to far more than the limit are refused,
// and the memory spent refusing them is bounded by the limit, not by what
// the stream would decode to (zstd frames without a content size may cost
// up to about 2.5 times the limit, see decodeZstd).
func TestBombs(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, 64<<20)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	withSize := enc.EncodeAll(zeros, nil)
	var streamed bytes.Buffer // a streaming encoder does not know the size
	sw, _ := zstd.NewWriter(&streamed, zstd.WithEncoderConcurrency(1))
	sw.Write(zeros)
	sw.Close()
	if h := new(zstd.Header); h.Decode(streamed.Bytes()) != nil || h.HasFCS {
		t.Fatalf("streamed frame declares its size")
	}
	var zl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	zw.Write(zeros)
	zw.Close()
	lz := binary.LittleEndian.AppendUint32(nil, 1<<31-1)
	lz = append(lz, 0x1f, 0, 1, 0, 0xff, 0xff, 0xff)
	for _, tc := range []struct {
		name, codec string
		src         []byte
	}{
		{"zstd with content size", "zstd", withSize},
		{"zstd streamed", "zstd", streamed.Bytes()},
		{"zstd two frames", "zstd", append(enc.EncodeAll(zeros[:limit/2], nil), withSize...)},
		{"zlib", "zlib", zl.Bytes()},
		{"lz4 header", "lz4", lz},
		{"blosc header", "blosc", bloscHeader(2, 0, 1, 1<<31-1, 1<<16, 16)},
	} {
		codec := mustCodec(t, tc.codec)
		codec(nil, tc.src, limit) // warm the pools and the shared decoder
		var err error
		n := allocated(func() { _, err = codec(nil, tc.src, limit) })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
		if n > 3*limit {
			t.Errorf("%s: refusing allocated %d bytes for a limit of %d", tc.name, n, limit)
		}
	}
}

// TestAgainstRawTwins decodes every chunk of arrays that other programs
// wrote twice, compressed and uncompressed, and compares the two:
// zarr_implementations' reference image (zlib, gzip, blosc lz4 with
// shuffle; only ../shared/fixtures holds these) and zarr-python's N5Store
// datasets (gzip, bzip2, blosc, xz; each block after its 12-byte N5
// header).
func TestAgainstRawTwins(t *testing.T) {
	fixtures := testenv.Fixtures(t)
	for _, tc := range []struct {
		dir, raw, codec string
		header          int
	}{
		{"zarr-implementations/examples/zarr.zr/zlib", "zarr-implementations/examples/zarr.zr/raw", "zlib", 0},
		{"zarr-implementations/examples/zarr.zr/gzip", "zarr-implementations/examples/zarr.zr/raw", "gzip", 0},
		{"zarr-implementations/examples/zarr.zr/blosc", "zarr-implementations/examples/zarr.zr/raw", "blosc", 0},
		{"n5-tensorstore/gzip", "n5-tensorstore/raw", "gzip", 12},
		{"n5-tensorstore/bzip2", "n5-tensorstore/raw", "bz2", 12},
		{"n5-tensorstore/blosc", "n5-tensorstore/raw", "blosc", 12},
		{"n5-tensorstore/xz", "n5-tensorstore/raw", "xz", 12},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(fixtures, tc.dir)); err != nil && testenv.SharedFixtures() == "" {
				t.Skipf("only ../shared/fixtures holds %s", tc.dir)
			}
			codec := mustCodec(t, tc.codec)
			var keys []string
			filepath.WalkDir(filepath.Join(fixtures, tc.dir), func(path string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && d.Name()[0] != '.' && d.Name() != "attributes.json" {
					rel, _ := filepath.Rel(filepath.Join(fixtures, tc.dir), path)
					keys = append(keys, rel)
				}
				return err
			})
			if len(keys) == 0 {
				t.Fatalf("%s: no chunks", tc.dir)
			}
			for _, key := range keys {
				src := readFixture(t, filepath.Join(tc.dir, key))
				want := readFixture(t, filepath.Join(tc.raw, key))
				if string(src[:tc.header]) != string(want[:tc.header]) {
					t.Fatalf("%s/%s: N5 headers differ", tc.dir, key)
				}
				src, want = src[tc.header:], want[tc.header:]
				got, err := codec(nil, src, len(want))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s/%s: %d bytes, %v; want %d bytes", tc.dir, key, len(got), err, len(want))
				}
			}
		})
	}
}

// xzScript writes xz and .lzma streams with Python's lzma module (the C
// liblzma) and the xz program: presets whose dictionaries are far larger
// than the data, every check type, several blocks, and a filter chain
// volfs does not implement. One line per case: name, data, stream.
const xzScript = `
import lzma, os, subprocess, sys
out = sys.argv[1]
data = bytes((i * 7 // 5) % 251 for i in range(200003)) + os.urandom(5000)
def case(name, enc):
    open(os.path.join(out, name), 'wb').write(enc)
    print(name)
open(os.path.join(out, 'data'), 'wb').write(data)
for preset in [0, 6, 9 | lzma.PRESET_EXTREME]:
    case('xz-preset%d' % (preset & 0xff), lzma.compress(data, preset=preset))
for check in [lzma.CHECK_NONE, lzma.CHECK_CRC32, lzma.CHECK_CRC64, lzma.CHECK_SHA256]:
    case('xz-check%d' % check, lzma.compress(data, check=check))
case('lzma-alone', lzma.compress(data, format=lzma.FORMAT_ALONE, preset=9))
case('xz-blocks', subprocess.run(['xz', '-c', '-9', '--block-size=65536'], input=data, capture_output=True, check=True).stdout)
case('xz-delta', lzma.compress(data, filters=[{'id': lzma.FILTER_DELTA, 'dist': 4}, {'id': lzma.FILTER_LZMA2}]))
`

// TestXZ decodes what liblzma writes and checks that dictionaries are
// bounded by the chunk size, not by the presets' 8 or 64 MiB.
func TestXZ(t *testing.T) {
	const python = "/usr/bin/python3"
	dir := t.TempDir()
	cmd := exec.Command(python, "-c", xzScript, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	listing, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", python, err, stderr.Bytes())
	}
	want, err := os.ReadFile(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	codec := mustCodec(t, "lzma")
	names := strings.Fields(string(listing))
	if len(names) != 10 {
		t.Fatalf("cases %q", names)
	}
	for _, name := range names {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "xz-delta" {
			if _, err := codec(nil, src, len(want)); !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s: %v, want ErrUnsupported", name, err)
			}
			continue
		}
		var got []byte
		n := allocated(func() { got, err = codec(nil, src, len(want)) })
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
		if n > 3*uint64(len(want))+1<<20 {
			t.Errorf("%s: decoding %d bytes allocated %d", name, len(want), n)
		}
		if _, err := codec(nil, src, len(want)-1); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s with a limit one byte short: %v, want ErrCorrupt", name, err)
		}
		if _, err := codec(nil, src[:len(src)-1], len(want)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s cut short: %v, want ErrCorrupt", name, err)
		}
	}
}
