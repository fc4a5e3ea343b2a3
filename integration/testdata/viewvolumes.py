#!/usr/bin/python3
"""Volumes for the stitched-view tests, written with numpy and zarr-python (not volfs).

Usage:
    viewvolumes.py write SRC              write the volumes and SRC/views.json
    viewvolumes.py check SRC MNT OUT      check the views of MNT with
                                          ../../fs/view/testdata/check_views.py
                                          (tifffile, PIL, libtiff, GDAL, teem,
                                          plastimatch, numpy.memmap, ImageJ), then
                                          random-offset dd reads and the corrupt array
    viewvolumes.py big SRC X Y Z CHUNK N  a precomputed uint8 layer of X x Y x Z in
                                          CHUNK x CHUNK x Z chunks, of which only the
                                          first N of chunk row 0 exist (gzip); the rest
                                          is missing, i.e. zeros

The manifest lists, per volume, the array directory below the mount, the
reference (every sample little-endian, C order of [channels] + shape reversed:
the views' raw layout), the shape fastest first, channels, dtype, chunk and
resolution, as check_views.py takes them. Missing chunks are part of every
volume: the reference holds their fill value (zeros for precomputed and N5,
the zarr fill_value for zarr, read back through zarr itself).

"bad" is a zarr uint8 array (8, 1024, 1024) in one chunk per plane with the
chunk of plane 6 corrupt: reading its sections 0-5 and 7 must work and
section 6 must fail with EIO, as must volume.raw at 6 MiB but not elsewhere.
"""
import errno
import gzip
import json
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK_VIEWS = os.path.join(HERE, "..", "..", "fs", "view", "testdata", "check_views.py")


def precomputed(src, name, dtype, channels, size, chunk, resolution, missing, rng, gz):
    """Writes a one-scale precomputed layer; returns (C, Z, Y, X) truth."""
    d = os.path.join(src, name)
    os.makedirs(os.path.join(d, "s0"))
    info = {"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": dtype,
            "num_channels": channels, "scales": [{"key": "s0", "size": size, "voxel_offset": [0, 0, 0],
                                                  "resolution": resolution, "chunk_sizes": [chunk], "encoding": "raw"}]}
    json.dump(info, open(os.path.join(d, "info"), "w"))
    X, Y, Z = size
    info_t = np.iinfo(dtype)
    truth = rng.integers(info_t.min, info_t.max, (channels, Z, Y, X), dtype=dtype, endpoint=True)
    k = 0
    for z0 in range(0, Z, chunk[2]):
        for y0 in range(0, Y, chunk[1]):
            for x0 in range(0, X, chunk[0]):
                z1, y1, x1 = min(z0 + chunk[2], Z), min(y0 + chunk[1], Y), min(x0 + chunk[0], X)
                if k in missing:
                    truth[:, z0:z1, y0:y1, x0:x1] = 0
                else:
                    data = truth[:, z0:z1, y0:y1, x0:x1].astype(np.dtype(dtype).newbyteorder("<")).tobytes()
                    key = os.path.join(d, "s0", f"{x0}-{x1}_{y0}-{y1}_{z0}-{z1}")
                    if gz:
                        open(key + ".gz", "wb").write(gzip.compress(data, 1))
                    else:
                        open(key, "wb").write(data)
                k += 1
    return truth


def write_ref(src, name, arr, dtype):
    ref = os.path.join(src, name + ".ref")
    np.ascontiguousarray(arr).astype(np.dtype(dtype).newbyteorder("<")).tofile(ref)
    return ref


