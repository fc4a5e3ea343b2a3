#!/usr/bin/python3
"""Write a small Neuroglancer precomputed image layer with numpy, independent of volfs.

Usage:
    mkprecomputed.py OUTDIR [--corrupt CHUNKNAME ...]

OUTDIR (must not exist, or be empty) receives:
    info                 uint16, 2 channels, scales "s0" and "s1", encoding "raw"
    s0/<chunk>.gz, s1/<chunk>.gz
                         gzip-compressed raw chunks (CloudVolume local convention)
    s0/<chunk>           two s0 chunks stored uncompressed ("plain")
    README.txt, mesh/1:0 passthrough files that are not chunks
Two s0 chunks are left out ("missing"; they should read as zeros).

Chunks are picked by their index in x-fastest grid order (x, then y, then z):
    s0 missing: indices 1 and 4 (2nd and 5th); s0 plain: indices 2 and 6 (3rd and 7th).

The truth goes to OUTDIR/../truth/:
    s0.npy, s1.npy   full (channel, z, y, x) uint16 arrays, including the missing chunks
    manifest.json    per scale: key, resolution, size, voxel_offset, chunk_size and
                     chunks: {name: "gz" | "plain" | "missing" | "corrupt"} in grid order

--corrupt NAME (repeatable) replaces the stored NAME.gz with bytes that are not valid
gzip and records the state "corrupt". NAME must be a chunk that would be stored as .gz.

Chunk names are "<x0>-<x1>_<y0>-<y1>_<z0>-<z1>" in absolute voxel coordinates (offset
included, so values may be negative), upper bounds clipped at offset + size. Chunk bytes
are the clipped block as little-endian uint16, x fastest, then y, then z, channel slowest.
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np

SEED = 20240611
NUM_CHANNELS = 2
SCALES = [
    dict(key="s0", resolution=[4, 4, 40], size=[70, 45, 9], voxel_offset=[-13, 5, -3],
         chunk_size=[32, 16, 4]),
    dict(key="s1", resolution=[8, 8, 40], size=[35, 23, 9], voxel_offset=[-7, 2, -3],
         chunk_size=[16, 16, 4]),
]
MISSING = {"s0": (1, 4)}   # grid indices (x-fastest) left out
PLAIN = {"s0": (2, 6)}     # grid indices stored without .gz
BAD_GZIP = b"\x1f\x8b\x08\x00" + b"this is not a deflate stream" + b"\xff" * 8


def grid(size, offset, chunk):
    """Yield (name, (x0,x1,y0,y1,z0,z1) absolute) for each chunk in x-fastest order."""
    ranges = []
    for ax in range(3):
        end = offset[ax] + size[ax]
        ranges.append([(s, min(s + chunk[ax], end))
                       for s in range(offset[ax], end, chunk[ax])])
    for z0, z1 in ranges[2]:
        for y0, y1 in ranges[1]:
            for x0, x1 in ranges[0]:
                yield f"{x0}-{x1}_{y0}-{y1}_{z0}-{z1}", (x0, x1, y0, y1, z0, z1)


def chunk_bytes(arr, offset, box):
    """Raw precomputed bytes of the clipped block box from arr[c, z, y, x]."""
    x0, x1, y0, y1, z0, z1 = box
    ox, oy, oz = offset
    block = arr[:, z0 - oz:z1 - oz, y0 - oy:y1 - oy, x0 - ox:x1 - ox]
    return block.astype("<u2").tobytes(order="C")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--corrupt", action="append", default=[], metavar="NAME",
                    help="store this chunk's .gz with invalid gzip bytes (repeatable)")
    args = ap.parse_args()

    gz_names = {name for s in SCALES
                for i, (name, _) in enumerate(grid(s["size"], s["voxel_offset"], s["chunk_size"]))
                if i not in MISSING.get(s["key"], ()) + PLAIN.get(s["key"], ())}
    bad = sorted(set(args.corrupt) - gz_names)
    if bad:
        sys.exit(f"mkprecomputed: --corrupt names not stored as .gz: {bad}")
    outdir = os.path.abspath(args.outdir)
    if os.path.exists(outdir) and os.listdir(outdir):
        sys.exit(f"mkprecomputed: {outdir} exists and is not empty")
    truthdir = os.path.join(os.path.dirname(outdir), "truth")
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(truthdir, exist_ok=True)

    info = {
        "@type": "neuroglancer_multiscale_volume",
        "type": "image",
        "data_type": "uint16",
        "num_channels": NUM_CHANNELS,
        "scales": [dict(key=s["key"], resolution=s["resolution"], size=s["size"],
                        voxel_offset=s["voxel_offset"], chunk_sizes=[s["chunk_size"]],
                        encoding="raw") for s in SCALES],
    }
    with open(os.path.join(outdir, "info"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")

    rng = np.random.default_rng(SEED)
    corrupt = set(args.corrupt)
    manifest = {"seed": SEED, "data_type": "uint16", "num_channels": NUM_CHANNELS,
                "passthrough": ["README.txt", "mesh/1:0"], "scales": []}
    for s in SCALES:
        key, size, offset = s["key"], s["size"], s["voxel_offset"]
        shape = (NUM_CHANNELS, size[2], size[1], size[0])
        arr = rng.integers(0, 65535, size=shape, dtype=np.uint16, endpoint=True)
        np.save(os.path.join(truthdir, key + ".npy"), arr)
        os.makedirs(os.path.join(outdir, key))
        states = {}
        for i, (name, box) in enumerate(grid(size, offset, s["chunk_size"])):
            path = os.path.join(outdir, key, name)
            if i in MISSING.get(key, ()):
                state = "missing"
            elif i in PLAIN.get(key, ()):
                state = "plain"
                with open(path, "wb") as f:
                    f.write(chunk_bytes(arr, offset, box))
            else:
                state = "gz"
                data = gzip.compress(chunk_bytes(arr, offset, box), mtime=0)
                if name in corrupt:
                    state, data = "corrupt", BAD_GZIP
                with open(path + ".gz", "wb") as f:
                    f.write(data)
            states[name] = state
        manifest["scales"].append(dict(key=key, resolution=s["resolution"], size=size,
                                       voxel_offset=offset, chunk_size=s["chunk_size"],
                                       chunks=states))
    with open(os.path.join(outdir, "README.txt"), "w") as f:
        f.write("volfs test layer written by mkprecomputed.py (numpy); not a chunk.\n")
    os.makedirs(os.path.join(outdir, "mesh"))
    with open(os.path.join(outdir, "mesh", "1:0"), "wb") as f:
        f.write(bytes(range(256)) + b"\x00\x01mesh\xff")
    with open(os.path.join(truthdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"wrote {outdir} and {truthdir}")


if __name__ == "__main__":
    main()
