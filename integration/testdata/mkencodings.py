#!/usr/bin/python3
"""Write precomputed layers in every encoding volfs decodes, independently of volfs.

Usage:
    mkencodings.py OUTDIR

OUTDIR/src is the source to mount: one layer per case, each an "info" and one scale
"s0" of chunk objects (jpeg and png written by PIL, compressed_segmentation by an
encoder written from neuroglancer's specification) or of shard files
(neuroglancer_uint64_sharded_v1). The encoders are decode/testdata/precomputed_writer.py's.

OUTDIR/truth/LAYER/CHUNK holds the bytes each chunk file must read as: numpy's array in
the raw layout (little-endian, x fastest, then y, z, channel), or for jpeg PIL's
(libjpeg's) decode of the very bytes stored. OUTDIR/manifest.json lists, per layer, every
chunk key of the grid with its state:
    "ok"       the truth file holds its bytes
    "missing"  never written (or its whole shard is absent): reads as zeros
    "corrupt"  its stored bytes, or the shard entries that lead to it, are bad: EIO
with "object", the name of the object a log line must give for a corrupt chunk. Sharded
layers also list their shard files' layout (byte ranges of each minishard index and
chunk), for the tests that count what an HTTP origin serves.
"""

import gzip
import io
import json
import os
import struct
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "decode", "testdata"))
import precomputed_writer as w  # noqa: E402  (the independent encoders)