def write(src):
    import zarr
    from numcodecs import Blosc, GZip, Zlib
    rng = np.random.default_rng(10)
    cases = []

    def case(name, dirname, ref, shape, channels, dtype, chunk, resolution):
        cases.append(dict(name=name, dir=dirname, ref=ref, shape=shape, channels=channels, dtype=dtype,
                          chunk=chunk, resolution=resolution, bigtiff=False))

    # Precomputed: 8-bit, one channel, gzip chunks; 16-bit, two channels, raw.
    t = precomputed(src, "pc8", "uint8", 1, [100, 70, 20], [32, 32, 8], [4, 4, 40], {1, 5, 30}, rng, True)
    case("pc8", "pc8/s0", write_ref(src, "pc8", t, "uint8"), [100, 70, 20], 1, "uint8", [32, 32, 8], [4, 4, 40])
    t = precomputed(src, "pc16", "uint16", 2, [50, 40, 10], [16, 16, 4], [8, 8, 40], {0, 7}, rng, False)
    case("pc16", "pc16/s0", write_ref(src, "pc16", t, "uint16"), [50, 40, 10], 2, "uint16", [16, 16, 4], [8, 8, 40])

    # Zarr v2 written by zarr-python. Writing a box leaves chunks missing.
    def zarr_case(name, shape, chunks, dtype, fill, order, box, **kw):
        z = zarr.open(os.path.join(src, name), mode="w", shape=shape, chunks=chunks, dtype=dtype,
                      fill_value=fill, order=order, **kw)
        if np.dtype(dtype).kind == "f":
            data = rng.standard_normal(shape).astype(dtype) * 1000
        else:
            it = np.iinfo(dtype)
            data = rng.integers(it.min, it.max, shape, dtype=np.dtype(dtype).newbyteorder("="), endpoint=True)
        z[box] = data[box]
        back = zarr.open(os.path.join(src, name), mode="r")[...]  # fill where nothing was written
        base = np.dtype(dtype).name
        case(name, name, write_ref(src, name, back, base), list(shape[::-1]), 1, base, list(chunks[::-1]), None)

    zarr_case("zc", (12, 70, 90), (5, 32, 40), "<i2", -3, "C", np.s_[:10, :, :60],
              compressor=Blosc(cname="lz4", shuffle=1))
    zarr_case("zf", (6, 30, 50), (4, 16, 16), "<f4", 0.5, "F", np.s_[:, :20, :], compressor=Zlib(level=1))
    zarr_case("z4", (2, 7, 30, 40), (1, 3, 16, 16), ">u2", 9, "C", np.s_[:, :5], dimension_separator="/",
              compressor=GZip(level=1))

    # N5 through zarr's N5Store: dimensions are stored fastest first.
    store = zarr.N5Store(os.path.join(src, "vol.n5"))
    z = zarr.open_group(store, mode="w").create_dataset("data", shape=(9, 33, 47), chunks=(4, 16, 16),
                                                        dtype="<u2", compressor=GZip(level=1))
    data = rng.integers(0, 65535, (9, 33, 47), dtype="u2")
    z[:, :, :40] = data[:, :, :40]  # the last chunk column stays missing
    back = zarr.open_group(zarr.N5Store(os.path.join(src, "vol.n5")), mode="r")["data"][...]
    case("n5", "vol.n5/data", write_ref(src, "n5", back, "uint16"), [47, 33, 9], 1, "uint16", [16, 16, 4], None)

    # A zarr array with one corrupt chunk.
    bad = zarr.open(os.path.join(src, "bad"), mode="w", shape=(8, 1024, 1024), chunks=(1, 1024, 1024),
                    dtype="u1", compressor=Zlib(level=1))
    planes = rng.integers(0, 255, (8, 1024, 1024), dtype="u1")
    bad[:] = planes
    open(os.path.join(src, "bad", "6.0.0"), "wb").write(b"\x78\x9c not a zlib stream")
    write_ref(src, "bad", planes, "uint8")

    json.dump(cases, open(os.path.join(src, "views.json"), "w"))


def dd(path, off, n):
    p = subprocess.run(["dd", "if=" + path, "iflag=skip_bytes,count_bytes", f"skip={off}", f"count={n}",
                        "bs=65536", "status=none"], capture_output=True)
    if p.returncode != 0:
        raise OSError(p.stderr.decode().strip())
    return p.stdout


