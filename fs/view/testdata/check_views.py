"""Checks view files written by view_test.go with programs written by others.

Usage: check_views.py MANIFEST_JSON

For each case the manifest names the directory the views were written to,
the reference written by gen_reference.py and the array's description. It
checks sections and volume.tif with tifffile (and PIL for 8/16-bit, libtiff's
tiffinfo/tiffdump, gdalinfo), volume.raw and the slabs through their NRRD and
MetaImage headers with numpy.memmap, teem's unu and plastimatch. Prints one
line per failure and exits 1 when there is any.
"""
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import tifffile
from PIL import Image

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(args, capture_output=True, text=True, env=e)
    return p.returncode, p.stdout, p.stderr


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


GDAL_TYPES = {"uint8": "Byte", "uint16": "UInt16", "int16": "Int16", "uint32": "UInt32",
              "int32": "Int32", "float32": "Float32", "float64": "Float64"}


def check_tiff_tools(path):
    rc, out, err = run(["tiffinfo", path])
    if rc != 0 or "Error" in err:
        fail(f"tiffinfo {path}: rc={rc} {err.strip()}")
    rc, out, err = run(["tiffdump", path])
    if rc != 0 or "Error" in err:
        fail(f"tiffdump {path}: rc={rc} {err.strip()}")


def check_gdal(path, dtype, x, y, first):
    rc, out, err = run(["gdalinfo", "-json", "-stats", path], {"GDAL_PAM_ENABLED": "NO"})
    if rc != 0:
        fail(f"gdalinfo {path}: rc={rc} {err.strip()}")
        return
    info = json.loads(out)
    if info["size"] != [x, y]:
        fail(f"gdalinfo {path}: size {info['size']}, want {[x, y]}")
    band = info["bands"][0]
    want = GDAL_TYPES.get(dtype)
    if want and band["type"] != want:
        fail(f"gdalinfo {path}: type {band['type']}, want {want}")
    lo, hi = float(first.min()), float(first.max())
    if not (close(band["minimum"], lo) and close(band["maximum"], hi)):
        fail(f"gdalinfo {path}: min/max {band['minimum']}/{band['maximum']}, want {lo}/{hi}")


def parse_nhdr(path):
    f = {}
    for line in open(path):
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            f[k.strip()] = v.strip()
    return f


def parse_mhd(path):
    f = {}
    for line in open(path):
        k, v = line.split("=", 1)
        f[k.strip()] = v.strip()
    return f


NRRD_TYPES = {"uint8": "uint8", "int8": "int8", "uint16": "uint16", "int16": "int16",
              "uint32": "uint32", "int32": "int32", "float": "float32", "double": "float64",
              "uint64": "uint64", "int64": "int64"}
MET_TYPES = {"MET_UCHAR": "uint8", "MET_CHAR": "int8", "MET_USHORT": "uint16",
             "MET_SHORT": "int16", "MET_UINT": "uint32", "MET_INT": "int32",
             "MET_FLOAT": "float32", "MET_DOUBLE": "float64", "MET_ULONG_LONG": "uint64",
             "MET_LONG_LONG": "int64"}


def memmap_nhdr(path):
    h = parse_nhdr(path)
    sizes = [int(s) for s in h["sizes"].split()]
    dt = np.dtype(NRRD_TYPES[h["type"]])
    if dt.itemsize > 1:
        if h["endian"] != "little":
            fail(f"{path}: endian {h['endian']}")
        dt = dt.newbyteorder("<")
    if h["encoding"] != "raw":
        fail(f"{path}: encoding {h['encoding']}")
    data = os.path.join(os.path.dirname(path), h["data file"])
    return np.memmap(data, dtype=dt, mode="r", shape=tuple(sizes[::-1])), h


def memmap_mhd(path):
    h = parse_mhd(path)
    sizes = [int(s) for s in h["DimSize"].split()]
    if int(h["NDims"]) != len(sizes) or h["BinaryDataByteOrderMSB"] != "False":
        fail(f"{path}: NDims {h['NDims']} for {sizes}, MSB {h['BinaryDataByteOrderMSB']}")
    dt = np.dtype(MET_TYPES[h["ElementType"]]).newbyteorder("<")
    data = os.path.join(os.path.dirname(path), h["ElementDataFile"])
    return np.memmap(data, dtype=dt, mode="r", shape=tuple(sizes[::-1])), h


