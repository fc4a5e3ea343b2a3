"""Writes Zarr v2, Zarr v3 and N5 arrays with every numcodecs filter,
checksum and lzma format that volfs decodes, and checks a mount of them
against numcodecs' own decode.

Usage:
  filtercheck.py write SRC EXPECT    write arrays under SRC, decoded chunks under EXPECT
  filtercheck.py verify SRC EXPECT MOUNT

Zarr v2 arrays are written by zarr-python 2 (Debian's python3-zarr) with
numcodecs filters; their expected chunks are zarr-python's own decode of
each stored chunk. Zarr v3 arrays are written by hand from the spec, with
the codec names zarr-python 3 writes ("numcodecs.delta", ...), each chunk
encoded by numcodecs along the v3 pipeline (array-to-array codecs, bytes,
bytes-to-bytes codecs); their expected chunks are numcodecs' decode of the
stored bytes back along the same pipeline. Codecs that Debian's numcodecs
0.11 lacks (fletcher32, crc32c) and N5's lz4 framing (lz4-java's
LZ4BlockOutputStream) are written here from their specifications.
Arrays whose names start with "corrupt_" have one chunk with a damaged
checksum: reading it through the mount must fail with EIO. Arrays whose
names start with "pass_" must pass through undecoded, byte for byte.
Exits non-zero with a message listing every mismatch.
"""
import errno
import json
import lzma
import os
import struct
import sys
import zlib

import lz4.block
import numcodecs
import numpy as np
import zarr

# The numpy reader of a mount's Zarr v3 arrays, and the failures list
# both scripts append to (no __pycache__ left in testdata).
sys.dont_write_bytecode = True
from zarrcheck import V3_TYPES, failures, read_v3  # noqa: E402


def crc32c(data):
    table = crc32c.table
    if table is None:
        table = crc32c.table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None
assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def fletcher32(data):
    """HDF5's Fletcher-32, as numcodecs 0.12+ computes it."""
    sum1 = sum2 = 0
    words = len(data) // 2
    i = 0
    while words:
        n = min(words, 360)
        words -= n
        for _ in range(n):
            sum1 += (data[i] << 8) | data[i + 1]
            sum2 += sum1
            i += 2
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 += data[i] << 8
        sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return ((sum2 << 16) | sum1) & 0xFFFFFFFF