def check(src, mnt, out):
    cases = json.load(open(os.path.join(src, "views.json")))
    for c in cases:
        c["dir"] = os.path.join(mnt, c["dir"])
    manifest = os.path.join(out, "manifest.json")
    json.dump(cases, open(manifest, "w"))
    rc = subprocess.run([sys.executable, CHECK_VIEWS, manifest]).returncode
    failures = []

    # Random-offset reads with dd against numpy's bytes (volume.raw) and
    # against one whole read of the file (volume.tif, whose pixels and
    # headers tifffile has checked).
    rnd = random.Random(7)
    reads = 0
    for c in cases:
        raw = np.fromfile(c["ref"], np.uint8).tobytes()
        tif = open(os.path.join(c["dir"], "volume.tif"), "rb").read()
        for name, want in (("volume.raw", raw), ("volume.tif", tif)):
            path = os.path.join(c["dir"], name)
            if os.path.getsize(path) != len(want):
                failures.append(f"{path}: size {os.path.getsize(path)}, want {len(want)}")
                continue
            for _ in range(25):
                off = rnd.randrange(len(want))
                n = rnd.choice([1, 3, rnd.randrange(1, 5000), rnd.randrange(1, 300000)])
                got = dd(path, off, n)
                reads += 1
                if got != want[off:off + n]:
                    failures.append(f"dd {path} skip={off} count={n}: {len(got)} bytes differ from numpy's")

    # The corrupt chunk fails exactly the reads that touch it.
    bad = np.fromfile(os.path.join(src, "bad.ref"), np.uint8).reshape(8, 1024, 1024)
    import tifffile
    for z in range(8):
        path = os.path.join(mnt, "bad", "sections", f"z{z}.tif")
        try:
            got = tifffile.imread(path)
            if z == 6:
                failures.append(f"{path}: read, want EIO")
            elif not np.array_equal(got, bad[z]):
                failures.append(f"{path}: differs from numpy's")
        except OSError as e:
            if z != 6 or e.errno != errno.EIO:
                failures.append(f"{path}: {e}, want {'EIO' if z == 6 else 'the plane'}")
    raw = os.path.join(mnt, "bad", "volume.raw")
    fd = os.open(raw, os.O_RDONLY)
    try:
        for z in (0, 1, 2, 3, 4, 5, 7, 6):
            try:
                got = os.pread(fd, 1 << 20, z << 20)
                if z == 6:
                    failures.append(f"{raw} plane 6: read, want EIO")
                elif got != bad[z].tobytes():
                    failures.append(f"{raw} plane {z}: differs from numpy's")
            except OSError as e:
                if z != 6 or e.errno != errno.EIO:
                    failures.append(f"{raw} plane {z}: {e}")
    finally:
        os.close(fd)

    for f in failures:
        print("FAIL", f)
    print(f"dd: {reads} random reads; corrupt array checked")
    sys.exit(1 if rc or failures else 0)


def big(src, X, Y, Z, chunk, n):
    d = os.path.join(src, "big")
    os.makedirs(os.path.join(d, "s0"))
    info = {"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
            "scales": [{"key": "s0", "size": [X, Y, Z], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1],
                        "chunk_sizes": [[chunk, chunk, Z]], "encoding": "raw"}]}
    json.dump(info, open(os.path.join(d, "info"), "w"))
    block = (np.arange(chunk * chunk * Z, dtype=np.uint32) % 251 + 1).astype(np.uint8).tobytes()
    data = gzip.compress(block, 1)
    for i in range(n):
        x0 = i * chunk
        open(os.path.join(d, "s0", f"{x0}-{x0 + chunk}_0-{chunk}_0-{Z}.gz"), "wb").write(data)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "check":
        check(*sys.argv[2:5])
    elif sys.argv[1] == "big":
        big(sys.argv[2], *map(int, sys.argv[3:8]))
    else:
        sys.exit(__doc__)
