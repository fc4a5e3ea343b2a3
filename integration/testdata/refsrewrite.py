"""An HDF5 file rewritten under its reference set (TestReferenceSetTargetRewritten).

write DIR SEED [NAME]: writes DIR/NAME (default data.h5) with h5py (a shuffle-only array, whose
stored chunks keep their size and place when rewritten, and a gzip array),
or, when it exists, opens it read-write and writes new values in place;
then writes DIR/refs.json from h5py's chunk table (Dataset.id.get_chunk_info)
and DIR/layout.json (chunk key -> [byte offset, size]).

The gzip array's values do not depend on SEED, so a rewrite leaves the file's
size as it was.

verify DIR MNT [NAME]: every chunk file under MNT equals h5py's read of that
chunk of DIR/NAME now, and zarr-python reading MNT equals h5py.
"""

import json
import os
import sys

import h5py
import numpy as np
import zarr

ARRAYS = {
    "shuf": ((24, 24), (8, 8), "<i4", dict(shuffle=True)),
    "gz": ((20, 20), (10, 10), "<f4", dict(compression="gzip")),
}


def values(name, shape, dtype, seed):
    n = int(np.prod(shape))
    if name == "gz":
        seed = 0
    return (np.arange(n, dtype=np.float64) * (3 + seed) + 11 * seed + len(name)).reshape(shape).astype(dtype)


def write(d, seed, fname):
    h5 = os.path.join(d, fname)
    mode = "r+" if os.path.exists(h5) else "w"
    with h5py.File(h5, mode) as f:
        for name, (shape, chunks, dtype, opts) in ARRAYS.items():
            if mode == "w":
                f.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype, **opts)
            f[name][...] = values(name, shape, dtype, seed)
    refs = {".zgroup": json.dumps({"zarr_format": 2})}
    layout = {}
    with h5py.File(h5, "r") as f:
        for name, (shape, chunks, dtype, opts) in ARRAYS.items():
            ds = f[name]
            filters = [{"id": "shuffle", "elementsize": np.dtype(dtype).itemsize}] if opts.get("shuffle") else []
            if opts.get("compression") == "gzip":
                filters.append({"id": "zlib", "level": 4})
            refs[name + "/.zarray"] = json.dumps({
                "zarr_format": 2, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
                "compressor": None, "filters": filters, "fill_value": 0, "order": "C"})
            for i in range(ds.id.get_num_chunks()):
                info = ds.id.get_chunk_info(i)
                key = name + "/" + ".".join(str(o // c) for o, c in zip(info.chunk_offset, chunks))
                refs[key] = [fname, info.byte_offset, info.size]
                layout[key] = [info.byte_offset, info.size]
    with open(os.path.join(d, "refs.json"), "w") as out:
        json.dump({"version": 1, "refs": refs}, out, sort_keys=True)
    with open(os.path.join(d, "layout.json"), "w") as out:
        json.dump(layout, out, sort_keys=True)


def verify(d, mnt, fname):
    bad = []
    g = zarr.open_group(mnt, mode="r")
    with h5py.File(os.path.join(d, fname), "r") as f:
        for name, (shape, chunks, dtype, opts) in ARRAYS.items():
            want = f[name][...]
            for idx in np.ndindex(*[s // c for s, c in zip(shape, chunks)]):
                sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))
                p = os.path.join(mnt, name, ".".join(map(str, idx)))
                with open(p, "rb") as fh:
                    if fh.read() != np.ascontiguousarray(want[sl]).tobytes():
                        bad.append("%s is not h5py's read of that chunk of %s now" % (p, fname))
            if not np.array_equal(g[name][...], want):
                bad.append("%s: zarr-python reads the mount differently from h5py" % name)
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    fname = sys.argv[4] if len(sys.argv) > 4 else "data.h5"
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), fname)
    else:
        verify(sys.argv[2], sys.argv[3], fname)
