#!/usr/bin/python3
"""Check a volfs mount of mkencodings.py's layers against its truth, with numpy.

Usage:
    checkencodings.py OUTDIR MOUNTDIR [--missing-error] [LAYER ...]

OUTDIR is mkencodings.py's output (manifest.json, src/, truth/); MOUNTDIR mounts
OUTDIR/src. Without LAYER arguments every layer is checked.

Checks, per layer:
  * MOUNTDIR/LAYER/info parses; its scale says encoding "raw", has no "sharding" and
    no compressed_segmentation_block_size, and keeps size, voxel_offset, chunk_sizes,
    data_type and num_channels of the original; info.orig is the original, byte for byte.
  * os.listdir of the scale directory is exactly the chunk keys of the grid.
  * per chunk: st_size is the decoded size; "ok" chunks read as the truth bytes (exactly,
    or for jpeg within the layer's tolerance of PIL's decode, with under 2% of the
    layer's samples more than 1 off), whole and by a pread in the middle; "missing"
    chunks read as zeros (with --missing-error, opening them fails with ENOENT);
    "corrupt" chunks fail to read with EIO.

Prints one line per failure, then "checked N chunks, M failed"; exit status 1 on any
failure.
"""
import errno
import json
import os
import sys

import numpy as np

outdir, mnt, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])
missing_error = "--missing-error" in only
only.discard("--missing-error")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check_info(name):
    orig = read(os.path.join(outdir, "src", name, "info"))
    try:
        got = json.loads(read(os.path.join(mnt, name, "info")))
    except (OSError, ValueError) as e:
        return fail(f"{name}/info: {e}")
    want = json.loads(orig)
    for k in ("data_type", "num_channels", "@type", "type"):
        if got.get(k) != want.get(k):
            fail(f"{name}/info: {k} {got.get(k)!r}, want {want.get(k)!r}")
    if len(got.get("scales", [])) != 1:
        return fail(f"{name}/info: scales {got.get('scales')}")
    g, o = got["scales"][0], want["scales"][0]
    if g.get("encoding") != "raw":
        fail(f"{name}/info: encoding {g.get('encoding')!r}, want 'raw'")
    for k in ("sharding", "compressed_segmentation_block_size", "jpeg_quality"):
        if k in g:
            fail(f"{name}/info: still has {k}")
    for k in ("key", "size", "voxel_offset", "chunk_sizes", "resolution"):
        if g.get(k) != o.get(k):
            fail(f"{name}/info: {k} {g.get(k)!r}, want {o.get(k)!r}")
    try:
        if read(os.path.join(mnt, name, "info.orig")) != orig:
            fail(f"{name}/info.orig differs from the original")
    except OSError as e:
        fail(f"{name}/info.orig: {e}")


def close_enough(got, want, tolerance, tally):
    """None when got matches want within tolerance, else why not. For jpeg it adds
    the samples more than 1 off, and all samples, to tally: an edge chunk of a few
    hundred samples is too small a sample for the 2% bound, so main applies it per
    layer."""
    if len(got) != len(want):
        return f"{len(got)} bytes, want {len(want)}"
    if tolerance == 0:
        if got == want:
            return None
        a, b = np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8)
        return f"{int((a != b).sum())} of {len(got)} bytes differ, first at {int(np.argmax(a != b))}"
    d = np.abs(np.frombuffer(got, np.uint8).astype(int) - np.frombuffer(want, np.uint8).astype(int))
    if d.max() > tolerance:
        return f"samples differ from PIL's decode by up to {d.max()}, want at most {tolerance}"
    tally[0] += int((d > 1).sum())
    tally[1] += len(d)
    return None


