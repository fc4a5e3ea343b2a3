"""Reference sets (kerchunk JSON) over HDF5 files written by h5py.

write DIR: writes DIR/data.h5 with h5py (chunked arrays, gzip with and
without shuffle, fletcher32, a partly written array whose other chunks are
absent) and DIR/refs.json, a version 1 reference set built from h5py's own
chunk table (Dataset.id.get_chunk_info), with relative target URLs, the
way kerchunk's HDF5 reader builds one. DIR/chunks.json records, per chunk
key, the byte offset and size of its stored bytes.

verify DIR MNT: zarr-python opens the mount and every array equals h5py's
read of the original; every chunk file equals the original's chunk
(h5py's values, padded with the fill value to the full chunk).
"""

import json
import os
import sys

import h5py
import numpy as np
import zarr

ARRAYS = {
    # name: (shape, chunks, dtype, h5py create_dataset options, written region)
    "temp": ((37, 50), (16, 16), "<f4", dict(compression="gzip", compression_opts=4, shuffle=True), None),
    "counts": ((100,), (30,), "<i2", dict(compression="gzip"), slice(0, 40)),
    "grp/sums": ((20, 9), (7, 5), "<u4", dict(compression="gzip", shuffle=True, fletcher32=True), None),
    "raw": ((10, 10), (4, 10), "<f8", dict(), None),
}
FILL = {"counts": 7}


def values(name, shape, dtype):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float64) * 1.5 + len(name)).reshape(shape).astype(dtype)


def zarray(name, shape, chunks, dtype, opts, ds):
    # The codecs are the dataset's own HDF5 filter pipeline, in its order
    # (numcodecs filters run in order on encode, reversed on decode), as
    # kerchunk's HDF5 reader writes them.
    pl = ds.id.get_create_plist()
    filters = []
    for i in range(pl.get_nfilters()):
        code, _flags, vals, _name = pl.get_filter(i)
        if code == h5py.h5z.FILTER_DEFLATE:
            filters.append({"id": "zlib", "level": int(vals[0]) if vals else 4})
        elif code == h5py.h5z.FILTER_SHUFFLE:
            filters.append({"id": "shuffle", "elementsize": np.dtype(dtype).itemsize})
        elif code == h5py.h5z.FILTER_FLETCHER32:
            filters.append({"id": "fletcher32"})
        else:
            raise SystemExit("unexpected HDF5 filter %d" % code)
    return {
        "zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
        "compressor": None, "filters": filters or None,
        "fill_value": FILL.get(name, 0), "order": "C",
    }


