# The C reference for BenchmarkCodecs: the same 1 MiB image-like chunks
# (decode/codec/codecs_bench_test.go, imageChunk), encoded and decoded by
# numcodecs (c-blosc with one thread, libzstd, zlib, liblz4). Prints the
# median of 5 runs of decode throughput per busy core (process CPU time),
# the unit of BenchmarkCodecs' MB/cpu-s column.
#
#   /usr/bin/python3 decode/codec/testdata/numcodecs_bench.py
import time

import numpy as np
from numcodecs import LZ4, Blosc, Zlib, Zstd, blosc

blosc.set_nthreads(1)
blosc.use_threads = False


def chunk(bpv):
    # The same shape as imageChunk (not the same noise: a different RNG).
    rng = np.random.Generator(np.random.PCG64(3))
    n = (1 << 20) // bpv
    i = np.arange(n)
    x, y = i % 1024, i // 1024
    v = 4 * x + 3 * y * 1024 // (1024 // bpv) + rng.integers(0, 9, n)
    return (v // 24).astype(np.uint8) if bpv == 1 else v.astype('<u2')


codecs = [
    ('zstd', Zstd(level=1)), ('zlib', Zlib(level=1)), ('lz4', LZ4()),
    ('blosc-lz4', Blosc('lz4', 5, Blosc.SHUFFLE)),
    ('blosc-lz4-bitshuffle', Blosc('lz4', 5, Blosc.BITSHUFFLE)),
    ('blosc-blosclz', Blosc('blosclz', 5, Blosc.SHUFFLE)),
    ('blosc-zstd', Blosc('zstd', 5, Blosc.SHUFFLE)),
]
for bpv in (1, 2):
    a = chunk(bpv)
    for name, c in codecs:
        enc = c.encode(a)
        out = np.empty_like(a)
        runs = []
        for _ in range(5):
            t0, n = time.process_time(), 0
            while time.process_time() - t0 < 0.5:
                c.decode(enc, out=out)
                n += 1
            runs.append(n * a.nbytes / 1e6 / (time.process_time() - t0))
        print('%-28s ratio %5.2f  %6.0f MB/cpu-s' % ('%s/u%d' % (name, bpv), a.nbytes / len(enc), sorted(runs)[2]))