def check_chunk(layer, c, tally):
    path = os.path.join(mnt, layer["name"], layer["scale"], c["name"])
    where = f"{layer['name']}/{layer['scale']}/{c['name']}"
    try:
        size = os.stat(path).st_size
    except OSError as e:
        return fail(f"{where}: stat: {e}")
    if size != c["size"]:
        return fail(f"{where}: st_size {size}, want {c['size']}")
    if c["state"] == "corrupt":
        try:
            read(path)
        except OSError as e:
            if e.errno != errno.EIO:
                fail(f"{where}: corrupt chunk: {e}, want EIO")
            return
        return fail(f"{where}: corrupt chunk read without error, want EIO")
    if c["state"] == "missing" and missing_error:
        try:
            open(path, "rb").close()
        except OSError as e:
            if e.errno != errno.ENOENT:
                fail(f"{where}: missing chunk with --missing=error: {e}, want ENOENT")
            return
        return fail(f"{where}: missing chunk opened with --missing=error, want ENOENT")
    if c["state"] == "missing":
        want = bytes(c["size"])
    else:
        want = read(os.path.join(outdir, "truth", layer["name"], c["name"]))
    try:
        got = read(path)
    except OSError as e:
        return fail(f"{where}: {c['state']} chunk: {e}")
    why = close_enough(got, want, layer["tolerance"], tally)
    if why:
        return fail(f"{where} ({c['state']}): {why}")
    off = size // 3
    fd = os.open(path, os.O_RDONLY)
    try:
        part = os.pread(fd, size // 2, off)
    finally:
        os.close(fd)
    if part != got[off:off + size // 2]:
        fail(f"{where}: pread({size // 2}, {off}) differs from the whole read")


def main():
    manifest = json.load(open(os.path.join(outdir, "manifest.json")))
    n = 0
    for layer in manifest["layers"]:
        if only and layer["name"] not in only:
            continue
        check_info(layer["name"])
        names = sorted(c["name"] for c in layer["chunks"])
        try:
            # Beside its chunks, a scale directory holds the stitched views.
            views = {"volume.tif", "volume.raw", "volume.nhdr", "volume.mhd", "sections", "slabs"}
            listed = sorted(n for n in os.listdir(os.path.join(mnt, layer["name"], layer["scale"])) if n not in views)
        except OSError as e:
            fail(f"{layer['name']}: listdir: {e}")
            listed = names
        if listed != names:
            fail(f"{layer['name']}: lists {len(listed)} entries, want the {len(names)} chunk keys "
                 f"(extra {sorted(set(listed) - set(names))[:5]}, missing {sorted(set(names) - set(listed))[:5]})")
        tally = [0, 0]
        for c in layer["chunks"]:
            check_chunk(layer, c, tally)
            n += 1
        check_volume_raw(layer)
        if tally[0] * 50 > tally[1]:
            fail(f"{layer['name']}: {tally[0]} of {tally[1]} samples differ from PIL's by more than 1, want under 2%")
        elif tally[1]:
            print(f"{layer['name']}: {tally[0]} of {tally[1]} samples more than 1 off PIL's decode")
    print(f"checked {n} chunks, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def check_volume_raw(layer):
    """volume.raw, the stitched view of the scale, equals its chunks put together: the
    truth (zeros where missing), or for a lossy layer the mount's own decoded chunks.
    Layers with a corrupt chunk are left out: reads touching it fail."""
    if any(c["state"] == "corrupt" for c in layer["chunks"]):
        return
    info = json.loads(read(os.path.join(outdir, "src", layer["name"], "info")))
    sc, C = info["scales"][0], info["num_channels"]
    dt = np.dtype(info["data_type"]).newbyteorder("<")
    (X, Y, Z), off = sc["size"], sc["voxel_offset"]
    vol = np.zeros((C, Z, Y, X), dt)
    scale = os.path.join(mnt, layer["name"], layer["scale"])
    for c in layer["chunks"]:
        (x0, x1), (y0, y1), (z0, z1) = [[int(v) for v in r.split("-")] for r in c["name"].split("_")]
        if c["state"] == "missing":
            continue
        src = os.path.join(outdir, "truth", layer["name"], c["name"]) if layer["tolerance"] == 0 else os.path.join(scale, c["name"])
        block = np.frombuffer(read(src), dt).reshape(C, z1 - z0, y1 - y0, x1 - x0)
        vol[:, z0 - off[2]:z1 - off[2], y0 - off[1]:y1 - off[1], x0 - off[0]:x1 - off[0]] = block
    try:
        got = read(os.path.join(scale, "volume.raw"))
    except OSError as e:
        return fail(f"{layer['name']}: volume.raw: {e}")
    if got != vol.tobytes():
        fail(f"{layer['name']}: volume.raw ({len(got)} bytes) differs from the chunks put together ({vol.nbytes} bytes)")
    else:
        print(f"{layer['name']}: volume.raw equals its {len(layer['chunks'])} chunks put together")


main()