out = sys.argv[1]
rng = np.random.default_rng(11)
manifest = {"layers": []}


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def chunk_grid(size, chunk, offset):
    """[(pos, name, extent)] in x-fastest order; names are voxel bounding boxes."""
    grid = [-(-size[d] // chunk[d]) for d in range(3)]
    cells = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                pos = (x, y, z)
                lo = [pos[d] * chunk[d] for d in range(3)]
                hi = [min(lo[d] + chunk[d], size[d]) for d in range(3)]
                name = "_".join("%d-%d" % (offset[d] + lo[d], offset[d] + hi[d]) for d in range(3))
                cells.append((pos, name, tuple(hi[d] - lo[d] for d in range(3))))
    return grid, cells


def content(dtype, channels, extent, encoding):
    """An array [c, z, y, x] of the kind each encoding is used for."""
    ex, ey, ez = extent
    if encoding == "jpeg":
        return w.smooth((channels, ez, ey, ex), 0, 255).astype(np.uint8)
    if encoding == "compressed_segmentation":
        return w.labels((channels, ez, ey, ex), dtype, 12)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, (channels, ez, ey, ex), dtype=dtype, endpoint=True)


def encode(arr, dtype, encoding, block):
    """Returns (stored bytes, expected decoded bytes)."""
    channels, ez, ey, ex = arr.shape
    if encoding == "raw":
        b = w.raw(arr, dtype)
        return b, b
    if encoding == "compressed_segmentation":
        return w.cseg_encode(arr, block, dtype), w.raw(arr, dtype)
    img = arr.transpose(1, 2, 3, 0).reshape(ez * ey, ex, channels)  # x by y*z pixels, channels interleaved
    buf = io.BytesIO()
    if encoding == "jpeg":
        Image.fromarray(img[:, :, 0] if channels == 1 else img, "L" if channels == 1 else "RGB").save(buf, "JPEG", quality=85)
        dec = np.asarray(Image.open(io.BytesIO(buf.getvalue()))).reshape(ez, ey, ex, channels).transpose(3, 0, 1, 2)
        return buf.getvalue(), w.raw(dec, np.uint8)
    if dtype == np.uint8:
        Image.fromarray(img[:, :, 0] if channels == 1 else img, {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]).save(buf, "PNG")
        stored = buf.getvalue()
    elif channels == 1:
        Image.fromarray(img[:, :, 0], "I;16").save(buf, "PNG")
        stored = buf.getvalue()
    else:  # PIL cannot write 16-bit multi-channel PNGs; the writer from the PNG spec can
        path = os.path.join(out, "tmp.png")
        w.write_png(path, img, 16)
        stored = open(path, "rb").read()
        os.remove(path)
    return stored, w.raw(arr, dtype)


def corrupt(stored, encoding):
    """Bytes that must not decode."""
    if encoding == "jpeg":
        return stored[:len(stored) * 3 // 5]  # cut off in the middle of the scan
    if encoding == "png":
        i = stored.index(b"IDAT") + 8
        return stored[:i] + bytes([stored[i] ^ 0xFF]) + stored[i + 1:]  # the chunk's CRC no longer matches
    if encoding == "compressed_segmentation":
        return struct.pack("<I", 0x7FFFFFF0) + stored[4:]  # channel 0 starts far past the end
    raise ValueError(encoding)


def layer(name, dtype, channels, size, chunk, offset, encoding, block=None, sharding=None,
          missing=(), bad=(), gz=False, drop_shard=None, shard_damage=None, tolerance=0):
    """Writes one layer. missing and bad are chunk indices in grid order; gz stores
    unsharded chunks as CloudVolume's NAME.gz objects; drop_shard deletes that shard
    file; shard_damage damages shard entries (see damage)."""
    dtype = np.dtype(dtype).type
    src = os.path.join(out, "src", name)
    scale = {"key": "s0", "size": list(size), "voxel_offset": list(offset), "chunk_sizes": [list(chunk)],
             "resolution": [4, 4, 40], "encoding": encoding}
    if block:
        scale["compressed_segmentation_block_size"] = list(block)
    if sharding:
        scale["sharding"] = sharding
    if encoding == "jpeg":
        scale["jpeg_quality"] = 85
    info = {"@type": "neuroglancer_multiscale_volume", "type": "segmentation" if block else "image",
            "data_type": np.dtype(dtype).name, "num_channels": channels, "scales": [scale]}
    put(os.path.join(src, "info"), json.dumps(info).encode())
    grid, cells = chunk_grid(size, chunk, offset)
    entry = {"name": name, "scale": "s0", "encoding": encoding, "tolerance": tolerance, "sharding": sharding,
             "chunks": []}
    by_id = {}
    for i, (pos, cname, extent) in enumerate(cells):
        c = {"name": cname, "size": int(np.prod(extent)) * channels * np.dtype(dtype).itemsize}
        if sharding:
            c["id"] = w.morton(pos, grid)
            c["shard"] = w.shard_name(w.locate(c["id"], sharding)[0], sharding)
        entry["chunks"].append(c)
        if i in missing:
            c["state"] = "missing"
            continue
        stored, expect = encode(content(dtype, channels, extent, encoding), dtype, encoding, block)
        c["state"] = "ok"
        if i in bad:
            stored = corrupt(stored, encoding)
            c["state"] = "corrupt"
            c["object"] = cname + (".gz" if gz else "")
        put(os.path.join(out, "truth", name, cname), expect)
        if sharding:
            by_id[c["id"]] = stored
        else:
            put(os.path.join(src, "s0", cname + (".gz" if gz else "")), gzip.compress(stored) if gz else stored)
    if sharding:
        files, layout = w.shard_files(sharding, by_id)
        if shard_damage:
            damage(files, layout, entry, shard_damage)
        if drop_shard:
            del files[drop_shard]
            for c in entry["chunks"]:
                if c["shard"] == drop_shard:
                    c["state"] = "missing"
        for fname, data in files.items():
            put(os.path.join(src, "s0", fname), data)
        entry["shards"] = {fname: {"size": len(files[fname]),
                                   "minishards": {str(ms): {"index": v["index"],
                                                            "chunks": {str(k): r for k, r in v["chunks"].items()}}
                                                  for ms, v in layout[fname].items()}}
                           for fname in files}
    manifest["layers"].append(entry)


def damage(files, layout, entry, kinds):
    """Damages the entries of a one-shard scale; kinds[i] is what is done to
    minishard i: "range" points its index past the end of the file, "offset" moves its
    last chunk past the end, "overflow" gives its first chunk a size of 2^64-1 (both
    on a raw index), "gztrunc" cuts the last 5 bytes off its gzip index. Marks the
    chunks each covers corrupt: every chunk that hashes to the minishard, except for
    "offset", which covers that one chunk."""
    (fname, shard), = files.items()
    data = bytearray(shard)
    mb = entry["sharding"]["minishard_bits"]
    base = 16 << mb
    covered = []
    for ms, kind in enumerate(kinds):
        start, end = layout[fname][ms]["index"]
        n = (end - start) // 24
        if kind == "range":
            struct.pack_into("<QQ", data, 16 * ms, len(data) + 100, len(data) + 124)
            covered += [c for c in entry["chunks"] if w.locate(c["id"], entry["sharding"])[1] == ms]
        elif kind == "offset":
            at = start + 8 * (n + n - 1)
            struct.pack_into("<Q", data, at, struct.unpack_from("<Q", data, at)[0] + len(data))
            last = sorted(layout[fname][ms]["chunks"])[-1]
            covered += [c for c in entry["chunks"] if c.get("id") == last]
        elif kind == "gztrunc":
            struct.pack_into("<QQ", data, 16 * ms, start - base, end - base - 5)
            covered += [c for c in entry["chunks"] if w.locate(c["id"], entry["sharding"])[1] == ms]
        elif kind == "overflow":
            struct.pack_into("<Q", data, start + 8 * (2 * n), 2 ** 64 - 1)
            covered += [c for c in entry["chunks"] if w.locate(c["id"], entry["sharding"])[1] == ms]
        assert base <= start
    for c in covered:
        c["state"], c["object"] = "corrupt", fname
    files[fname] = bytes(data)


def spec(hash_name, pre, mb, sb, index="raw", data="raw"):
    return {"@type": "neuroglancer_uint64_sharded_v1", "hash": hash_name, "preshift_bits": pre,
            "minishard_bits": mb, "shard_bits": sb, "minishard_index_encoding": index, "data_encoding": data}


# Unsharded: every encoding, edge chunks clipped, missing and corrupt chunks.
layer("jpeg_gray", np.uint8, 1, (45, 37, 9), (16, 16, 4), (3, -2, 1), "jpeg", missing={4}, bad={7}, tolerance=2)
layer("jpeg_rgb", np.uint8, 3, (45, 37, 9), (16, 16, 4), (0, 0, 0), "jpeg", missing={2}, tolerance=3)
for dt in (np.uint8, np.uint16):
    for ch in (1, 2, 3, 4):
        layer("png_%s_%d" % (np.dtype(dt).name, ch), dt, ch, (20, 13, 5), (8, 8, 4), (0, 0, 0), "png",
              missing={3} if ch == 2 else (), bad={5} if ch == 1 else ())
layer("cseg_uint32_1", np.uint32, 1, (40, 30, 12), (16, 16, 8), (-8, 0, 0), "compressed_segmentation",
      block=(8, 8, 8), gz=True, bad={1}, missing={6})
layer("cseg_uint64_2", np.uint64, 2, (20, 17, 9), (8, 8, 4), (0, 0, 0), "compressed_segmentation", block=(3, 5, 2))
layer("cseg_uint32_3", np.uint32, 3, (20, 17, 9), (8, 8, 4), (0, 0, 0), "compressed_segmentation", block=(4, 4, 1))
layer("cseg_uint64_1", np.uint64, 1, (10, 9, 5), (5, 4, 3), (0, 0, 0), "compressed_segmentation", block=(1, 1, 1))

# Sharded: both hashes, gzip on and off, several bit widths, preshift, missing chunks
# and a missing shard, every encoding inside shards.
layer("sh_identity_raw", np.uint16, 1, (40, 30, 10), (8, 8, 4), (0, 0, 0), "raw",
      sharding=spec("identity", 0, 2, 2), missing={0, 7, 19, 33, 59})
layer("sh_murmur_gzip", np.uint8, 2, (30, 30, 9), (8, 8, 3), (0, 0, 0), "raw",
      sharding=spec("murmurhash3_x86_128", 1, 3, 5, "gzip", "gzip"), missing={5, 6})
layer("sh_cseg", np.uint64, 1, (24, 20, 8), (8, 8, 4), (0, 0, 0), "compressed_segmentation", block=(4, 4, 2),
      sharding=spec("identity", 2, 1, 3, "gzip", "raw"), drop_shard="1.shard", missing={3})
layer("sh_murmur_cseg", np.uint32, 2, (20, 20, 10), (8, 8, 5), (0, 0, 0), "compressed_segmentation", block=(3, 3, 3),
      sharding=spec("murmurhash3_x86_128", 0, 4, 0, "raw", "gzip"), missing={1})
layer("sh_jpeg", np.uint8, 1, (40, 40, 8), (16, 16, 4), (0, 0, 0), "jpeg",
      sharding=spec("murmurhash3_x86_128", 0, 2, 1, "gzip", "raw"), tolerance=2)
layer("sh_png", np.uint16, 3, (16, 16, 4), (8, 8, 2), (0, 0, 0), "png", sharding=spec("identity", 0, 0, 0))
layer("sh_wide", np.uint8, 1, (16, 16, 8), (4, 4, 4), (0, 0, 0), "raw", sharding=spec("identity", 0, 13, 0),
      missing={9})
layer("sh_bad", np.uint8, 1, (16, 16, 8), (4, 4, 4), (0, 0, 0), "raw", sharding=spec("identity", 0, 2, 0),
      shard_damage=["range", "offset", "overflow"])
layer("sh_bad_gzip", np.uint16, 1, (16, 16, 8), (4, 4, 4), (0, 0, 0), "raw",
      sharding=spec("murmurhash3_x86_128", 0, 1, 0, "gzip", "gzip"), shard_damage=["gztrunc"])
# One 2 MiB shard of 64 chunks of 32 KiB in 8 minishards, for counting what a read moves.
layer("sh_big", np.uint8, 1, (128, 128, 128), (32, 32, 32), (0, 0, 0), "raw", sharding=spec("identity", 0, 3, 0))

with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
