package codec

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/volfs/volfs/internal/testenv"
)

// numcodecsScript writes buffers with numcodecs (Debian's python3-numcodecs,
// which wraps the C libraries: c-blosc, liblz4, libzstd, zlib, libbz2)
// into the directory given as its argument, and prints one line per case:
// name, codec, raw file, encoded file, limit. The data is half smooth
// ramp, half noise, so that blosc stores some streams compressed and some
// raw; sizes are odd so that blocks end partial and element counts are
// not multiples of 8; a blocksize of 512 gives many blocks per buffer.
const numcodecsScript = `
import os, sys
import numpy as np
from numcodecs import Blosc, LZ4, Zstd, Zlib, BZ2

out = sys.argv[1]
rng = np.random.default_rng(20261202)

def data(n, dtype):
    ramp = (np.arange(n) * 7 // 3).astype(dtype)
    noise = rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)
    a = ramp.copy()
    a[n // 2:] = noise[n // 2:]
    return a

count = 0
def case(name, codec, a, enc):
    global count
    count += 1
    raw, cmp = os.path.join(out, '%d.raw' % count), os.path.join(out, '%d.enc' % count)
    open(raw, 'wb').write(a.tobytes())
    open(cmp, 'wb').write(bytes(enc))
    print(name, codec, raw, cmp, a.nbytes)

shuffles = {'noshuffle': Blosc.NOSHUFFLE, 'shuffle': Blosc.SHUFFLE, 'bitshuffle': Blosc.BITSHUFFLE}
for cname in ['blosclz', 'lz4', 'lz4hc', 'zlib', 'zstd', 'snappy']:
    for sname, shuffle in shuffles.items():
        for dtype in ['u1', '<u2', '<u4', '<u8']:
            for n, blocksize in [(1, 0), (7, 0), (1000, 0), (4099, 512), (4099, 0), (70001, 0)]:
                a = data(n, dtype)
                c = Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=blocksize)
                case('blosc-%s-%s-%s-n%d-bs%d' % (cname, sname, dtype, n, blocksize), 'blosc', a, c.encode(a))
    a = data(1001, '<u4')
    case('blosc-%s-clevel0' % cname, 'blosc', a, Blosc(cname=cname, clevel=0, shuffle=Blosc.SHUFFLE).encode(a))
    case('blosc-%s-clevel9' % cname, 'blosc', a, Blosc(cname=cname, clevel=9, shuffle=Blosc.SHUFFLE).encode(a))
for n in [0, 1, 1000, 300001]:
    a = data(n, '<u2')
    for level in [1, 9]:
        case('zlib-%d-n%d' % (level, n), 'zlib', a, Zlib(level=level).encode(a))
        case('bz2-%d-n%d' % (level, n), 'bz2', a, BZ2(level=level).encode(a))
    for level in [1, 22]:
        case('zstd-%d-n%d' % (level, n), 'zstd', a, Zstd(level=level).encode(a))
    for accel in [1, 10]:
        case('lz4-%d-n%d' % (accel, n), 'lz4', a, LZ4(acceleration=accel).encode(a))
`

// TestNumcodecs decodes what numcodecs encodes, with every blosc inner
// codec and shuffle mode at typesizes 1, 2, 4 and 8, and with lz4, zstd,
// zlib and bz2, and compares byte for byte with the data it encoded.
func TestNumcodecs(t *testing.T) {
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import numcodecs, numpy").Run(); err != nil {
		testenv.Unavailable(t, "needs %s with numcodecs and numpy (Debian: apt-get install python3-numcodecs): %v", python, err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "write.py")
	if err := os.WriteFile(script, []byte(numcodecsScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(python, script, dir)
	cmd.Stderr = &stderr
	listing, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.Bytes())
	}
	cases := 0
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(listing))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			t.Fatalf("bad line %q", sc.Text())
		}
		name, codec := f[0], mustCodec(t, f[1])
		limit, err := strconv.Atoi(f[4])
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(f[2])
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(f[3])
		if err != nil {
			t.Fatal(err)
		}
		cases++
		out, err = codec(out, src, limit)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if i := firstDiff(out, want); i >= 0 {
			t.Errorf("%s: %d bytes, want %d; first difference at byte %d", name, len(out), len(want), i)
		}
	}
	if cases < 400 {
		t.Errorf("only %d cases", cases)
	}
}