def xxh32(data, seed):
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF
    rot = lambda x, r: ((x << r) | (x >> (32 - r))) & m
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed, (seed - p1) & m]
        while i + 16 <= n:
            for k in range(4):
                x = struct.unpack_from("<I", data, i + 4 * k)[0]
                v[k] = (rot((v[k] + x * p2) & m, 13) * p1) & m
            i += 16
        h = (rot(v[0], 1) + rot(v[1], 7) + rot(v[2], 12) + rot(v[3], 18)) & m
    else:
        h = (seed + p5) & m
    h = (h + n) & m
    while i + 4 <= n:
        h = (rot((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4) & m
        i += 4
    while i < n:
        h = (rot((h + data[i] * p5) & m, 11) * p1) & m
        i += 1
    h ^= h >> 15
    h = (h * p2) & m
    h ^= h >> 13
    h = (h * p3) & m
    h ^= h >> 16
    return h


assert xxh32(b"abc", 0) == 0x32D153FF and xxh32(b"Nobody inspects the spammish repetition", 0) == 0xE2293B2F


def lz4_block_stream(data, block_size=1 << 16):
    """lz4-java's LZ4BlockOutputStream, as n5-java's Lz4Compression writes it."""
    out = bytearray()
    level = max(0, (block_size - 1).bit_length() - 10)
    for off in range(0, len(data), block_size):
        block = data[off:off + block_size]
        check = xxh32(block, 0x9747B28C) & 0x0FFFFFFF
        comp = lz4.block.compress(block, store_size=False)
        method = 0x20
        if len(comp) >= len(block):
            comp, method = block, 0x10
        out += b"LZ4Block" + struct.pack("<BiiI", method | level, len(comp), len(block), check) + comp
    out += b"LZ4Block" + struct.pack("<BiiI", 0x10 | level, 0, 0, 0)
    return bytes(out)


class TrailingChecksum:
    """A 4-byte checksum after the data, as numcodecs 0.12's Fletcher32 and
    0.13's CRC32C store it; Debian's numcodecs 0.11 has neither."""

    def __init__(self, codec_id, fn):
        self.codec_id, self.fn = codec_id, fn

    def encode(self, buf):
        b = bytes(np.ascontiguousarray(buf).view("u1"))
        return b + struct.pack("<I", self.fn(b))

    def decode(self, buf):
        b = bytes(buf)
        if struct.unpack("<I", b[-4:])[0] != self.fn(b[:-4]):
            raise RuntimeError(self.codec_id + " checksum failed")
        return b[:-4]

    def get_config(self):
        return {"id": self.codec_id}


def Fletcher32():
    return TrailingChecksum("fletcher32", fletcher32)


def CRC32C():
    return TrailingChecksum("crc32c", crc32c)


def data_for(dtype, shape, rng):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "f":
        # Smooth with noise, as images are; some exact values.
        a = 1000 + np.cumsum(rng.standard_normal(n)) * 3
        a[::7] = np.round(a[::7])
        return a.reshape(shape).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -20000), min(info.max, 20000)
    a = np.cumsum(rng.integers(-3, 4, n)) + (lo + hi) // 2
    return np.clip(a, lo, hi).reshape(shape).astype(dtype)


def v2_cases():
    from numcodecs import (Adler32, AsType, BitRound, CRC32, Delta, FixedScaleOffset, LZMA, Quantize,
                           Shuffle, Zlib, Zstd, BZ2, GZip, LZ4, Blosc)
    L = lzma
    return [
        # name, dtype, filters, compressor
        ("delta_i4_i2", "<i4", [Delta("<i4", astype="<i2")], Zlib(1)),
        ("delta_u2_u1", "<u2", [Delta("<u2", astype="u1")], None),
        ("delta_f8", "<f8", [Delta("<f8")], Zstd(3)),
        ("delta_f4_f8", "<f4", [Delta("<f4", astype="<f8")], None),
        ("delta_f8_i4", "<f8", [Delta("<f8", astype="<i4")], None),
        ("delta_i8_be", ">i8", [Delta(">i8", astype=">i4")], GZip(5)),
        ("shuffle_f4", "<f4", [Shuffle(elementsize=4)], Zlib(1)),
        ("shuffle_i8", "<i8", [Shuffle(elementsize=8)], None),
        ("shuffle_f4_2", "<f4", [Shuffle(elementsize=2)], BZ2(1)),
        ("fso_f8_u1", "<f8", [FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="u1")], Zlib(1)),
        ("fso_f8_u2", "<f8", [FixedScaleOffset(offset=900, scale=100, dtype="<f8", astype="<u2")], None),
        ("fso_f4_i2", "<f4", [FixedScaleOffset(offset=1000.5, scale=50, dtype="<f4", astype="<i2")], LZ4()),
        ("fso_f8_f4", "<f8", [FixedScaleOffset(offset=0.25, scale=3, dtype="<f8", astype="<f4")], None),
        ("fso_i4_u1", "<i4", [FixedScaleOffset(offset=-20000, scale=0.01, dtype="<i4", astype="u1")], None),
        ("bitround_f4", "<f4", [BitRound(keepbits=5)], Zstd(1)),
        ("bitround_f8", "<f8", [BitRound(keepbits=12)], None),
        ("quantize_f8", "<f8", [Quantize(digits=2, dtype="<f8")], Zlib(1)),
        ("quantize_f8_f4", "<f8", [Quantize(digits=3, dtype="<f8", astype="<f4")], None),
        ("quantize_f4_f2", "<f4", [Quantize(digits=1, dtype="<f4", astype="<f2")], None),
        ("astype_f8_i2", "<f8", [AsType(encode_dtype="<i2", decode_dtype="<f8")], Zlib(1)),
        ("astype_i4_u1", "<i4", [AsType(encode_dtype="u1", decode_dtype="<i4")], None),
        ("astype_f8_f4", "<f8", [AsType(encode_dtype="<f4", decode_dtype="<f8")], None),
        ("astype_f4_f2", "<f4", [AsType(encode_dtype="<f2", decode_dtype="<f4")], None),
        ("astype_u2_be", "<u2", [AsType(encode_dtype=">u4", decode_dtype="<u2")], None),
        ("crc32", "<u2", [CRC32()], Zlib(1)),
        ("adler32", "<u2", [Adler32()], None),
        ("fletcher32", "<u2", [Fletcher32()], None),
        ("crc32_compressor", "<i2", None, CRC32()),
        ("corrupt_crc32", "<u2", [CRC32()], None),
        ("corrupt_adler32", "<u2", None, Adler32()),
        ("corrupt_fletcher32", "<u2", [Fletcher32()], None),
        ("chain", "<i4", [Delta("<i4"), Shuffle(elementsize=4), CRC32()], Blosc("zstd", 3, Blosc.NOSHUFFLE)),
        ("lzma_xz", "<u2", None, LZMA()),
        ("lzma_xz_check", "<u2", None, LZMA(check=L.CHECK_SHA256, preset=1)),
        ("lzma_alone", "<u2", None, LZMA(format=L.FORMAT_ALONE)),
        ("lzma_xz_delta", "<u2", None, LZMA(filters=[{"id": L.FILTER_DELTA, "dist": 2}, {"id": L.FILTER_LZMA2, "preset": 1}])),
        ("lzma_xz_delta_crc32", "<f4", None, LZMA(check=L.CHECK_CRC32, filters=[{"id": L.FILTER_DELTA, "dist": 4}, {"id": L.FILTER_LZMA2}])),
        ("corrupt_lzma_xz_delta", "<u2", None, LZMA(filters=[{"id": L.FILTER_DELTA, "dist": 2}, {"id": L.FILTER_LZMA2, "preset": 1}])),
        ("lzma_raw2", "<u2", None, LZMA(format=L.FORMAT_RAW, filters=[{"id": L.FILTER_LZMA2, "preset": 1}])),
        ("lzma_raw2_delta", "<u2", None, LZMA(format=L.FORMAT_RAW,
                                              filters=[{"id": L.FILTER_DELTA, "dist": 2}, {"id": L.FILTER_LZMA2, "preset": 6}])),
        ("lzma_raw1", "<u2", None, LZMA(format=L.FORMAT_RAW, filters=[{"id": L.FILTER_LZMA1, "preset": 1, "lc": 1, "lp": 1, "pb": 1}])),
        ("lzma_raw1_default", "<f4", None, LZMA(format=L.FORMAT_RAW, filters=[{"id": L.FILTER_LZMA1}])),
    ]


