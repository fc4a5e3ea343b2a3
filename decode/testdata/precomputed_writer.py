"""Writes precomputed chunks and shards for decode's tests, independently of volfs.

Usage: precomputed_writer.py OUTDIR

Imported as a module (integration/testdata/mkencodings.py does), it writes nothing: its
encoders and the shard writer (shard_files) are functions.

jpeg and png chunks are written by PIL (and, for the 16-bit multi-channel PNGs PIL
cannot write, by a PNG writer here, from the PNG specification);
compressed_segmentation and neuroglancer_uint64_sharded_v1 by encoders written here
from neuroglancer's specifications (sliceview/compressed_segmentation/README.md,
datasource/precomputed/sharded.md and volume.md), in numpy. Expected decoded bytes
are written next to each chunk in the raw layout: little-endian, x fastest, then y,
z, channel. OUTDIR/manifest.json lists every case.
"""

import gzip
import json
import os
import random
import struct
import sys
import zlib

import numpy as np
from PIL import Image

out = None  # the output directory, set by main
rng = np.random.default_rng(7)
rnd = random.Random(7)
manifest = {"images": [], "cseg": [], "shards": []}


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    return name


def raw(arr, dtype):
    """arr is indexed [c, z, y, x]; raw layout is x fastest, channel slowest."""
    return np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def smooth(shape, lo, hi):
    """A smooth field plus noise, [c, z, y, x]."""
    c, z, y, x = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    f = (np.sin(x / 3.0 + c) + np.cos(y / 4.0 - z / 2.0)) / 4 + 0.5
    f = lo + (hi - lo) * f + rng.normal(0, (hi - lo) / 50, shape)
    return np.clip(np.rint(f), lo, hi)


# ---------------------------------------------------------------- jpeg
def jpeg_cases():
    """jpeg chunks written by PIL, and PIL's decode of them."""
    for channels, extent, subsampling, width, progressive in [
        (1, (16, 8, 4), None, None, False),
        (1, (13, 7, 3), None, None, False),
        (1, (13, 7, 3), None, 13 * 7, False),  # any width x height with the right product
        (3, (16, 8, 4), 0, None, False),  # 4:4:4
        (3, (16, 16, 2), 2, None, False),  # 4:2:0, PIL's default
        (3, (13, 7, 3), 2, None, False),  # 4:2:0 with odd sizes: edge chroma samples
        (3, (16, 8, 4), 1, None, False),  # 4:2:2
        (3, (15, 8, 4), 1, None, False),
        (3, (9, 5, 3), 0, None, False),
        (3, (64, 32, 3), 2, None, False),
        (1, (64, 64, 8), None, None, False),
        (1, (32, 16, 4), None, None, True),
        (3, (32, 16, 4), 2, None, True),
    ]:
        ex, ey, ez = extent
        arr = smooth((channels, ez, ey, ex), 0, 255).astype(np.uint8)
        w = width or ex
        img = arr.transpose(1, 2, 3, 0).reshape(ex * ey * ez // w, w, channels)
        pil = Image.fromarray(img[:, :, 0] if channels == 1 else img, "L" if channels == 1 else "RGB")
        name = "jpeg_%d_%dx%dx%d_%s_%d%s" % (channels, ex, ey, ez, subsampling, w, "_progressive" if progressive else "")
        opts = {"quality": 90, "progressive": progressive}
        if subsampling is not None:
            opts["subsampling"] = subsampling
        pil.save(os.path.join(out, name + ".jpg"), "JPEG", **opts)
        dec = np.asarray(Image.open(os.path.join(out, name + ".jpg")))
        dec = dec.reshape(ez, ey, ex, channels).transpose(3, 0, 1, 2)
        write(name + ".raw", raw(dec, np.uint8))
        manifest["images"].append({"kind": "jpeg", "file": name + ".jpg", "expect": name + ".raw",
                                   "extent": extent, "channels": channels, "elem": 1})


# ---------------------------------------------------------------- png
def png_chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)


