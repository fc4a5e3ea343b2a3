"""Writes the reference volume of a view test with numpy.

Usage: gen_reference.py SPEC_JSON OUT

SPEC: shape (Grid order, x first), channels, dtype (numpy name), seed, chunk
(Grid order), fill, missing (chunks whose index sum % 7 == 3 hold the fill
value when true). OUT gets the samples little-endian in C order of
(channel, ..., z, y, x): channel slowest, x fastest.
"""
import itertools
import json
import math
import sys

import numpy as np

spec = json.loads(sys.argv[1])
shape = spec["shape"]
dt = np.dtype(spec["dtype"]).newbyteorder("<")
rng = np.random.default_rng(spec["seed"])
npshape = [spec["channels"]] + shape[::-1]
if dt.kind == "f":
    a = rng.normal(0, 1000, npshape).astype(dt)
else:
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, npshape, endpoint=True, dtype=dt)
if spec["missing"]:
    chunk = spec["chunk"]
    grid = [math.ceil(s / c) for s, c in zip(shape, chunk)]
    for idx in itertools.product(*[range(g) for g in grid]):
        if sum(idx) % 7 == 3:
            sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunk))
            a[(slice(None),) + sl[::-1]] = spec["fill"]
a.tofile(sys.argv[2])
