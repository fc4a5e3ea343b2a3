"""Writes Neuroglancer precomputed skeletons with a writer built from
google/neuroglancer src/datasource/precomputed/skeletons.md, and checks the
SWC view of a volfs mount with an SWC parser built to the standard format
(index type x y z radius parent; parents before children).

usage: ngobjcheck.py write SRC | verify SRC MNT
"""
import errno
import json
import math
import os
import struct
import sys
import time

# Stored model -> nanometres: 3x4 row-major, anisotropic with translation.
TRANSFORM = [8, 0, 0, 100,
             0, 8, 0, -200,
             0, 0, 40, 300.25]

# id -> (vertices, edges, radius per vertex, vtype per vertex). Edges are
# deliberately given child-first and out of order, and vertex 0 of object 7
# is a leaf, so that a converter that keeps stored order breaks the
# parents-before-children rule. Object 12 is a forest of two trees.
OBJECTS = {
    7: ([(1.5, 2.25, 3.0), (10.0, 2.0, 3.0), (20.125, 4.0, 5.5), (30.0, 6.0, 7.0), (20.0, 40.0, 1.0)],
        [(0, 1), (2, 1), (3, 2), (4, 2)],
        [0.5, 1.0, 1.5, 2.0, 2.5], [1, 3, 3, 3, 2]),
    12: ([(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (2.0, 0.0, 0.0), (50.0, 50.0, 50.0), (51.0, 50.0, 50.0), (1234.567, 89.125, 3.75)],
         [(1, 0), (1, 2), (4, 3), (5, 4)],
         [0.25, 0.25, 0.25, 3.0, 3.0, 0.125], [0, 1, 2, 3, 4, 5]),
}
RSCALE = (8 * 8 * 40) ** (1 / 3)


def encode(verts, edges, radius, vtype):
    b = struct.pack('<II', len(verts), len(edges))
    for v in verts:
        b += struct.pack('<3f', *v)
    for e in edges:
        b += struct.pack('<2I', *e)
    b += struct.pack('<%df' % len(radius), *radius)
    b += bytes(vtype)
    return b


def hostile():
    """Objects whose counts lie: each must read as EIO."""
    return {
        100: struct.pack('<II', 2**31, 0),                         # 2^31 vertices, 8 bytes
        101: encode([(0, 0, 0), (1, 1, 1)], [(0, 5)], [1, 1], [0, 0]),  # edge past the vertices
        102: encode([(0, 0, 0), (1, 1, 1)], [(0, 1)], [1, 1], [0, 0])[:-3],  # shorter than declared
        103: struct.pack('<II', 1, 2**31 - 1) + b'\0' * 12,        # 2^31-1 edges
    }


def write(src):
    seg = os.path.join(src, 'seg')
    os.makedirs(os.path.join(seg, '8_8_40'))
    info = {'type': 'segmentation', 'data_type': 'uint64', 'num_channels': 1, 'skeletons': 'skel',
            'scales': [{'key': '8_8_40', 'size': [64, 64, 16], 'resolution': [8, 8, 40],
                        'voxel_offset': [0, 0, 0], 'chunk_sizes': [[64, 64, 16]], 'encoding': 'raw'}]}
    with open(os.path.join(seg, 'info'), 'w') as f:
        json.dump(info, f)
    skel = os.path.join(seg, 'skel')
    os.makedirs(skel)
    with open(os.path.join(skel, 'info'), 'w') as f:
        json.dump({'@type': 'neuroglancer_skeletons', 'transform': TRANSFORM,
                   'vertex_attributes': [{'id': 'radius', 'data_type': 'float32', 'num_components': 1},
                                         {'id': 'vtype', 'data_type': 'uint8', 'num_components': 1}]}, f)
    for i, o in OBJECTS.items():
        with open(os.path.join(skel, str(i)), 'wb') as f:
            f.write(encode(*o))
    for i, b in hostile().items():
        with open(os.path.join(skel, str(i)), 'wb') as f:
            f.write(b)


def parse_swc(path):
    """Parses an SWC file to the standard: 7 columns, indices 1..n in file
    order, every parent -1 or an index written before. Returns the rows and
    the comment lines."""
    rows, comments = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith('#'):
                comments.append(line)
                continue
            c = line.split()
            assert len(c) == 7, line
            n, typ, x, y, z, r, p = int(c[0]), int(c[1]), float(c[2]), float(c[3]), float(c[4]), float(c[5]), int(c[6])
            assert n == len(rows) + 1, 'index %d at row %d' % (n, len(rows) + 1)
            assert p == -1 or 1 <= p < n, 'parent %d of %d not written before it' % (p, n)
            rows.append((n, typ, (x, y, z), r, p))
    return rows, comments


def to_um(v):
    m = TRANSFORM
    return tuple((m[4*k] * v[0] + m[4*k+1] * v[1] + m[4*k+2] * v[2] + m[4*k+3]) / 1000 for k in range(3))


def close(a, b, tol=1.01e-5):  # 0.01 nm in micrometres
    return all(abs(x - y) <= tol for x, y in zip(a, b))


def find(rows, p):
    hits = [r for r in rows if close(r[2], p)]
    assert len(hits) == 1, 'position %s found %d times' % (p, len(hits))
    return hits[0][0]


def verify(src, mnt):
    seg = os.path.join(mnt, 'seg')
    view = os.path.join(seg, 'skeletons.swc')
    assert 'skeletons.swc' in os.listdir(seg), os.listdir(seg)
    want = sorted('%d.swc' % i for i in list(OBJECTS) + list(hostile()))
    got = sorted(os.listdir(view))
    assert got == want, (got, want)
    # The pass-through directory stays exactly as stored.
    assert sorted(os.listdir(os.path.join(seg, 'skel'))) == sorted(os.listdir(os.path.join(src, 'seg', 'skel')))
    for name in os.listdir(os.path.join(src, 'seg', 'skel')):
        with open(os.path.join(src, 'seg', 'skel', name), 'rb') as a, open(os.path.join(seg, 'skel', name), 'rb') as b:
            assert a.read() == b.read(), name

    for i, (verts, edges, radius, vtype) in OBJECTS.items():
        path = os.path.join(view, '%d.swc' % i)
        rows, comments = parse_swc(path)
        assert os.stat(path).st_size == len(open(path, 'rb').read())
        assert len(rows) == len(verts), (i, len(rows))
        assert any('skel/%d' % i in c for c in comments), comments
        assert any('micrometre' in c for c in comments), comments
        idx = [find(rows, to_um(v)) for v in verts]
        got = {frozenset((r[0], r[4])) for r in rows if r[4] != -1}
        exp = {frozenset((idx[a], idx[b])) for a, b in edges}
        assert got == exp, (i, got, exp)
        roots = sum(1 for r in rows if r[4] == -1)
        assert roots == (2 if i == 12 else 1), (i, roots)
        for k, n in enumerate(idx):
            r = rows[n - 1][3]
            assert abs(r - radius[k] * RSCALE / 1000) <= 1.01e-5, (i, k, r)
        attrs = {}
        for c in comments:
            f = c.split()
            if f[1] == 'attribute' and f[3] == 'vtype':
                attrs[int(f[2])] = float(f[4])
        assert attrs == {idx[k]: float(t) for k, t in enumerate(vtype)}, (i, attrs)

    for i in hostile():
        path = os.path.join(view, '%d.swc' % i)
        t0 = time.monotonic()
        try:
            open(path, 'rb').read()
        except OSError as e:
            assert e.errno == errno.EIO, (i, e)
        else:
            raise AssertionError('hostile skeleton %d read' % i)
        assert time.monotonic() - t0 < 5, (i, time.monotonic() - t0)
    print('ok')


if __name__ == '__main__':
    {'write': lambda: write(sys.argv[2]), 'verify': lambda: verify(sys.argv[2], sys.argv[3])}[sys.argv[1]]()
