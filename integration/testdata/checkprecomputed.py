#!/usr/bin/python3
"""Check a volfs-mounted precomputed layer against numpy truth from mkprecomputed.py.

Usage:
    checkprecomputed.py TRUTHDIR MOUNTDIR [--orig OUTDIR] [--missing-error]

TRUTHDIR holds manifest.json, s0.npy, s1.npy; MOUNTDIR is the mounted layer directory
(volfs view of OUTDIR). Expected bytes are built here with numpy, never with volfs code.

Checks:
  * MOUNTDIR/info is JSON matching the manifest; every scale has encoding "raw" and no
    "sharding". MOUNTDIR/info.orig exists (byte-identical to OUTDIR/info with --orig).
  * os.listdir(MOUNTDIR/<key>) is exactly the set of grid chunk names (missing included,
    no ".gz"); the grid is recomputed from size/offset/chunk and must match the manifest.
  * per chunk: st_size == clipped voxels * channels * 2; the full read and a pread in
    the middle return the truth bytes ("missing": zeros); "corrupt": stat, open or read
    fails with EIO. With --missing-error, opening a missing chunk must raise ENOENT.
  * with --orig: README.txt and mesh/1:0 read byte-identical to OUTDIR's.

Prints one line per failure (a chunk is reported once, at its first failure), then
"checked N chunks, M failed" (M counts all failure lines); exit status 1 on any failure.
"""
import argparse
import errno
import json
import os
import sys

import numpy as np

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def grid_names(size, offset, chunk):
    """[(name, (x0,x1,y0,y1,z0,z1))] in x-fastest order, upper bounds clipped."""
    rng = [[(s, min(s + chunk[a], offset[a] + size[a]))
            for s in range(offset[a], offset[a] + size[a], chunk[a])] for a in range(3)]
    return [(f"{x0}-{x1}_{y0}-{y1}_{z0}-{z1}", (x0, x1, y0, y1, z0, z1))
            for z0, z1 in rng[2] for y0, y1 in rng[1] for x0, x1 in rng[0]]


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def check_info(mountdir, manifest, origdir):
    try:
        info = json.loads(read_file(os.path.join(mountdir, "info")))
    except (OSError, ValueError) as e:
        return fail(f"info: cannot read/parse: {e}")
    if info.get("data_type") != manifest["data_type"] or \
            info.get("num_channels") != manifest["num_channels"]:
        fail(f"info: data_type/num_channels {info.get('data_type')}/{info.get('num_channels')}")
    got = [(s.get("key"), s.get("size"), s.get("voxel_offset"), s.get("chunk_sizes"),
            s.get("resolution")) for s in info.get("scales", [])]
    want = [(s["key"], s["size"], s["voxel_offset"], [s["chunk_size"]], s["resolution"])
            for s in manifest["scales"]]
    if got != want:
        fail(f"info: scales {got} != {want}")
    for s in info.get("scales", []):
        if s.get("encoding") != "raw" or "sharding" in s:
            fail(f"info: scale {s.get('key')}: encoding={s.get('encoding')!r}, "
                 f"sharding={'sharding' in s}")
    try:
        orig = read_file(os.path.join(mountdir, "info.orig"))
    except OSError as e:
        return fail(f"info.orig: {e}")
    if origdir and orig != read_file(os.path.join(origdir, "info")):
        fail("info.orig: differs from OUTDIR/info")


def check_chunk(path, state, expected, missing_error):
    """Return an error string, or None if the chunk behaves as expected."""
    if state == "missing" and missing_error:
        try:
            open(path, "rb").close()
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"open: want ENOENT, got {e}"
        return "open: want ENOENT, but it opened"
    try:
        st = os.stat(path)
        if st.st_size != len(expected):
            return f"st_size {st.st_size} != {len(expected)}"
        with open(path, "rb", buffering=0) as f:
            data = f.readall()
            mid = len(expected) // 2 - 3
            part = os.pread(f.fileno(), 7, mid)
    except OSError as e:
        if state == "corrupt" and e.errno == errno.EIO:
            return None
        return f"{type(e).__name__}: {e}"
    if state == "corrupt":
        return "want EIO, but stat/open/read succeeded"
    if len(data) != len(expected):
        return f"read {len(data)} bytes, want {len(expected)}"
    if data != expected:
        i = next(i for i in range(len(data)) if data[i] != expected[i])
        return f"content differs, first at byte {i} ({data[i]} != {expected[i]})"
    if part != expected[mid:mid + 7]:
        return f"pread(7, {mid}) = {part.hex()}, want {expected[mid:mid + 7].hex()}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("truthdir")
    ap.add_argument("mountdir")
    ap.add_argument("--orig", metavar="OUTDIR", help="original layer dir written by mkprecomputed.py")
    ap.add_argument("--missing-error", action="store_true",
                    help="missing chunks must fail with ENOENT instead of reading zeros")
    args = ap.parse_args()
    with open(os.path.join(args.truthdir, "manifest.json")) as f:
        manifest = json.load(f)

    check_info(args.mountdir, manifest, args.orig)
    nchan = manifest["num_channels"]
    checked = 0
    for s in manifest["scales"]:
        key, offset = s["key"], s["voxel_offset"]
        truth = np.load(os.path.join(args.truthdir, key + ".npy"))
        grid = grid_names(s["size"], offset, s["chunk_size"])
        if [n for n, _ in grid] != list(s["chunks"]):
            fail(f"{key}: manifest chunk names do not match the recomputed grid")
        try:
            listed = set(os.listdir(os.path.join(args.mountdir, key)))
        except OSError as e:
            listed = set()
            fail(f"{key}/: listdir: {e}")
        names = {n for n, _ in grid}
        # Beside its chunks, a scale directory holds the stitched views.
        views = {"volume.tif", "volume.raw", "volume.nhdr", "volume.mhd", "sections", "slabs"}
        if not views <= listed:
            fail(f"{key}/: views absent: {sorted(views - listed)}")
        listed -= views
        if listed != names:
            fail(f"{key}/: listing extra {sorted(listed - names)[:5]} "
                 f"absent {sorted(names - listed)[:5]}")
        for name, (x0, x1, y0, y1, z0, z1) in grid:
            state = s["chunks"].get(name, "gz")
            block = truth[:, z0 - offset[2]:z1 - offset[2], y0 - offset[1]:y1 - offset[1],
                          x0 - offset[0]:x1 - offset[0]]
            assert block.shape == (nchan, z1 - z0, y1 - y0, x1 - x0)
            if state == "missing":
                block = np.zeros_like(block)
            expected = block.astype("<u2").tobytes(order="C")
            err = check_chunk(os.path.join(args.mountdir, key, name), state, expected,
                              args.missing_error)
            checked += 1
            if err:
                fail(f"{key}/{name} [{state}]: {err}")

    if args.orig:
        for rel in manifest.get("passthrough", []):
            try:
                if read_file(os.path.join(args.mountdir, rel)) != \
                        read_file(os.path.join(args.orig, rel)):
                    fail(f"{rel}: content differs from OUTDIR")
            except OSError as e:
                fail(f"{rel}: {e}")
    print(f"checked {checked} chunks, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