def write_png(path, img, bits):
    """img is [h, w, c] of uint8 or uint16; written from the PNG spec, filter 0 (None)."""
    h, w, c = img.shape
    ctype = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    rows = img.astype(">u2" if bits == 16 else "u1").reshape(h, -1).view(np.uint8).reshape(h, -1)
    scan = b"".join(b"\x00" + rows[y].tobytes() for y in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, ctype, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(scan, 6)) + png_chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def png_cases():
    """png chunks of every dtype and channel count."""
    for dtype in (np.uint8, np.uint16):
        for channels in (1, 2, 3, 4):
            for extent in [(16, 8, 4), (7, 5, 3)]:
                ex, ey, ez = extent
                hi = 255 if dtype == np.uint8 else 65535
                arr = rng.integers(0, hi + 1, (channels, ez, ey, ex)).astype(dtype)
                img = arr.transpose(1, 2, 3, 0).reshape(ez * ey, ex, channels)
                name = "png_%s_%d_%dx%dx%d.png" % (np.dtype(dtype).name, channels, ex, ey, ez)
                path = os.path.join(out, name)
                if dtype == np.uint8:
                    mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
                    Image.fromarray(img[:, :, 0] if channels == 1 else img, mode).save(path, "PNG", optimize=True)
                elif channels == 1:
                    Image.fromarray(img[:, :, 0], "I;16").save(path, "PNG")
                else:
                    write_png(path, img, 16)
                write(name + ".raw", raw(arr, dtype))
                manifest["images"].append({"kind": "png", "file": name, "expect": name + ".raw",
                                           "extent": extent, "channels": channels, "elem": np.dtype(dtype).itemsize})