def check_case(c):
    d, shape, C, dtype = c["dir"], c["shape"], c["channels"], c["dtype"]
    X, Y = shape[0], shape[1]
    ref = np.fromfile(c["ref"], dtype=np.dtype(dtype).newbyteorder("<"))
    ref = ref.reshape([C] + shape[::-1])
    planes = ref.reshape(C, -1, Y, X)  # plane index: z fastest
    name = c["name"]
    lo, hi = float(ref.min()), float(ref.max())

    # sections
    secs = sorted(glob.glob(os.path.join(d, "sections", "*.tif")))
    if len(secs) != planes.shape[1]:
        fail(f"{name}: {len(secs)} sections, want {planes.shape[1]}")
    for i, path in enumerate(secs):
        want = planes[:, i] if C > 1 else planes[0, i]
        got = tifffile.imread(path)
        if got.dtype != want.dtype.newbyteorder("=") or not np.array_equal(got, want):
            fail(f"{name}: tifffile {path}: {got.dtype} {got.shape}, want {want.dtype} {want.shape}; equal values: {got.shape == want.shape and np.array_equal(got, want)}")
        with tifffile.TiffFile(path) as tf:
            if tf.is_bigtiff != c["bigtiff"]:
                fail(f"{name}: {path}: bigtiff {tf.is_bigtiff}")
        if dtype in ("uint8", "uint16") and C == 1:
            got = np.array(Image.open(path))
            if not np.array_equal(got, want):
                fail(f"{name}: PIL {path}: {got.dtype} {got.shape} differs")
        check_tiff_tools(path)
        if i in (0, len(secs) - 1):
            check_gdal(path, dtype, X, Y, planes[0, i])

    # volume.tif: ImageJ hyperstack order (frames, slices, channels, y, x)
    path = os.path.join(d, "volume.tif")
    Z = shape[2] if len(shape) > 2 else 1
    want = ref.reshape(C, -1, Z, Y, X).transpose(1, 2, 0, 3, 4)
    got = tifffile.imread(path)
    if got.dtype != want.dtype.newbyteorder("=") or not np.array_equal(got, np.squeeze(want)):
        fail(f"{name}: tifffile volume.tif: {got.dtype} {got.shape}, want {np.squeeze(want).shape}")
    with tifffile.TiffFile(path) as tf:
        if tf.is_bigtiff != c["bigtiff"]:
            fail(f"{name}: volume.tif bigtiff {tf.is_bigtiff}")
        ij = tf.imagej_metadata
        if not ij or ij.get("images") != C * planes.shape[1]:
            fail(f"{name}: volume.tif imagej metadata {ij}")
        elif Z > 1 and ij.get("slices") != Z:
            fail(f"{name}: volume.tif slices {ij.get('slices')}, want {Z}")
        elif c["resolution"] and (ij.get("unit") != "um" or (Z > 1 and not close(ij.get("spacing"), c["resolution"][2] / 1000))):
            fail(f"{name}: volume.tif unit/spacing {ij}")
        if c["resolution"]:
            tags = tf.pages[0].tags
            xr = tags["XResolution"].value
            if tags["ResolutionUnit"].value != 3 or not close(xr[0] / xr[1], 1e7 / c["resolution"][0]):
                fail(f"{name}: volume.tif resolution {xr} unit {tags['ResolutionUnit'].value}")
    check_tiff_tools(path)
    check_gdal(path, dtype, X, Y, planes[0, 0])
    # ImageJ reads classic TIFFs of 8, 16 and 32-bit samples (int8 as uint8).
    if not c["bigtiff"] and dtype not in ("float64", "int64", "uint64"):
        res = c["resolution"]
        vox = [res[0] / 1000, res[1] / 1000, res[2] / 1000 if Z > 1 else 1.0] if res else [1.0, 1.0, 1.0]
        ij_targets.append((name, path, dict(width=X, height=Y, channels=C, slices=Z,
                                            frames=planes.shape[1] // Z, voxel=vox), ref))
        if secs:
            ij_targets.append((name, secs[-1], dict(width=X, height=Y, channels=C, slices=1, frames=1,
                                                    voxel=vox[:2] + [1.0]), planes[:, -1]))

    # volume.raw through both headers
    flat = ref.reshape(-1)
    for hdr, mm in (("volume.nhdr", memmap_nhdr), ("volume.mhd", memmap_mhd)):
        got, _ = mm(os.path.join(d, hdr))
        if got.size != flat.size or not np.array_equal(got.reshape(-1), flat):
            fail(f"{name}: memmap via {hdr}: shape {got.shape}, want {ref.shape}")
        elif got.shape != (ref.shape if C > 1 else ref.shape[1:]):
            fail(f"{name}: memmap via {hdr}: shape {got.shape}, want {ref.shape}")
    rc, out, err = run(["teem-unu", "minmax", os.path.join(d, "volume.nhdr")])
    m = re.search(r"min: *(\S+)\s+max: *(\S+)", out)
    if rc != 0 or not m or not close(float(m.group(1)), lo) or not close(float(m.group(2)), hi):
        fail(f"{name}: unu minmax: rc={rc} {out.strip()} {err.strip()}, want {lo} {hi}")
    if len(shape) == 3 and C == 1:
        rc, out, err = run(["plastimatch", "stats", os.path.join(d, "volume.mhd")])
        m = re.search(r"MIN\s+(\S+)\s+AVE\s+\S+\s+MAX\s+(\S+)", out)
        if rc != 0 or not m or not close(float(m.group(1)), lo) or not close(float(m.group(2)), hi):
            fail(f"{name}: plastimatch stats: rc={rc} {out.strip()} {err.strip()[-300:]}, want {lo} {hi}")

    # slabs: every .raw through its .nhdr and .mhd equals the reference's z range
    if len(shape) > 2:
        cz = c["chunk"][2]
        nhdrs = sorted(glob.glob(os.path.join(d, "slabs", "*.nhdr")))
        nz = -(-Z // cz)
        outer = planes.shape[1] // Z
        if len(nhdrs) != nz * outer:
            fail(f"{name}: {len(nhdrs)} slabs, want {nz * outer}")
        byvol = ref.reshape(C, outer, Z, Y, X)
        for k, path in enumerate(nhdrs):
            t, zi = divmod(k, nz)
            want = byvol[:, t, zi * cz:(zi + 1) * cz].reshape(-1)
            for mm in (memmap_nhdr, memmap_mhd):
                got, h = mm(path if mm is memmap_nhdr else path[:-5] + ".mhd")
                if not np.array_equal(got.reshape(-1), want):
                    fail(f"{name}: slab {path} via {mm.__name__} differs")
            h = parse_nhdr(path)
            z0 = float(h["space origin"].strip("()").split(",")[2])
            dz = c["resolution"][2] if c["resolution"] else 1
            if not close(z0, zi * cz * dz):
                fail(f"{name}: slab {path}: origin z {z0}, want {zi * cz * dz}")
        if nhdrs:
            rc, out, err = run(["teem-unu", "minmax", nhdrs[0]])
            if rc != 0:
                fail(f"{name}: unu minmax {nhdrs[0]}: {err.strip()}")
    print("checked", name, len(secs), "sections")


def check_imagej(ij_jar):
    rc, out, err = run(["java", "-Djava.awt.headless=true", "-cp", ij_jar,
                        os.path.join(os.path.dirname(__file__), "ImageJCheck.java")] +
                       [t[1] for t in ij_targets])
    if rc != 0:
        fail(f"ImageJCheck.java: rc={rc} {err.strip()[-500:]}")
        return
    seen = {}
    for line in out.splitlines():
        if line.startswith("{"):
            got = json.loads(line)
            seen[got["path"]] = got
    for name, path, want, ref in ij_targets:
        got = seen.get(path)
        if not got or not got["open"]:
            fail(f"{name}: ImageJ cannot open {path}: {got}")
            continue
        for k, v in want.items():
            if k == "voxel":
                if not all(close(a, b) for a, b in zip(got[k], v)):
                    fail(f"{name}: ImageJ {path}: voxel {got[k]}, want {v}")
            elif got[k] != v:
                fail(f"{name}: ImageJ {path}: {k} {got[k]}, want {v}")
        if ref.dtype != np.int8:  # ImageJ shows int8 as uint8
            lo, hi, mean = float(ref.min()), float(ref.max()), float(ref.astype(np.float64).mean())
            if not (close(got["min"], lo) and close(got["max"], hi) and abs(got["mean"] - mean) <= 1e-4 * max(1, abs(mean))):
                fail(f"{name}: ImageJ {path}: min/max/mean {got['min']}/{got['max']}/{got['mean']}, want {lo}/{hi}/{mean}")
    print("ImageJ checked", len(ij_targets), "files")


ij_targets = []
manifest = json.load(open(sys.argv[1]))
for case in manifest:
    check_case(case)
IJ_JAR = "/usr/share/java/ij.jar"
if os.path.exists(IJ_JAR) and subprocess.run(["java", "-version"], capture_output=True).returncode == 0:
    check_imagej(IJ_JAR)
else:
    print("SKIP ImageJ checks: no java or", IJ_JAR, "(apt-get install -y imagej)")
sys.exit(1 if failures else 0)
