"""Checks volfs mounts of Zarr and N5 data with readers written by others.

Usage:
  zarrcheck.py fixtures MOUNT         MOUNT is a mount of the fixtures (testenv.Fixtures)
  zarrcheck.py write SRC SEED         write random arrays with zarr-python
  zarrcheck.py verify SRC MOUNT       compare a mount of SRC with SRC

Zarr v2 and N5 are read with zarr-python (Debian's python3-zarr), which
must find no compressor on the mount. Zarr v3 is read by read_v3 below, a
reader of the rewritten metadata and raw chunk files written against the
spec with numpy alone. Exits non-zero with a message on the first mismatch.
"""
import json
import os
import sys

import numpy as np
import zarr

failures = []


def check(name, got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype and not np.can_cast(want.dtype, got.dtype) \
            or not np.array_equal(got, want, equal_nan=got.dtype.kind == "f"):
        failures.append(f"{name}: got {got.dtype}{got.shape} {got.ravel()[:12]}, "
                        f"want {want.dtype}{want.shape} {want.ravel()[:12]}")


def open_v2(path):
    if not os.path.exists(os.path.join(path, ".zarray.orig")):
        failures.append(f"{path}: not decoded (no .zarray.orig on the mount)")
    a = zarr.open(path, mode="r")
    if a.compressor is not None or a.filters:
        failures.append(f"{path}: the mount shows compressor {a.compressor}, filters {a.filters}")
    return a[...]


def open_n5(path):
    # zarr's N5Store finds an array only below the container's root.
    a = zarr.open_array(zarr.N5Store(os.path.dirname(path)), path=os.path.basename(path), mode="r")
    # zarr's N5Store wraps every codec; raw N5 has no compressor config.
    if getattr(a.compressor, "compressor_config", None) is not None:
        failures.append(f"{path}: the mount shows compressor {a.compressor}")
    return a[...]


V3_TYPES = {"bool": "?", "int8": "i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
            "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
            "float16": "<f2", "float32": "<f4", "float64": "<f8"}


def read_v3(path):
    """Reads a Zarr v3 array whose codecs are [bytes little], as the mount shows it."""
    meta = json.load(open(os.path.join(path, "zarr.json")))
    if meta["codecs"] != [{"name": "bytes", "configuration": {"endian": "little"}}]:
        failures.append(f"{path}: the mount shows codecs {meta['codecs']}")
    dtype = np.dtype(V3_TYPES[meta["data_type"]])
    shape = meta["shape"]
    chunk = meta["chunk_grid"]["configuration"]["chunk_shape"]
    enc = meta["chunk_key_encoding"]
    sep = enc.get("configuration", {}).get("separator", "/" if enc["name"] == "default" else ".")
    fill = meta["fill_value"]
    out = np.full(shape, fill, dtype=dtype)
    grid = [-(-s // c) for s, c in zip(shape, chunk)]
    for idx in np.ndindex(*grid):
        key = sep.join(str(i) for i in idx)
        if enc["name"] == "default":
            key = "c" + sep + key
        data = np.fromfile(os.path.join(path, key), dtype=dtype).reshape(chunk)
        sel = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunk, shape))
        out[sel] = data[tuple(slice(0, s.stop - s.start) for s in sel)]
    return out


absent = []


def required(path, must):
    """Reports whether the fixture at path is there to check; one that must
    be (the repository's testdata/fixtures holds it) and is not is a
    failure, any other is listed as absent."""
    if os.path.exists(path):
        return True
    if must:
        failures.append(f"{path}: missing")
    else:
        absent.append(path)
    return False


def fixtures(mnt):
    v2 = os.path.join(mnt, "zarr-v2-zarr-python/data.zarr")
    i2 = np.array([1, 2, 3, 4], "<i2")
    expect = {
        "1d.contiguous.zlib.i2": i2, "1d.contiguous.blosc.i2": i2, "1d.contiguous.lz4.i2": i2,
        "1d.contiguous.zstd.i2": i2, "1d.contiguous.raw.i2": i2,
        "1d.contiguous.i4": np.array([1, 2, 3, 4], "<i4"),
        "1d.contiguous.u1": np.array([255, 0, 255, 0], "u1"),
        "1d.contiguous.f4.le": np.array([-1000.5, 0, 1000.5, 0], "<f4"),
        "1d.contiguous.f4.be": np.array([-1000.5, 0, 1000.5, 0], ">f4"),
        "1d.contiguous.f8": np.array([1.5, 2.5, 3.5, 4.5], "<f8"),
        "1d.contiguous.b1": np.array([True, False, True, False]),
        "1d.chunked.i2": i2, "1d.chunked.ragged.i2": np.array([1, 2, 3, 4, 5], "<i2"),
        "2d.contiguous.i2": np.array([[1, 2], [3, 4]], "<i2"),
        "2d.chunked.i2": np.array([[1, 2], [3, 4]], "<i2"),
        "2d.chunked.ragged.i2": np.arange(1, 10, dtype="<i2").reshape(3, 3),
        "3d.contiguous.i2": np.arange(27, dtype="<i2").reshape(3, 3, 3),
        "3d.chunked.i2": np.arange(27, dtype="<i2").reshape(3, 3, 3),
        "3d.chunked.mixed.i2.C": np.arange(27, dtype="<i2").reshape(3, 3, 3),
        "3d.chunked.mixed.i2.F": np.arange(27, dtype="<i2").reshape(3, 3, 3),
    }
    for name, want in expect.items():
        check("v2 " + name, open_v2(os.path.join(v2, name)), want)
    if zarr.open(v2, mode="r").attrs.get("answer") != 42:
        failures.append("v2 group attributes lost")
    # The consolidated metadata says what the mount serves too.
    g = zarr.open_consolidated(v2, mode="r")
    check("v2 consolidated 2d.chunked.i2", g["2d.chunked.i2"][...], expect["2d.chunked.i2"])
    if g["2d.chunked.i2"].compressor is not None:
        failures.append("v2 .zmetadata still names a compressor")

    compat = os.path.join(mnt, "zarr-v2-zarr-python-compat")
    data = {0: np.arange(1111, dtype="<i1"), 1: np.arange(1111, dtype="<i2"), 2: np.arange(1111, dtype="<i4"),
            3: np.arange(1111, dtype="<i8"),
            18: np.arange(20000, dtype="<i4").reshape(2000, 10),
            19: np.arange(20000, dtype="<i4").reshape(200, 100, order="F"),
            20: np.arange(20000, dtype="<i4").reshape(200, 10, 10),
            21: np.arange(20000, dtype="<i4").reshape(20, 100, 10, order="F"),
            22: np.arange(20000, dtype="<i4").reshape(20, 10, 10, 10),
            23: np.arange(20000, dtype="<i4").reshape(20, 10, 10, 10, order="F")}
    # The repository's testdata/fixtures holds arrays 2 and 19 of the set;
    # ../shared/fixtures holds them all.
    for i, want in data.items():
        for j in range(7):
            if required(os.path.join(compat, str(i), str(j)), i in (2, 19)):
                check(f"compat {i}/{j}", open_v2(os.path.join(compat, str(i), str(j))), want)
    for sep in ("flat", "nested"):
        check("compat " + sep, open_v2(os.path.join(compat, sep)), np.array([[1, 2], [3, 4]], "<i8"))

    impl = os.path.join(mnt, "zarr-implementations")
    from PIL import Image
    ref = np.asarray(Image.open(os.path.join(impl, "data/reference_image.png")).convert("RGB"))
    for codec in ("raw", "gzip", "zlib", "blosc"):
        if required(os.path.join(impl, "examples/zarr.zr", codec), False):
            check("zarr.zr " + codec, open_v2(os.path.join(impl, "examples/zarr.zr", codec)), ref)
    for codec in ("raw", "gzip"):
        if required(os.path.join(impl, "examples/z5py.n5", codec), codec == "gzip"):
            check("z5py.n5 " + codec, open_n5(os.path.join(impl, "examples/z5py.n5", codec)), ref)

    n5 = os.path.join(mnt, "n5-tensorstore")
    want = np.arange(20, dtype="<u2").reshape(5, 4).T
    for codec in ("raw", "gzip", "bzip2", "blosc", "xz"):
        check("n5 " + codec, open_n5(os.path.join(n5, codec)), want)

    v3 = os.path.join(mnt, "zarr-v3-zarrita/data.zarr")
    v3expect = {name: want for name, want in expect.items() if name not in ("1d.contiguous.b1",)}
    v3expect.update({
        "1d.contiguous.gzip.i2": i2,
        "1d.chunked.compressed.sharded.i2": i2,
        "1d.chunked.filled.compressed.sharded.i2": np.array([1, 2, 0, 0], "<i2"),
        "2d.contiguous.compressed.sharded.i2": np.array([[1, 2], [3, 4]], "<i2"),
        "2d.chunked.compressed.sharded.filled.i2": np.arange(16, dtype="<i2").reshape(4, 4),
        "2d.chunked.compressed.sharded.i2": np.arange(16, dtype="<i2").reshape(4, 4) + 1,
        "2d.chunked.ragged.compressed.sharded.i2": np.arange(1, 10, dtype="<i2").reshape(3, 3),
        "3d.contiguous.compressed.sharded.i2": np.arange(27, dtype="<i2").reshape(3, 3, 3),
        "3d.chunked.compressed.sharded.i2": np.arange(64, dtype="<i2").reshape(4, 4, 4),
        "3d.chunked.mixed.compressed.sharded.i2": np.arange(27, dtype="<i2").reshape(3, 3, 3),
    })
    present = set(os.listdir(v3))
    for name, want in v3expect.items():
        if name not in present:
            continue
        if not os.path.exists(os.path.join(v3, name, "zarr.json.orig")):
            failures.append(f"v3 {name}: not decoded (no zarr.json.orig on the mount)")
            continue
        check("v3 " + name, read_v3(os.path.join(v3, name)), want.astype(want.dtype.newbyteorder("<")))
    for name in sorted(present):
        if ".sharded." in name and name.startswith("1d.contiguous."):
            dt = name.split(".")[-1]
            want = {"i2": i2, "i4": np.array([1, 2, 3, 4], "<i4"), "u1": np.array([255, 0, 255, 0], "u1"),
                    "f8": np.array([1.5, 2.5, 3.5, 4.5], "<f8")}.get(dt)
            if want is not None and os.path.exists(os.path.join(v3, name, "zarr.json.orig")):
                check("v3 " + name, read_v3(os.path.join(v3, name)), want)
    if not any(".sharded." in n for n in present):
        failures.append("no sharded v3 fixture found")


COMPRESSORS = None


def compressors():
    from numcodecs import Blosc, BZ2, GZip, LZ4, LZMA, Zlib, Zstd
    out = [None, Zlib(level=1), GZip(level=5), BZ2(level=1), Zstd(level=3), LZ4(), LZMA()]
    for cname in ("blosclz", "lz4", "lz4hc", "zlib", "zstd", "snappy"):
        for shuffle in (Blosc.NOSHUFFLE, Blosc.SHUFFLE, Blosc.BITSHUFFLE):
            out.append(Blosc(cname=cname, clevel=5, shuffle=shuffle))
    return out


def write(src, seed):
    """Writes random arrays with every compressor, orders, separators, fills."""
    rng = np.random.default_rng(int(seed))
    dtypes = ["|u1", "|i1", "<u2", ">i2", "<i4", ">u4", "<i8", "<f4", ">f8", "<f2", "|b1"]
    manifest = []
    for k, comp in enumerate(compressors()):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(1, 40, nd))
        chunks = tuple(int(max(1, x)) for x in rng.integers(1, 17, nd))
        dtype = np.dtype(dtypes[k % len(dtypes)])
        order = "F" if k % 3 == 1 else "C"
        sep = "/" if k % 4 == 2 else "."
        # zarr-python reads the missing chunks of an array without a fill
        # value as uninitialised memory: null fills are written whole below.
        fill = [0, None, 7, float("nan")][k % 4]
        if dtype.kind != "f" and fill != fill:
            fill = 3
        if dtype.kind == "b":
            fill = k % 2 == 0
        name = f"a{k:02d}"
        store = zarr.DirectoryStore(os.path.join(src, name), dimension_separator=sep)
        z = zarr.create(store=store, shape=shape, chunks=chunks, dtype=dtype, compressor=comp,
                        order=order, fill_value=fill, overwrite=True)
        if dtype.kind == "f":
            data = (rng.standard_normal(shape) * 1000).astype(dtype)
        elif dtype.kind == "b":
            data = rng.integers(0, 2, shape).astype(bool)
        else:
            info = np.iinfo(dtype)
            data = rng.integers(info.min, info.max, shape, dtype=dtype.newbyteorder("="), endpoint=True).astype(dtype)
        # Leave some chunks missing: write a random box, not the whole array.
        sel = tuple(slice(0, int(rng.integers(1, s + 1)) if fill is not None else s) for s in shape)
        z[sel] = data[sel]
        manifest.append(name)
    # N5 through zarr's N5Store, with each of its compressors.
    from numcodecs import GZip, BZ2, Blosc, Zstd, LZMA
    for k, comp in enumerate([None, GZip(level=5), BZ2(level=1), Blosc(cname="lz4", shuffle=1), Zstd(level=2), LZMA()]):
        name = f"n5_{k}.n5"
        shape = tuple(int(x) for x in rng.integers(5, 40, 3))
        chunks = tuple(int(x) for x in rng.integers(2, 12, 3))
        store = zarr.N5Store(os.path.join(src, name))
        try:
            z = zarr.open_group(store, mode="w").create_dataset("data", shape=shape, chunks=chunks, dtype="<u2", compressor=comp)
        except Exception as e:  # a compressor this zarr's N5Store cannot write
            print(f"skip N5 with {comp}: {e}", file=sys.stderr)
            continue
        z[:] = rng.integers(0, 65535, shape, dtype="u2")
        manifest.append(name)
    json.dump(manifest, open(os.path.join(src, "manifest.json"), "w"))


