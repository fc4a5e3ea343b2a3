"""Writes OME-Zarr images (NGFF 0.4 with zarr-python 2, NGFF 0.5 as Zarr v3
by hand from the specs) and checks a volfs mount of them: the image is
still OME-Zarr (its attributes pass through and name arrays that read as
the source), and each level's views carry the voxel size of the level's
scale and the axes' roles, as read by tifffile and from the NRRD headers.

Usage:
  omecheck.py write SRC
  omecheck.py verify SRC MOUNT
Exits non-zero listing every mismatch.
"""
import gzip
import json
import os
import sys

import numpy as np
import tifffile
import zarr

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


# NGFF 0.4: (t, c, z, y, x), micrometres, two levels.
V04_SCALES = [[1, 1, 0.5, 0.25, 0.25], [1, 1, 1.0, 0.5, 0.5]]
# NGFF 0.5: (c, z, y, x), nanometres, one level, a global scale of 2 on z.
V05_SCALE = [1, 40, 8, 8]


def data(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 60000, shape, dtype="u2")


def write(src):
    root = zarr.open_group(os.path.join(src, "v04.ome.zarr"), mode="w")
    full = data((2, 3, 4, 32, 48), 1)
    for lvl, a in enumerate([full, full[:, :, ::2, ::2, ::2]]):
        root.create_dataset(str(lvl), data=a, chunks=(1, 1, 2, 16, 16), compressor=zarr.Blosc("zstd", 3))
    root.attrs["multiscales"] = [{
        "version": "0.4", "name": "cells",
        "axes": [{"name": "t", "type": "time", "unit": "second"}, {"name": "c", "type": "channel"},
                 {"name": "z", "type": "space", "unit": "micrometer"},
                 {"name": "y", "type": "space", "unit": "micrometer"},
                 {"name": "x", "type": "space", "unit": "micrometer"}],
        "datasets": [{"path": str(i), "coordinateTransformations": [{"type": "scale", "scale": s}]}
                     for i, s in enumerate(V04_SCALES)],
    }]
    root.attrs["omero"] = {"channels": [{"label": n, "color": c, "window": {"start": 0, "end": 60000, "min": 0, "max": 65535}}
                                        for n, c in [("DAPI", "0000FF"), ("GFP", "00FF00"), ("RFP", "FF0000")]]}

    g = os.path.join(src, "v05.ome.zarr")
    os.makedirs(os.path.join(g, "s0"))
    json.dump({"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [{
        "name": "v05",
        "axes": [{"name": "c", "type": "channel"}] + [{"name": n, "type": "space", "unit": "nanometer"} for n in "zyx"],
        "datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 20, 8, 8]}]}],
        "coordinateTransformations": [{"type": "scale", "scale": [1, 2, 1, 1]}]}]}}},
        open(os.path.join(g, "zarr.json"), "w"))
    a = data((2, 3, 20, 24), 2)
    chunks = (1, 3, 10, 12)
    json.dump({"zarr_format": 3, "node_type": "array", "shape": list(a.shape), "data_type": "uint16",
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
               "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "attributes": {},
               "dimension_names": ["c", "z", "y", "x"],
               "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}]},
              open(os.path.join(g, "s0", "zarr.json"), "w"))
    for idx in np.ndindex(*[s // c for s, c in zip(a.shape, chunks)]):
        sel = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
        p = os.path.join(g, "s0", "c", *map(str, idx))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "wb").write(gzip.compress(a[sel].astype("<u2").tobytes()))
    np.save(os.path.join(src, "v05.npy"), a)


def nrrd_spacing(path):
    for line in open(path):
        if line.startswith("space directions:"):
            dirs = line.split(":", 1)[1].split()
            return [max(float(v) for v in d.strip("()").split(",")) for d in dirs if d != "none"]
    return None


def verify(src, mnt):
    # NGFF 0.4: the attributes pass through and name arrays that read as
    # the source with zarr-python, which finds no codec on them.
    img = os.path.join(mnt, "v04.ome.zarr")
    check(".zattrs", open(os.path.join(img, ".zattrs"), "rb").read(),
          open(os.path.join(src, "v04.ome.zarr", ".zattrs"), "rb").read())
    g = zarr.open_group(img, mode="r")
    ms = g.attrs["multiscales"][0]
    check("omero channels", len(g.attrs["omero"]["channels"]), 3)
    sg = zarr.open_group(os.path.join(src, "v04.ome.zarr"), mode="r")
    for lvl, ds in enumerate(ms["datasets"]):
        a = g[ds["path"]]
        check(f"v04/{ds['path']} compressor", a.compressor, None)
        if not np.array_equal(a[...], sg[ds["path"]][...]):
            failures.append(f"v04/{ds['path']}: reads other values than the source")
        want = sg[ds["path"]][...]  # (t, c, z, y, x)
        scale = V04_SCALES[lvl]
        vol = os.path.join(img, ds["path"], "volume.tif")
        with tifffile.TiffFile(vol) as tf:
            ij = tf.imagej_metadata
            check(f"v04/{lvl} volume.tif channels", ij.get("channels"), 3)
            check(f"v04/{lvl} volume.tif slices", ij.get("slices"), want.shape[2])
            check(f"v04/{lvl} volume.tif frames", ij.get("frames"), 2)
            check(f"v04/{lvl} volume.tif unit", ij.get("unit"), "um")
            check(f"v04/{lvl} volume.tif spacing", ij.get("spacing"), scale[2])
            num, den = tf.pages[0].tags["XResolution"].value
            check(f"v04/{lvl} volume.tif pixels per cm", round(num / den, 3), round(1e4 / scale[4], 3))
            got = tf.asarray()
        # ImageJ's order: t, z, c, y, x.
        if got.shape != (2, want.shape[2], 3) + want.shape[3:] or not np.array_equal(got, want.transpose(0, 2, 1, 3, 4)):
            failures.append(f"v04/{lvl} volume.tif: shape {got.shape}, or values other than the source's in ImageJ's order")
        secs = sorted(os.listdir(os.path.join(img, ds["path"], "sections")))
        check(f"v04/{lvl} first sections", secs[:3], ["t0_c0_z0.tif", "t0_c0_z1.tif"] + (["t0_c0_z2.tif"] if want.shape[2] > 2 else ["t0_c1_z0.tif"]))
        z = want.shape[2] - 1
        sec = tifffile.imread(os.path.join(img, ds["path"], "sections", f"t1_c2_z{z}.tif"))
        if not np.array_equal(sec, want[1, 2, z]):
            failures.append(f"v04/{lvl} sections/t1_c2_z{z}.tif: values other than the source's")
        sp = nrrd_spacing(os.path.join(img, ds["path"], "volume.nhdr"))
        check(f"v04/{lvl} volume.nhdr spacing (nm)", sp, [s * 1000 for s in scale[:1:-1]])

    # NGFF 0.5 (Zarr v3): the group's zarr.json passes through; the level's
    # views have the voxel size of both scales, in nm.
    img = os.path.join(mnt, "v05.ome.zarr")
    check("v05 zarr.json", open(os.path.join(img, "zarr.json"), "rb").read(),
          open(os.path.join(src, "v05.ome.zarr", "zarr.json"), "rb").read())
    want = np.load(os.path.join(src, "v05.npy"))
    with tifffile.TiffFile(os.path.join(img, "s0", "volume.tif")) as tf:
        ij = tf.imagej_metadata
        check("v05 volume.tif channels", ij.get("channels"), 2)
        check("v05 volume.tif slices", ij.get("slices"), 3)
        check("v05 volume.tif spacing", ij.get("spacing"), V05_SCALE[1] / 1000)
        got = tf.asarray()
    if not np.array_equal(got, want.transpose(1, 0, 2, 3)):
        failures.append(f"v05 volume.tif: shape {got.shape}, or values other than the source's in ImageJ's order")
    check("v05 volume.nhdr spacing (nm)", nrrd_spacing(os.path.join(img, "s0", "volume.nhdr")), [8.0, 8.0, 40.0])
    check("v05 first sections", sorted(os.listdir(os.path.join(img, "s0", "sections")))[:2], ["c0_z0.tif", "c0_z1.tif"])


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        verify(sys.argv[2], sys.argv[3])
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")
