"""Writes OME-Zarr 0.4 images with zarr-python 2 and checks, with readers
that are not volfs, that the stitched views of a mount carry the physical
spacing, origin and units the OME-Zarr metadata (and a precomputed info's
resolution and voxel_offset) give.

Usage:
  omespacing.py write SRC
  omespacing.py verify SRC MOUNT TMP

write: SRC/v04.ome.zarr (micrometres; scale and translation on each level
and on the image), SRC/nounit.ome.zarr (space axes without a unit) and
SRC/shear.ome.zarr (an affine with a shear on the image, which does not
reduce to a scale and a translation). omespacing.mjs writes the Zarr v3
images (NGFF 0.5, 0.6) and mkprecomputed.py the precomputed layer beside
them.

verify: for each level of each image under SRC, computes the voxel size
and the position of voxel 0 from the metadata as written (composing the
transforms here, independently of volfs) in nm, and compares with
  - volume.nhdr as teem parses it (`teem-unu save` re-emits the header),
  - volume.mhd and the last slab's .mhd as ITK reads them
    (`plastimatch header`),
  - volume.tif's XResolution, YResolution, ResolutionUnit and ImageJ
    description (unit, spacing, x/y/zorigin) as tifffile reads them.
A level whose transforms do not reduce must show unit spacing, origin 0
and no unit. Exits non-zero listing every mismatch.
"""
import json
import os
import subprocess
import sys

import numpy as np
import tifffile
import zarr

failures = []
NM = {"nanometer": 1.0, "micrometer": 1e3, "millimeter": 1e6}


def close(got, want, rel=1e-6, absolute=0.0):
    return len(got) == len(want) and all(abs(g - w) <= rel * max(1.0, abs(w)) + absolute for g, w in zip(got, want))