def verify(src, mnt):
    for name in json.load(open(os.path.join(src, "manifest.json"))):
        if name.endswith(".n5"):
            check(name, open_n5(os.path.join(mnt, name, "data")), zarr.open(zarr.N5Store(os.path.join(src, name)), mode="r")["data"][...])
            continue
        s = zarr.open(os.path.join(src, name), mode="r")
        check(name, open_v2(os.path.join(mnt, name)), s[...])
        if not os.path.exists(os.path.join(mnt, name, ".zarray.orig")):
            continue
        # Every chunk file holds what zarr-python would store uncompressed.
        sep = s._dimension_separator or "."
        for idx in np.ndindex(*s.cdata_shape):
            key = sep.join(map(str, idx))
            mounted = open(os.path.join(mnt, name, key), "rb").read()
            stored = os.path.join(src, name, key)
            if os.path.exists(stored):
                raw = open(stored, "rb").read()
                want = s.compressor.decode(raw) if s.compressor else raw
                want = bytes(np.frombuffer(want, "u1"))
            else:
                full = np.full(s.chunks, s.fill_value if s.fill_value is not None else 0, dtype=s.dtype)
                want = full.tobytes(order=s.order)
            if mounted != want:
                failures.append(f"{name}/{key}: {len(mounted)} bytes differ from zarr-python's decode ({len(want)} bytes)")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "fixtures":
        fixtures(sys.argv[2])
    elif cmd == "write":
        write(sys.argv[2], sys.argv[3])
    elif cmd == "verify":
        verify(sys.argv[2], sys.argv[3])
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    if absent:
        print(f"{len(absent)} fixtures only ../shared/fixtures holds were not checked")
    print("ok")