def write_v2(src, expect, rng):
    names = []
    for name, dtype, filters, comp in v2_cases():
        shape, chunks = (37, 45), (16, 20)
        path = os.path.join(src, name)
        custom = [f for f in (filters or []) + [comp] if isinstance(f, TrailingChecksum)]
        data = data_for(dtype, shape, rng)
        if custom:
            # zarr-python 2 cannot store a codec numcodecs 0.11 does not
            # register: encode each chunk here, and name the codec in
            # .zarray by hand.
            z = zarr.open(path, mode="w", shape=shape, chunks=chunks, dtype=dtype, compressor=None)
            z[...] = data
            meta = json.load(open(os.path.join(path, ".zarray")))
            meta["filters"] = [f.get_config() for f in filters] if filters else None
            meta["compressor"] = comp.get_config() if comp else None
            for idx in np.ndindex(*z.cdata_shape):
                key = ".".join(map(str, idx))
                raw = open(os.path.join(path, key), "rb").read()
                b = raw
                for f in filters or []:
                    b = f.encode(np.frombuffer(b, "u1"))
                if comp:
                    b = comp.encode(np.frombuffer(bytes(b), "u1"))
                open(os.path.join(path, key), "wb").write(bytes(b))
                save(expect, name, key, raw)
            json.dump(meta, open(os.path.join(path, ".zarray"), "w"))
        else:
            z = zarr.open(path, mode="w", shape=shape, chunks=chunks, dtype=dtype, compressor=comp, filters=filters)
            z[...] = data
            for idx in np.ndindex(*z.cdata_shape):
                key = ".".join(map(str, idx))
                stored = open(os.path.join(path, key), "rb").read()
                try:
                    want = z._decode_chunk(stored).tobytes(order=z.order)
                except ValueError:
                    # numcodecs' LZMA hands an xz stream's filters to
                    # Python's decompressor, which takes them for raw
                    # streams only: decode as its format says.
                    want = lzma.decompress(stored)
                save(expect, name, key, want)
        names.append(name)
    # Categorize decodes to strings: it passes through.
    path = os.path.join(src, "pass_categorize")
    z = zarr.open(path, mode="w", shape=(10,), chunks=(5,), dtype=object, object_codec=numcodecs.VLenUTF8(),
                  filters=[numcodecs.Categorize(["a", "b"], dtype=object)])
    z[...] = ["a", "b"] * 5
    names.append("pass_categorize")
    # An xz stream with a branch-call-jump filter (for executables)
    # passes through.
    path = os.path.join(src, "pass_xz_x86")
    z = zarr.open(path, mode="w", shape=(100,), chunks=(50,), dtype="<u2",
                  compressor=numcodecs.LZMA(filters=[{"id": lzma.FILTER_X86}, {"id": lzma.FILTER_LZMA2}]))
    z[...] = np.arange(100)
    names.append("pass_xz_x86")
    return names


