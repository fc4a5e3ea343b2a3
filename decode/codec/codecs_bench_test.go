package codec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// imageChunk returns a 1 MiB chunk that looks like a microscopy tile: a
// smooth 2-D gradient plus a little noise, as uint8 (bytesPerVoxel 1) or
// little-endian uint16 (2).
func imageChunk(bytesPerVoxel int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	raw := make([]byte, 1<<20)
	n := len(raw) / bytesPerVoxel
	side := 1024 / bytesPerVoxel
	for i := range n {
		x, y := i%1024, i/1024
		v := 4*x + 3*y*1024/side + r.IntN(9)
		if bytesPerVoxel == 1 {
			raw[i] = byte(v / 24)
		} else {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
		}
	}
	return raw
}

// benchScript encodes the raw chunk in argv[1] (typesize argv[2]) with
// numcodecs and writes each variant next to it, printing its name.
const benchScript = `
import sys
import numpy as np
from numcodecs import Blosc, Zstd, Zlib, GZip, BZ2, LZ4
raw, ts = sys.argv[1], int(sys.argv[2])
a = np.fromfile(raw, dtype='<u%d' % ts)
variants = {
    'zstd': Zstd(level=1), 'zlib': Zlib(level=1), 'gzip': GZip(level=1),
    'bz2': BZ2(level=1), 'lz4': LZ4(),
    'blosc-lz4': Blosc('lz4', 5, Blosc.SHUFFLE),
    'blosc-lz4-bitshuffle': Blosc('lz4', 5, Blosc.BITSHUFFLE),
    'blosc-lz4hc': Blosc('lz4hc', 5, Blosc.SHUFFLE),
    'blosc-blosclz': Blosc('blosclz', 5, Blosc.SHUFFLE),
    'blosc-zstd': Blosc('zstd', 5, Blosc.SHUFFLE),
    'blosc-zlib': Blosc('zlib', 5, Blosc.SHUFFLE),
    'blosc-snappy': Blosc('snappy', 5, Blosc.SHUFFLE),
}
for name, c in variants.items():
    open(raw + '.' + name, 'wb').write(bytes(c.encode(a)))
    print(name)
`

// benchInput is one encoded chunk to benchmark.
type benchInput struct {
	name, codec string
	src         []byte
}

// benchInputs encodes raw with numcodecs when /usr/bin/python3 has it,
// so that the inputs are what zarr-python writes; otherwise with the Go
// encoders, for the codecs that have one.
func benchInputs(b *testing.B, raw []byte, typesize int) []benchInput {
	b.Helper()
	if exec.Command("/usr/bin/python3", "-c", "import numcodecs").Run() == nil {
		dir := b.TempDir()
		path := filepath.Join(dir, "raw")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			b.Fatal(err)
		}
		listing, err := exec.Command("/usr/bin/python3", "-c", benchScript, path, strconv.Itoa(typesize)).Output()
		if err != nil {
			b.Fatal(err)
		}
		var ins []benchInput
		sc := bufio.NewScanner(bytes.NewReader(listing))
		for sc.Scan() {
			name := sc.Text()
			src, err := os.ReadFile(path + "." + name)
			if err != nil {
				b.Fatal(err)
			}
			codec, _, _ := strings.Cut(name, "-")
			ins = append(ins, benchInput{name, codec, src})
		}
		return ins
	}
	b.Log("no numcodecs in /usr/bin/python3: encoding with the Go encoders (zstd, zlib, lz4, blosc-lz4 only)")
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	var zl bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&zl, 1)
	zw.Write(raw)
	zw.Close()
	block := make([]byte, lz4.CompressBlockBound(len(raw)))
	n, _ := lz4.CompressBlock(raw, block, nil)
	return []benchInput{
		{"zstd", "zstd", enc.EncodeAll(raw, nil)},
		{"zlib", "zlib", zl.Bytes()},
		{"lz4", "lz4", append(binary.LittleEndian.AppendUint32(nil, uint32(len(raw))), block[:n]...)},
		{"blosc-lz4", "blosc", bloscLZ4(raw, typesize)},
	}
}

// bloscLZ4 builds a blosc1 buffer of shuffled 256 KiB blocks, each one
// unsplit LZ4 stream, as c-blosc 1.11 and later write with cname lz4.
func bloscLZ4(raw []byte, typesize int) []byte {
	const bs = 256 << 10
	nblocks := (len(raw) + bs - 1) / bs
	out := bloscHeader(2, bloscShuffle|bloscDontSplit|1<<5, byte(typesize), uint32(len(raw)), bs, 0)
	out = append(out, make([]byte, 4*nblocks)...)
	shuffled := make([]byte, bs)
	comp := make([]byte, lz4.CompressBlockBound(bs))
	for j := range nblocks {
		block := raw[j*bs : min(len(raw), (j+1)*bs)]
		m := len(block) / typesize
		for i := range m {
			for k := range typesize {
				shuffled[k*m+i] = block[i*typesize+k]
			}
		}
		binary.LittleEndian.PutUint32(out[bloscHeaderSize+4*j:], uint32(len(out)))
		n, _ := lz4.CompressBlock(shuffled[:len(block)], comp, nil)
		out = binary.LittleEndian.AppendUint32(out, uint32(n))
		out = append(out, comp[:n]...)
	}
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
	return out
}

// BenchmarkCodecs decodes 1 MiB image-like chunks (uint8 and uint16) with
// every codec, reusing the output buffer as a chunk cache would.
func BenchmarkCodecs(b *testing.B) {
	for _, dtype := range []struct {
		name     string
		typesize int
	}{{"u1", 1}, {"u2", 2}} {
		raw := imageChunk(dtype.typesize)
		for _, in := range benchInputs(b, raw, dtype.typesize) {
			codec := mustCodec(b, in.codec)
			b.Run(in.name+"/"+dtype.name, func(b *testing.B) {
				out, err := codec(nil, in.src, len(raw))
				if err != nil || !bytes.Equal(out, raw) {
					b.Fatalf("does not decode: %v", err)
				}
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				cpu := cpuTime()
				for b.Loop() {
					if out, err = codec(out, in.src, len(raw)); err != nil {
						b.Fatal(err)
					}
				}
				// The machine is shared: MB/s is wall time and falls with
				// the load; MB/cpu-s is the throughput of one busy core.
				cpu = cpuTime() - cpu
				b.ReportMetric(float64(b.N)*float64(len(raw))/1e6/cpu.Seconds(), "MB/cpu-s")
				b.ReportMetric(float64(len(raw))/float64(len(in.src)), "ratio")
			})
		}
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