# ---------------------------------------------------- compressed_segmentation
def cseg_channel(vol, block, dtype):
    """vol is [z, y, x]; returns the channel's data as a list of uint32 words."""
    ez, ey, ex = vol.shape
    bx, by, bz = block
    gx, gy, gz = -(-ex // bx), -(-ey // by), -(-ez // bz)
    words = [0] * (2 * gx * gy * gz)
    tables = {}  # shared lookup tables, as neuroglancer's encoder shares them
    per = np.dtype(dtype).itemsize // 4
    b = 0
    for z0 in range(0, ez, bz):
        for y0 in range(0, ey, by):
            for x0 in range(0, ex, bx):
                part = vol[z0:z0 + bz, y0:y0 + by, x0:x0 + bx]
                full = np.full((bz, by, bx), part.flat[0], dtype=dtype)  # padding: any value of the block
                full[:part.shape[0], :part.shape[1], :part.shape[2]] = part
                table = sorted(set(int(v) for v in part.flat))
                nbits = next(n for n in (0, 1, 2, 4, 8, 16, 32) if (1 << n) >= len(table))
                index = {v: i for i, v in enumerate(table)}
                values_off = len(words)
                codes = [index[int(v)] for v in full.flat]  # x fastest
                nwords = (nbits * len(codes) + 31) // 32
                enc = [0] * nwords
                for i, code in enumerate(codes if nbits else []):
                    bit = i * nbits
                    enc[bit // 32] |= code << (bit % 32)
                words += enc
                key = tuple(table)
                if key not in tables:
                    tables[key] = len(words)
                    for v in table:
                        for k in range(per):
                            words.append((v >> (32 * k)) & 0xFFFFFFFF)
                words[2 * b] = tables[key] | (nbits << 24)
                words[2 * b + 1] = values_off
                b += 1
    return words


def cseg_encode(arr, block, dtype):
    """arr is [c, z, y, x]."""
    chans = [cseg_channel(arr[c], block, dtype) for c in range(arr.shape[0])]
    offsets, pos = [], len(chans)
    for ch in chans:
        offsets.append(pos)
        pos += len(ch)
    return struct.pack("<%dI" % pos, *(offsets + [w for ch in chans for w in ch]))


def labels(shape, dtype, n):
    """Segment-like labels: blobs of a few ids (some above 2^32 for uint64), [c, z, y, x]."""
    c, z, y, x = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    ids = rng.integers(1, 2 ** 32 if dtype == np.uint32 else 2 ** 63, n, dtype=np.uint64)
    pick = (x // 3 + (y // 2) * 3 + z * 5 + c * 7 + (rng.random(shape) < 0.1) * rng.integers(0, n, shape)) % n
    return ids[pick].astype(dtype)


def cseg_cases():
    """compressed_segmentation chunks of several dtypes, channels and block sizes."""
    cseg_cases = [
        (np.uint32, 1, (8, 8, 8), (8, 8, 8), 5),
        (np.uint64, 1, (13, 9, 7), (8, 8, 8), 7),
        (np.uint32, 2, (13, 9, 7), (3, 5, 2), 40),
        (np.uint64, 3, (10, 6, 5), (4, 4, 1), 300),  # 16-bit blocks
        (np.uint64, 1, (5, 4, 3), (1, 1, 1), 9),  # 0-bit blocks, every table shared
        (np.uint32, 1, (64, 64, 17), (64, 64, 17), 0),  # 69632 distinct values: 32-bit codes
        (np.uint32, 1, (6, 6, 6), (16, 16, 16), 3),  # one block larger than the chunk
    ]
    for dtype, channels, extent, block, n in cseg_cases:
        ex, ey, ez = extent
        if n:
            arr = labels((channels, ez, ey, ex), dtype, n)
        else:
            arr = ((np.arange(channels * ez * ey * ex, dtype=np.uint64) * 2654435761) % 2 ** 32).astype(dtype)
            arr = arr.reshape(channels, ez, ey, ex)
        name = "cseg_%s_%d_%dx%dx%d_%dx%dx%d" % ((np.dtype(dtype).name, channels) + extent + block)
        write(name, cseg_encode(arr, block, dtype))
        write(name + ".raw", raw(arr, dtype))
        manifest["cseg"].append({"file": name, "expect": name + ".raw", "extent": extent, "block": block,
                                 "channels": channels, "elem": np.dtype(dtype).itemsize})


# ---------------------------------------------------------------- sharding
def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def fmix(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def murmur_x86_128(key, seed=0):
    """MurmurHash3_x86_128 from Appleby's reference; returns the 16-byte digest."""
    c = [0x239B961B, 0xAB0E9789, 0x38B34AE5, 0xA1E38B93]
    rot_k = [15, 16, 17, 18]
    rot_h = [19, 17, 15, 13]
    add = [0x561CCD1B, 0x0BCAA747, 0x96CD1C35, 0x32AC3B17]
    h = [seed] * 4
    n = len(key)
    nblocks = n // 16
    for i in range(nblocks):
        k = struct.unpack_from("<4I", key, 16 * i)
        for j in range(4):
            kj = (k[j] * c[j]) & 0xFFFFFFFF
            kj = (rotl(kj, rot_k[j]) * c[(j + 1) % 4]) & 0xFFFFFFFF
            h[j] ^= kj
            h[j] = rotl(h[j], rot_h[j])
            h[j] = (h[j] + h[(j + 1) % 4]) & 0xFFFFFFFF
            h[j] = (h[j] * 5 + add[j]) & 0xFFFFFFFF
    tail = key[16 * nblocks:] + b"\x00" * 16
    for j in reversed(range(4)):
        if len(key) - 16 * nblocks > 4 * j:
            kj = struct.unpack_from("<I", tail, 4 * j)[0]
            kj = (kj * c[j]) & 0xFFFFFFFF
            kj = (rotl(kj, rot_k[j]) * c[(j + 1) % 4]) & 0xFFFFFFFF
            h[j] ^= kj
    h = [x ^ n for x in h]
    h[0] = (h[0] + h[1] + h[2] + h[3]) & 0xFFFFFFFF
    for j in (1, 2, 3):
        h[j] = (h[j] + h[0]) & 0xFFFFFFFF
    h = [fmix(x) for x in h]
    h[0] = (h[0] + h[1] + h[2] + h[3]) & 0xFFFFFFFF
    for j in (1, 2, 3):
        h[j] = (h[j] + h[0]) & 0xFFFFFFFF
    return struct.pack("<4I", *h)


def hash64(chunk_id, hash_name):
    if hash_name == "identity":
        return chunk_id
    return struct.unpack("<Q", murmur_x86_128(struct.pack("<Q", chunk_id))[:8])[0]


# tensorstore's murmurhash3_test.cc vectors, so this writer is checked on its own.
assert hash64(0, "murmur") == 0x4772B084E028AE41
assert hash64(42, "murmur") == 0xC20B94F95119F47A


def morton(pos, grid):
    """Compressed Morton code, as volume.md's algorithm states it."""
    code, j = 0, 0
    for i in range(64):
        for d in range(3):
            if (1 << i) < grid[d]:
                code |= ((pos[d] >> i) & 1) << j
                j += 1
    return code


def locate(cid, spec):
    """The shard and minishard numbers of chunk id cid."""
    mb, sb = spec["minishard_bits"], spec["shard_bits"]
    h = hash64(cid >> spec["preshift_bits"], spec["hash"])
    return (h >> mb) & ((1 << sb) - 1), h & ((1 << mb) - 1)


def shard_name(shard, spec):
    return "%0*x.shard" % ((spec["shard_bits"] + 3) // 4, shard)


def shard_files(spec, chunks):
    """chunks maps chunk id -> stored bytes. Returns the scale's shard files as
    {name: bytes}, and their layout as {name: {minishard: {"index": [start, end],
    "chunks": {id: [start, end]}}}}, absolute byte ranges in the file."""
    mb = spec["minishard_bits"]
    gz_index = spec.get("minishard_index_encoding", "raw") == "gzip"
    gz_data = spec.get("data_encoding", "raw") == "gzip"
    shards = {}
    for cid in sorted(chunks):
        shard, ms = locate(cid, spec)
        shards.setdefault(shard, {}).setdefault(ms, []).append(cid)
    files, layout = {}, {}
    for shard, minishards in shards.items():
        name = shard_name(shard, spec)
        base = 16 << mb
        index = [(0, 0)] * (1 << mb)
        data = bytearray()
        where = layout.setdefault(name, {})
        for ms in sorted(minishards):
            ids, starts, sizes = [], [], []
            for cid in minishards[ms]:
                data += bytes(rnd.randrange(3) * [0xAB])  # gaps between chunks are allowed
                blob = gzip.compress(chunks[cid]) if gz_data else chunks[cid]
                ids.append(cid)
                starts.append(len(data))
                sizes.append(len(blob))
                data += blob
            ends = [s + n for s, n in zip(starts, sizes)]
            deltas = [ids[0]] + [b - a for a, b in zip(ids, ids[1:])]
            offs = [starts[0]] + [s - e for s, e in zip(starts[1:], ends)]
            msi = struct.pack("<%dQ" % (3 * len(ids)), *(deltas + offs + sizes))
            if gz_index:
                msi = gzip.compress(msi)
            index[ms] = (len(data), len(data) + len(msi))
            where[ms] = {"index": [base + index[ms][0], base + index[ms][1]],
                         "chunks": {c: [base + s, base + e] for c, s, e in zip(ids, starts, ends)}}
            data += msi
        head = b"".join(struct.pack("<QQ", s, e) for s, e in index)
        files[name] = head + bytes(data)
    return files, layout


def write_sharded(dirname, spec, chunks):
    """chunks maps chunk id -> stored bytes. Writes every shard file of the scale."""
    os.makedirs(os.path.join(out, dirname))
    for name, data in shard_files(spec, chunks)[0].items():
        write(os.path.join(dirname, name), data)


def shard_cases():
    """sharded scales of raw bytes and compressed_segmentation chunks."""
    shard_cases = [
        ("identity", 0, 2, 2, "raw", "raw", (5, 4, 3), "bytes"),
        ("murmurhash3_x86_128", 1, 3, 1, "gzip", "gzip", (5, 4, 3), "bytes"),
        ("murmurhash3_x86_128", 0, 0, 0, "raw", "gzip", (4, 4, 4), "bytes"),
        ("identity", 2, 1, 3, "gzip", "raw", (6, 3, 2), "cseg"),
        ("murmurhash3_x86_128", 0, 4, 5, "raw", "raw", (8, 8, 4), "bytes"),
        ("murmurhash3_x86_128", 3, 2, 2, "gzip", "gzip", (7, 5, 3), "cseg"),
        ("identity", 0, 13, 0, "raw", "raw", (4, 4, 2), "bytes"),  # per-entry shard index reads
    ]
    for n, (hash_name, pre, mb, sb, ienc, denc, grid, content) in enumerate(shard_cases):
        spec = {"@type": "neuroglancer_uint64_sharded_v1", "hash": hash_name, "preshift_bits": pre,
                "minishard_bits": mb, "shard_bits": sb, "minishard_index_encoding": ienc, "data_encoding": denc}
        if ienc == "raw" and n % 2 == 0:
            del spec["minishard_index_encoding"]  # raw is the default
        dirname = "sharded_%d" % n
        chunks, listed = {}, []
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    pos = (x, y, z)
                    cid = morton(pos, grid)
                    entry = {"pos": pos, "id": cid}
                    if rnd.random() < 0.2:
                        entry["missing"] = True  # never written: reads as fill
                    elif content == "bytes":
                        stored = rng.integers(0, 256, rnd.randrange(1, 200), dtype=np.uint8).tobytes()
                        chunks[cid] = stored
                        entry["expect"] = write("%s_%d.raw" % (dirname, cid), stored)
                    else:
                        extent = (4, 3, 2)
                        arr = labels((1,) + extent[::-1], np.uint64, 6)
                        chunks[cid] = cseg_encode(arr, (2, 2, 2), np.uint64)
                        entry["expect"] = write("%s_%d.raw" % (dirname, cid), raw(arr, np.uint64))
                        entry["cseg"] = {"extent": extent, "block": (2, 2, 2), "channels": 1, "elem": 8}
                    listed.append(entry)
        write_sharded(dirname, spec, chunks)
        manifest["shards"].append({"dir": dirname, "sharding": spec, "grid": grid, "chunks": listed})


def main():
    global out
    out = sys.argv[1]
    jpeg_cases()
    png_cases()
    cseg_cases()
    shard_cases()
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