def save(expect, name, key, data):
    d = os.path.join(expect, name)
    os.makedirs(os.path.dirname(os.path.join(d, key)), exist_ok=True)
    open(os.path.join(d, key), "wb").write(bytes(data))


def v3_cases():
    from numcodecs import (Adler32, AsType, BitRound, BZ2, Blosc, CRC32, Delta, FixedScaleOffset, GZip, LZ4,
                           LZMA, Quantize, Shuffle, Zlib, Zstd)
    little, big = {"endian": "little"}, {"endian": "big"}
    return [
        # name, data_type, array-to-array codecs, bytes config, bytes-to-bytes codecs
        ("zlib", "uint16", [], little, [Zlib(level=1)]),
        ("bz2", "uint16", [], little, [BZ2(level=1)]),
        ("lzma", "uint16", [], little, [LZMA()]),
        ("lzma_raw", "uint16", [], little, [LZMA(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 1}])]),
        ("zstd", "int32", [], big, [Zstd(level=3)]),
        ("blosc", "float32", [], little, [Blosc("lz4", 5, Blosc.SHUFFLE)]),
        ("lz4", "int16", [], little, [LZ4()]),
        ("gzip", "uint16", [], little, [GZip(level=5)]),
        ("shuffle", "float32", [], little, [Shuffle(elementsize=4), Zlib(1)]),
        ("delta", "int32", [Delta("<i4", astype="<i2")], little, [Zlib(1)]),
        ("delta_big", "int32", [Delta("<i4", astype="<i2")], big, [GZip(1)]),
        ("fixedscaleoffset", "float64", [FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")], little, [Zstd(1)]),
        ("bitround", "float32", [BitRound(keepbits=6)], little, [Zstd(1)]),
        ("quantize", "float64", [Quantize(digits=2, dtype="<f8", astype="<f4")], little, [Zlib(1)]),
        ("astype", "float64", [AsType(encode_dtype="<i2", decode_dtype="<f8")], big, [BZ2(1)]),
        ("adler32", "uint16", [], little, [Zlib(1), Adler32()]),
        ("crc32", "uint16", [], little, [CRC32(), Zlib(1)]),
        ("fletcher32", "uint16", [], little, [Fletcher32()]),
        ("crc32c_inner", "uint16", [], little, [CRC32C(), GZip(1)]),
        ("crc32c_outer", "uint16", [], little, ["crc32c-plain"]),
        ("corrupt_crc32", "uint16", [], little, [CRC32()]),
        ("corrupt_fletcher32", "uint16", [], little, [Zstd(1), Fletcher32()]),
        ("corrupt_crc32c", "uint16", [], little, [Zlib(1), "crc32c-plain"]),
    ]


def v3_codec(c):
    if c == "crc32c-plain":
        return {"name": "crc32c"}  # the Zarr v3 core codec, not numcodecs'
    cfg = dict(c.get_config())
    cfg.pop("id")
    return {"name": "numcodecs." + c.codec_id, "configuration": cfg}


def write_v3(src, expect, rng):
    names = []
    shape, chunks = (37, 45), (16, 20)
    for name, dt, a2a, bcfg, b2b in v3_cases():
        name = "v3_" + name if not name.startswith("corrupt_") else "corrupt_v3_" + name[len("corrupt_"):]
        path = os.path.join(src, name)
        os.makedirs(path)
        dtype = np.dtype(V3_TYPES[dt])
        data = data_for(dtype, shape, rng)
        codecs = [v3_codec(c) for c in a2a] + [{"name": "bytes", "configuration": bcfg}] + [v3_codec(c) for c in b2b]
        meta = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dt,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0, "codecs": codecs, "attributes": {}}
        json.dump(meta, open(os.path.join(path, "zarr.json"), "w"), indent=2)
        b2b = [CRC32C() if c == "crc32c-plain" else c for c in b2b]
        grid = [-(-s // c) for s, c in zip(shape, chunks)]
        for idx in np.ndindex(*grid):
            chunk = np.zeros(chunks, dtype)
            sel = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
            chunk[tuple(slice(0, x.stop - x.start) for x in sel)] = data[sel]
            # Encode along the v3 pipeline, as zarr-python 3 does.
            arr = chunk
            for c in a2a:
                arr = np.asarray(c.encode(arr)).reshape(chunks)
            b = arr.astype(arr.dtype.newbyteorder(">" if bcfg["endian"] == "big" else "<")).tobytes()
            for c in b2b:
                b = bytes(c.encode(np.frombuffer(b, "u1")))
            key = "c/" + "/".join(map(str, idx))
            os.makedirs(os.path.dirname(os.path.join(path, key)), exist_ok=True)
            open(os.path.join(path, key), "wb").write(b)
            # Decode the stored bytes back with numcodecs.
            for c in reversed(b2b):
                b = bytes(np.frombuffer(c.decode(b), "u1"))
            arr = np.frombuffer(b, arr.dtype.newbyteorder(">" if bcfg["endian"] == "big" else "<")).reshape(chunks)
            for c in reversed(a2a):
                arr = np.asarray(c.decode(arr.astype(arr.dtype.newbyteorder("="))))
            save(expect, name, key, np.ascontiguousarray(arr).astype(dtype.newbyteorder("<")).tobytes())
        names.append(name)
    return names


def write_v3_sharded(src, expect, rng):
    """A sharded array whose inner chunks carry numcodecs filters, as
    zarr-python 3 writes filters and compressors with shards=: inside the
    sharding codec. Its expectation is the whole array (numcodecs' decode of
    every inner chunk), so that it holds however the mount lays out chunks."""
    from numcodecs import Delta, Zlib
    name = "v3_sharded_delta"
    path = os.path.join(src, name)
    os.makedirs(path)
    shape, shard, inner = (37, 45), (16, 20), (8, 10)
    data = data_for("<i4", shape, rng)
    a2a, b2b = [Delta("<i4", astype="<i2")], [Zlib(1)]
    codecs = [v3_codec(c) for c in a2a] + [{"name": "bytes", "configuration": {"endian": "little"}}] + [v3_codec(c) for c in b2b]
    meta = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "attributes": {},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(inner), "codecs": codecs, "index_location": "end",
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]}
    json.dump(meta, open(os.path.join(path, "zarr.json"), "w"), indent=2)
    decoded = np.zeros([-(-s // c) * c for s, c in zip(shape, shard)], "<i4")
    padded = np.zeros_like(decoded)
    padded[:shape[0], :shape[1]] = data
    for sidx in np.ndindex(*[-(-s // c) for s, c in zip(shape, shard)]):
        body, index = b"", []
        for iidx in np.ndindex(*[s // i for s, i in zip(shard, inner)]):
            lo = [si * s + ii * i for si, s, ii, i in zip(sidx, shard, iidx, inner)]
            sel = tuple(slice(l, l + i) for l, i in zip(lo, inner))
            if sidx == (0, 0) and iidx == (1, 1):
                index += [2**64 - 1, 2**64 - 1]  # absent: reads as the fill value
                continue
            arr = np.asarray(a2a[0].encode(padded[sel])).reshape(inner)
            b = bytes(b2b[0].encode(arr.astype("<i2").tobytes()))
            index += [len(body), len(b)]
            body += b
            dec = np.frombuffer(b2b[0].decode(b), "<i2").reshape(inner)
            decoded[sel] = np.asarray(a2a[0].decode(dec)).reshape(inner)
        ib = struct.pack("<%dQ" % len(index), *index)
        key = "c/" + "/".join(map(str, sidx))
        os.makedirs(os.path.dirname(os.path.join(path, key)), exist_ok=True)
        open(os.path.join(path, key), "wb").write(body + ib + struct.pack("<I", crc32c(ib)))
    os.makedirs(os.path.join(expect, name))
    np.save(os.path.join(expect, name, "whole.npy"), decoded[:shape[0], :shape[1]])
    return [name]


def write_n5(src, expect, rng):
    """N5 datasets with lz4 compression, as n5-java writes them."""
    names = []
    for name, shape, block in [("n5_lz4", (70, 50, 9), (64, 32, 8)), ("corrupt_n5_lz4", (20, 20, 3), (16, 16, 2))]:
        root = os.path.join(src, name + ".n5")
        path = os.path.join(root, "data")
        os.makedirs(path)
        json.dump({"n5": "4.0.0"}, open(os.path.join(root, "attributes.json"), "w"))
        json.dump({"dimensions": list(shape), "blockSize": list(block), "dataType": "uint16",
                   "compression": {"type": "lz4", "blockSize": 65536}}, open(os.path.join(path, "attributes.json"), "w"))
        data = data_for("<u2", shape[::-1], rng)  # numpy C order: last N5 axis first
        grid = [-(-s // b) for s, b in zip(shape, block)]
        for idx in np.ndindex(*grid):
            lo = [i * b for i, b in zip(idx, block)]
            ext = [min(b, s - l) for b, s, l in zip(block, shape, lo)]
            sel = tuple(slice(l, l + e) for l, e in reversed(list(zip(lo, ext))))
            raw = data[sel].astype(">u2").tobytes()
            header = struct.pack(">HH", 0, len(shape)) + b"".join(struct.pack(">I", e) for e in ext)
            key = "/".join(map(str, idx))
            os.makedirs(os.path.dirname(os.path.join(path, key)), exist_ok=True)
            open(os.path.join(path, key), "wb").write(header + lz4_block_stream(raw))
            save(expect, name + ".n5/data", key, header + raw)
        names.append(name + ".n5/data")
    return names


def corrupt(src, names):
    """Flips one payload bit of the first chunk of every corrupt_ array."""
    for name in names:
        if not name.startswith("corrupt_"):
            continue
        path = os.path.join(src, name)
        key = {"v3": "c/0/0", "n5": "0/0/0"}.get(name.split("_")[1], "0.0")
        f = os.path.join(path, key)
        b = bytearray(open(f, "rb").read())
        b[len(b) // 2] ^= 0x10
        open(f, "wb").write(b)


def write(src, expect):
    rng = np.random.default_rng(20261203)
    names = write_v2(src, expect, rng) + write_v3(src, expect, rng) + write_v3_sharded(src, expect, rng) + write_n5(src, expect, rng)
    corrupt(src, names)
    json.dump(names, open(os.path.join(expect, "manifest.json"), "w"))


def verify(src, expect, mnt):
    names = json.load(open(os.path.join(expect, "manifest.json")))
    checked = 0
    for name in names:
        m = os.path.join(mnt, name)
        if name.startswith("pass_"):
            for dirpath, _, files in os.walk(os.path.join(src, name)):
                for f in files:
                    rel = os.path.relpath(os.path.join(dirpath, f), src)
                    if open(os.path.join(mnt, rel), "rb").read() != open(os.path.join(src, rel), "rb").read():
                        failures.append(f"{rel}: not passed through byte for byte")
            if os.path.exists(os.path.join(m, ".zarray.orig")):
                failures.append(f"{name}: decoded, but should pass through")
            continue
        meta = [f for f in (".zarray", "zarr.json", "attributes.json") if os.path.exists(os.path.join(m, f))][0]
        if not os.path.exists(os.path.join(m, meta + ".orig")):
            failures.append(f"{name}: not decoded (no {meta}.orig on the mount)")
            continue
        md = json.load(open(os.path.join(m, meta)))
        if meta == ".zarray" and (md["compressor"] is not None or md["filters"] is not None):
            failures.append(f"{name}: the mount's .zarray names {md['compressor']}, {md['filters']}")
        if meta == "zarr.json" and md["codecs"] != [{"name": "bytes", "configuration": {"endian": "little"}}]:
            failures.append(f"{name}: the mount's zarr.json names {md['codecs']}")
        if meta == "attributes.json" and md["compression"] != {"type": "raw"}:
            failures.append(f"{name}: the mount's attributes.json names {md['compression']}")
        edir = os.path.join(expect, name)
        if os.path.exists(os.path.join(edir, "whole.npy")):
            got, want = read_v3(m), np.load(os.path.join(edir, "whole.npy"))
            if not np.array_equal(got, want):
                failures.append(f"{name}: reads {got.ravel()[:6]}, numcodecs decodes {want.ravel()[:6]}")
            continue
        for dirpath, _, files in sorted(os.walk(edir)):
            for f in sorted(files):
                key = os.path.relpath(os.path.join(dirpath, f), edir)
                want = open(os.path.join(dirpath, f), "rb").read()
                damaged = name.startswith("corrupt_") and key in ("0.0", "c/0/0", "0/0/0")
                try:
                    got = open(os.path.join(m, key), "rb").read()
                except OSError as e:
                    if not (damaged and e.errno == errno.EIO):
                        failures.append(f"{name}/{key}: {e}")
                    continue
                if damaged:
                    failures.append(f"{name}/{key}: a damaged checksum read without an error")
                elif got != want:
                    diff = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
                    failures.append(f"{name}/{key}: {len(got)} bytes differ from numcodecs' decode ({len(want)} bytes) at byte {diff}")
                checked += 1
        # The mounted array also reads as the source through a reader.
        if meta == ".zarray" and not name.startswith("corrupt_"):
            try:
                want = zarr.open(os.path.join(src, name), mode="r")[...]
            except ValueError:  # a codec Debian's numcodecs lacks: the chunks were compared above
                continue
            got = zarr.open(m, mode="r")[...]
            if got.dtype != want.dtype or not np.array_equal(got, want, equal_nan=True):
                failures.append(f"{name}: zarr-python reads the mount as {got.ravel()[:5]}, the source as {want.ravel()[:5]}")
    if checked < 400:
        failures.append(f"only {checked} chunks checked")
    print(f"{checked} chunks of {len(names)} arrays checked")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        verify(sys.argv[2], sys.argv[3], sys.argv[4])
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")