def write(d):
    h5 = os.path.join(d, "data.h5")
    refs = {".zgroup": json.dumps({"zarr_format": 2}), ".zattrs": json.dumps({"writer": "h5py"}),
            "grp/.zgroup": json.dumps({"zarr_format": 2})}
    chunks_info = {}
    with h5py.File(h5, "w") as f:
        for name, (shape, chunks, dtype, opts, region) in ARRAYS.items():
            ds = f.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype,
                                  fillvalue=FILL.get(name, 0), **opts)
            v = values(name, shape, dtype)
            if region is None:
                ds[...] = v
            else:
                ds[region] = v[region]
    with h5py.File(h5, "r") as f:
        for name, (shape, chunks, dtype, opts, region) in ARRAYS.items():
            ds = f[name]
            refs[name + "/.zarray"] = json.dumps(zarray(name, shape, chunks, dtype, opts, ds))
            refs[name + "/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["d%d" % i for i in range(len(shape))]})
            for i in range(ds.id.get_num_chunks()):
                info = ds.id.get_chunk_info(i)
                assert info.filter_mask == 0, (name, info)
                key = name + "/" + ".".join(str(o // c) for o, c in zip(info.chunk_offset, chunks))
                refs[key] = ["data.h5", info.byte_offset, info.size]
                chunks_info[key] = [info.byte_offset, info.size]
    # The "{{f}}" template stands for the file, as kerchunk writes it for
    # sets with many references to one URL.
    refs2 = {}
    for k, v in refs.items():
        if isinstance(v, list) and k.startswith("temp/"):
            v = ["{{f}}", v[1], v[2]]
        refs2[k] = v
    with open(os.path.join(d, "refs.json"), "w") as out:
        json.dump({"version": 1, "templates": {"f": "data.h5"}, "refs": refs2}, out)
    with open(os.path.join(d, "chunks.json"), "w") as out:
        json.dump(chunks_info, out)


def verify(d, mnt):
    h5 = os.path.join(d, "data.h5")
    g = zarr.open_group(mnt, mode="r")
    bad = []
    with h5py.File(h5, "r") as f:
        for name, (shape, chunks, dtype, opts, region) in ARRAYS.items():
            want = f[name][...]
            got = g[name][...]
            if got.dtype != want.dtype or not np.array_equal(got, want):
                bad.append("%s: zarr-python reads the mount differently from h5py" % name)
            # each chunk file equals the original chunk, padded with the fill value
            grid = [-(-s // c) for s, c in zip(shape, chunks)]
            for idx in np.ndindex(*grid):
                sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
                full = np.full(chunks, FILL.get(name, 0), dtype=dtype)
                part = want[sl]
                full[tuple(slice(0, n) for n in part.shape)] = part
                p = os.path.join(mnt, name, ".".join(map(str, idx)))
                with open(p, "rb") as fh:
                    data = fh.read()
                if data != full.tobytes():
                    bad.append("%s: %d bytes, not the original chunk (%d bytes)" % (p, len(data), full.nbytes))
        zarr_meta = json.load(open(os.path.join(mnt, "temp", ".zarray")))
        if zarr_meta.get("compressor") is not None or zarr_meta.get("filters"):
            bad.append("temp/.zarray not rewritten: %r" % zarr_meta)
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok")




def write_tiff(d):
    """A tiled TIFF (zlib and uncompressed pages) whose references
    tifffile itself writes (aszarr().write_fsspec), version 0."""
    import tifffile
    a = values("tif", (70, 90), "<u2")
    for name, comp in (("z", "zlib"), ("u", None)):
        tifffile.imwrite(os.path.join(d, name + ".tif"), a, tile=(32, 32), compression=comp)
        with tifffile.imread(os.path.join(d, name + ".tif"), aszarr=True) as store:
            store.write_fsspec(os.path.join(d, name + ".json"), url=".")


def verify_tiff(d, name, mnt):
    import tifffile
    want = tifffile.imread(os.path.join(d, name + ".tif"))
    got = zarr.open_array(mnt, mode="r")[...]
    bad = []
    if got.dtype != want.dtype or not np.array_equal(got, want):
        bad.append("%s: zarr-python reads the mount differently from tifffile" % name)
    with tifffile.TiffFile(os.path.join(d, name + ".tif")) as tf:
        page = tf.pages[0]
        fh = tf.filehandle
        for i, (off, n) in enumerate(zip(page.dataoffsets, page.databytecounts)):
            fh.seek(off)
            tile, _, _ = page.decode(fh.read(n), i)
            r, c = divmod(i, -(-want.shape[1] // 32))
            with open(os.path.join(mnt, "%d.%d" % (r, c)), "rb") as f:
                data = f.read()
            if data != np.ascontiguousarray(tile.reshape(32, 32)).tobytes():
                bad.append("%s: chunk %d.%d is not tifffile's decode of tile %d" % (name, r, c, i))
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok")


# TIFF compressions libtiff writes (tiffcp -c), each tiled 32x32 and in
# strips of 16 rows, of a uint8 and a uint16 image: name -> (tiffcp -c
# argument, dtype, tiled). JPEG (uint8 only) is refused by volfs.
TIFFC = {}
for _comp in ("lzw", "packbits"):
    for _dt in ("u1", "u2"):
        for _tiled in (True, False):
            TIFFC["%s_%s_%s" % (_comp, _dt, "tiled" if _tiled else "strips")] = (_comp, _dt, _tiled)
TIFFC["jpeg_u1_tiled"] = ("jpeg", "u1", True)


def write_tiffc(d):
    """One reference set, DIR/tiffc.json, of every TIFFC array: tifffile
    writes the uncompressed DIR/plain_<dtype>.tif, libtiff's tiffcp
    compresses it into DIR/<name>.tif, and tifffile writes each one's
    references (aszarr().write_fsspec, version 0) under group <name>,
    merged into one set, with cut_lzw_u1_tiled and cut_packbits_u1_tiled:
    those arrays with every chunk's stored bytes cut to half."""
    import subprocess
    import tifffile
    for dt in ("u1", "u2"):
        a = (np.arange(64 * 90) * 37 % (251 if dt == "u1" else 65521)).reshape(64, 90).astype("<" + dt)
        if dt == "u1":
            a[:, 20:50] = 5  # runs for PackBits
        tifffile.imwrite(os.path.join(d, "plain_%s.tif" % dt), a)
    refs = {}
    for name, (comp, dt, tiled) in TIFFC.items():
        layout = ["-t", "-w", "32", "-l", "32"] if tiled else ["-r", "16"]
        out = os.path.join(d, name + ".tif")
        subprocess.run(["tiffcp", "-c", comp] + layout + [os.path.join(d, "plain_%s.tif" % dt), out], check=True)
        with tifffile.TiffFile(out) as tf:
            if tf.pages[0].compression != {"lzw": 5, "packbits": 32773, "jpeg": 7}[comp]:
                sys.exit("%s: tiffcp wrote compression %d" % (name, tf.pages[0].compression))
            with tf.aszarr() as store:
                store.write_fsspec(os.path.join(d, name + ".json"), url=".", groupname=name)
        with open(os.path.join(d, name + ".json")) as f:
            refs.update(json.load(f))
    # cut_<name>: the same array, every chunk's range cut to half.
    for name in ("lzw_u1_tiled", "packbits_u1_tiled"):
        for k, v in list(refs.items()):
            if k.startswith(name + "/"):
                if isinstance(v, list):
                    v = [v[0], v[1], v[2] // 2]
                refs["cut_" + k] = v
    with open(os.path.join(d, "tiffc.json"), "w") as f:
        json.dump(refs, f)


def verify_tiffc(d, mnt):
    """zarr-python reading each decoded array of the mount equals tifffile
    reading the uncompressed original, and so does numpy on each chunk
    file; the JPEG array passes through: its .zarray is tifffile's."""
    import tifffile
    bad = []
    for name, (comp, dt, tiled) in TIFFC.items():
        want = tifffile.imread(os.path.join(d, "plain_%s.tif" % dt))
        if comp == "jpeg":
            with open(os.path.join(mnt, name, ".zarray")) as f:
                if json.load(f)["compressor"]["id"] != "imagecodecs_jpeg":
                    bad.append("%s: .zarray is not the stored one" % name)
            continue
        got = zarr.open_array(os.path.join(mnt, name), mode="r")[...]
        if got.dtype != want.dtype or not np.array_equal(got, want):
            bad.append("%s: zarr-python reads the mount differently from tifffile" % name)
        ch, cw = (32, 32) if tiled else (16, 90)
        for r in range(-(-64 // ch)):
            for c in range(-(-90 // cw)):
                with open(os.path.join(mnt, name, "%d.%d" % (r, c)), "rb") as f:
                    chunk = np.frombuffer(f.read(), dtype=want.dtype).reshape(ch, cw)
                part = want[r * ch:(r + 1) * ch, c * cw:(c + 1) * cw]
                if not np.array_equal(chunk[:part.shape[0], :part.shape[1]], part):
                    bad.append("%s: chunk %d.%d differs from tifffile's read of the original" % (name, r, c))
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok")


def write_nc(d):
    """A NetCDF4 file netCDF4 writes (zlib, shuffle, chunked), with
    references built from h5py's chunk table of its variables."""
    import netCDF4
    with netCDF4.Dataset(os.path.join(d, "data.nc"), "w") as nc:
        nc.createDimension("y", 33)
        nc.createDimension("x", 21)
        v = nc.createVariable("v", "f4", ("y", "x"), zlib=True, shuffle=True, chunksizes=(10, 8), fill_value=-1.0)
        v[:] = values("v", (33, 21), "<f4")
        w = nc.createVariable("w", "i4", ("y",), zlib=True, chunksizes=(5,), fill_value=-7)
        w[:12] = np.arange(12)
    refs = {".zgroup": json.dumps({"zarr_format": 2})}
    with h5py.File(os.path.join(d, "data.nc"), "r") as f:
        for name, fill in (("v", -1.0), ("w", -7)):
            ds = f[name]
            meta = zarray(name, ds.shape, ds.chunks, ds.dtype.str, {}, ds)
            meta["fill_value"] = fill
            refs[name + "/.zarray"] = json.dumps(meta)
            for i in range(ds.id.get_num_chunks()):
                info = ds.id.get_chunk_info(i)
                key = name + "/" + ".".join(str(o // c) for o, c in zip(info.chunk_offset, ds.chunks))
                refs[key] = ["data.nc", info.byte_offset, info.size]
    with open(os.path.join(d, "nc.json"), "w") as out:
        json.dump({"version": 1, "refs": refs}, out)


def verify_nc(d, mnt):
    import netCDF4
    bad = []
    g = zarr.open_group(mnt, mode="r")
    with netCDF4.Dataset(os.path.join(d, "data.nc")) as nc:
        for name in ("v", "w"):
            var = nc.variables[name]
            var.set_auto_mask(False)
            want = var[:]
            got = g[name][...]
            if not np.array_equal(got, want):
                bad.append("%s: zarr-python reads the mount differently from netCDF4" % name)
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    {
        "write": lambda: write(sys.argv[2]),
        "verify": lambda: verify(sys.argv[2], sys.argv[3]),
        "write-tiff": lambda: write_tiff(sys.argv[2]),
        "verify-tiff": lambda: verify_tiff(sys.argv[2], sys.argv[3], sys.argv[4]),
        "write-tiffc": lambda: write_tiffc(sys.argv[2]),
        "verify-tiffc": lambda: verify_tiffc(sys.argv[2], sys.argv[3]),
        "write-nc": lambda: write_nc(sys.argv[2]),
        "verify-nc": lambda: verify_nc(sys.argv[2], sys.argv[3]),
    }[sys.argv[1]]()