def check_close(what, got, want, **kw):
    if got is None or not close(got, want, **kw):
        failures.append(f"{what}: got {got!r}, want {want!r}")


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def write(src):
    zyx = lambda unit: [dict(name=n, type="space", **({"unit": unit} if unit else {})) for n in "zyx"]
    images = {
        "v04.ome.zarr": dict(axes=zyx("micrometer"), levels=[
            ("0", (6, 20, 24), [{"type": "scale", "scale": [0.5, 0.25, 0.25]}, {"type": "translation", "translation": [1.5, -2, 3.25]}]),
            ("1", (3, 10, 12), [{"type": "scale", "scale": [1, 0.5, 0.5]}, {"type": "translation", "translation": [1.75, -1.875, 3.375]}])],
            image=[{"type": "scale", "scale": [2, 1, 1]}, {"type": "translation", "translation": [10, 0, -5]}]),
        "nounit.ome.zarr": dict(axes=zyx(None), levels=[
            ("0", (6, 20, 24), [{"type": "scale", "scale": [3, 2, 2]}, {"type": "translation", "translation": [6, 0, 1]}])]),
        "shear.ome.zarr": dict(axes=zyx("micrometer"), levels=[
            ("0", (6, 20, 24), [{"type": "scale", "scale": [1, 0.5, 0.5]}])],
            image=[{"type": "affine", "affine": [[1, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]}]),
    }
    for name, img in images.items():
        g = zarr.open_group(os.path.join(src, name), mode="w")
        for path, shape, _ in img["levels"]:
            a = (np.arange(np.prod(shape)) * 31 + 7).astype("u2").reshape(shape)
            g.create_dataset(path, data=a, chunks=(4, 16, 16), compressor=zarr.Blosc("zstd", 3))
        ms = {"version": "0.4", "name": name, "axes": img["axes"],
              "datasets": [{"path": p, "coordinateTransformations": ts} for p, _, ts in img["levels"]]}
        if "image" in img:
            ms["coordinateTransformations"] = img["image"]
        g.attrs["multiscales"] = [ms]


class NotReduced(Exception):
    pass


def compose(ts, s, t):
    for tr in ts:
        kind = tr["type"]
        if kind == "scale":
            s = [a * b for a, b in zip(s, tr["scale"])]
            t = [a * b for a, b in zip(t, tr["scale"])]
        elif kind == "translation":
            t = [a + b for a, b in zip(t, tr["translation"])]
        elif kind == "sequence":
            s, t = compose(tr["transformations"], s, t)
        else:
            raise NotReduced(kind)
    return s, t


def images(src):
    """Yields (image dir, level path, spacing or None, origin, unitless) in
    x, y, z order and nm, from the metadata as stored."""
    for name in sorted(os.listdir(src)):
        d = os.path.join(src, name)
        if os.path.exists(os.path.join(d, ".zattrs")):
            attrs = json.load(open(os.path.join(d, ".zattrs")))
        elif os.path.exists(os.path.join(d, "zarr.json")):
            attrs = json.load(open(os.path.join(d, "zarr.json"))).get("attributes", {}).get("ome", {})
        else:
            continue
        ms = attrs["multiscales"][0]
        if "coordinateSystems" in ms:  # 0.6: the levels lead into the first system
            axes, image = ms["coordinateSystems"][0]["axes"], []
        else:
            axes, image = ms["axes"], ms.get("coordinateTransformations", [])
        units = [ax.get("unit") for ax in axes]
        factor = [NM[u] if u else 1.0 for u in units]
        for ds in ms["datasets"]:
            try:
                s, t = compose(ds["coordinateTransformations"], [1.0] * 3, [0.0] * 3)
                s, t = compose(image, s, t)
            except NotReduced:
                yield name, ds["path"], None, [0.0] * 3, True
                continue
            sp = [v * f for v, f in zip(s, factor)][::-1]
            org = [v * f for v, f in zip(t, factor)][::-1]
            yield name, ds["path"], sp, org, units[0] is None


def precomputed(src):
    """Yields the precomputed scales of mkprecomputed.py's layer the same way."""
    info = json.load(open(os.path.join(src, "pre", "info")))
    for sc in info["scales"]:
        res = [float(r) for r in sc["resolution"]]
        yield "pre", sc["key"], res, [o * r for o, r in zip(sc["voxel_offset"], res)], False


def nrrd_fields(text):
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            break
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def vector(s):
    return [float(v) for v in s.strip("()").split(",")]


def plastimatch(path):
    out = subprocess.run(["plastimatch", "header", path], capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"plastimatch header {path}: {out.stderr.strip()}")
        return {}
    kv = dict(line.split(" = ", 1) for line in out.stdout.splitlines() if " = " in line)
    return {k: [float(v) for v in kv[k].split()] for k in ("Origin", "Spacing") if k in kv}


def verify(src, mnt, tmp):
    levels = list(images(src)) + list(precomputed(src))
    check("levels found", len(levels), 10)
    for name, path, sp, org, unitless in levels:
        what = f"{name}/{path}"
        d = os.path.join(mnt, name, path)
        reduced = sp is not None
        if not reduced:
            sp = [1.0] * 3
        # NRRD, as teem parses it.
        out = os.path.join(tmp, name + path + ".nrrd")
        subprocess.run(["teem-unu", "save", "-i", os.path.join(d, "volume.nhdr"), "-f", "nrrd", "-e", "raw", "-o", out], check=True)
        with open(out, "rb") as f:
            fields = nrrd_fields(f.read(4096).decode("latin-1"))
        dirs = [vector(v) for v in fields.get("space directions", "").split() if v != "none"]
        check_close(f"{what} volume.nhdr spacing", [dv[i] for i, dv in enumerate(dirs)] if len(dirs) == 3 else None, sp)
        check_close(f"{what} volume.nhdr origin", vector(fields.get("space origin", "(nan)")), org)
        check(f"{what} volume.nhdr units", fields.get("space units"), None if unitless else '"nm" "nm" "nm"')
        # MetaImage, as ITK reads it (plastimatch prints 4 decimals).
        mhd = plastimatch(os.path.join(d, "volume.mhd"))
        check_close(f"{what} volume.mhd spacing", mhd.get("Spacing"), sp, rel=1e-5, absolute=1e-4)
        check_close(f"{what} volume.mhd origin", mhd.get("Origin"), org, rel=1e-5, absolute=1e-4)
        slabs = sorted(n for n in os.listdir(os.path.join(d, "slabs")) if n.endswith(".mhd"))
        z0 = int(slabs[-1].split("-")[0].lstrip("z"))
        mhd = plastimatch(os.path.join(d, "slabs", slabs[-1]))
        check_close(f"{what} slabs/{slabs[-1]} origin", mhd.get("Origin"), org[:2] + [org[2] + z0 * sp[2]], rel=1e-5, absolute=1e-4)
        # TIFF, as tifffile reads it.
        with tifffile.TiffFile(os.path.join(d, "volume.tif")) as tf:
            tags = tf.pages[0].tags
            xres, yres = (tags[k].value[0] / tags[k].value[1] for k in ("XResolution", "YResolution"))
            unit = int(tags["ResolutionUnit"].value)
            ij = tf.imagej_metadata or {}
        if reduced and not unitless:
            check(f"{what} volume.tif ResolutionUnit", unit, 3)
            check_close(f"{what} volume.tif X/YResolution (per cm)", [xres, yres], [1e7 / sp[0], 1e7 / sp[1]])
            check(f"{what} volume.tif ImageJ unit", ij.get("unit"), "um")
            check_close(f"{what} volume.tif ImageJ spacing (um)", [ij.get("spacing", 0)], [sp[2] / 1000])
        elif reduced:
            check(f"{what} volume.tif ResolutionUnit", unit, 1)
            check_close(f"{what} volume.tif X/YResolution (per unit)", [xres, yres], [1 / sp[0], 1 / sp[1]])
            check(f"{what} volume.tif ImageJ unit", ij.get("unit"), None)
            check_close(f"{what} volume.tif ImageJ spacing", [ij.get("spacing", 0)], [sp[2]])
        else:
            check(f"{what} volume.tif resolution", (unit, xres, yres), (1, 1.0, 1.0))
            check(f"{what} volume.tif ImageJ unit and spacing", (ij.get("unit"), ij.get("spacing")), (None, None))
        got = [float(ij.get(k, 0)) for k in ("xorigin", "yorigin", "zorigin")]
        check_close(f"{what} volume.tif ImageJ origin (pixels)", got, [-o / s for o, s in zip(org, sp)])


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        verify(*sys.argv[2:5])
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("ok")
