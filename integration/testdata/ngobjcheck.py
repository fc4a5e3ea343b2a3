"""Writes Neuroglancer precomputed skeletons and legacy meshes with a
writer built from google/neuroglancer src/datasource/precomputed/
skeletons.md and meshes.md, and checks the views of a volfs mount: SWC with
an SWC parser built to the standard format (index type x y z radius parent;
parents before children), OBJ and PLY with meshio and assimp.

usage: ngobjcheck.py write SRC | verify SRC MNT
"""
import errno
import json
import math
import os
import struct
import subprocess
import tempfile
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


# id -> fragments, each (vertices, triangles), merged in manifest order.
MESHES = {
    7: [([(0, 0, 0), (10, 0, 0), (0, 10, 0), (0, 0, 10.5)], [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]),
        ([(100, 100, 100), (110.25, 100, 100), (110.25, 110, 100), (100, 110, 100)], [(0, 1, 2), (0, 2, 3)])],
    12: [([(1, 2, 3), (4, 5, 6), (7, 8, 9.125)], [(0, 1, 2)])],
}


def fragment(verts, tris):
    b = struct.pack('<I', len(verts))
    for v in verts:
        b += struct.pack('<3f', *v)
    for t in tris:
        b += struct.pack('<3I', *t)
    return b


def hostile_meshes():
    """id -> (fragment names, {fragment name: bytes}): each must read as EIO."""
    ok = fragment(*MESHES[12][0])
    return {
        200: (['../skel/info'], {}),
        201: (['http://127.0.0.1:9/x'], {}),
        202: (['/etc/hostname'], {}),
        203: (['203:f%d' % i for i in range(10**6)], {}),  # the fragments are never written
        204: (['204:a'], {'204:a': struct.pack('<I', 2**31) + ok[4:]}),
        205: (['205:a'], {'205:a': fragment([(0, 0, 0)], [(0, 0, 1)])}),
        206: (['205:b'], {'205:b': ok[:-2]}),
    }


# Annotations (annotations.md): LINE, properties in info order whose record
# order differs (float32, int16, then uint8 and rgb, then padding).
ANN_PROPS = [{'id': 'kind', 'type': 'uint8', 'enum_values': [0, 1], 'enum_labels': ['axon', 'dendrite']},
             {'id': 'score', 'type': 'float32'},
             {'id': 'color', 'type': 'rgb'},
             {'id': 'level', 'type': 'int16'}]
# id -> (point a, point b, kind, score, color, level, related segments)
ANNS = {
    5: ((1.5, 2, 3), (4, 5.25, 6), 1, 0.75, (255, 0, 16), -3, [7, 12]),
    9: ((10, 20, 30), (40, 50, 60), 0, -2.5, (1, 2, 3), 300, []),
    123: ((0, 0, 0), (1e6, 2.125, 3), 1, 1e-3, (0, 0, 0), 0, [2**63 + 5]),
}


def ann_record(a, b, kind, score, color, level, rel):
    rec = struct.pack('<6f', *a, *b) + struct.pack('<f', score) + struct.pack('<h', level) + bytes([kind]) + bytes(color)
    rec += b'\0' * (-len(rec) % 4)
    return rec + struct.pack('<I', len(rel)) + b''.join(struct.pack('<Q', r) for r in rel)


def annotation_info(sharding=None):
    by_id = {'key': 'by_id'}
    if sharding:
        by_id['sharding'] = sharding
    return {'@type': 'neuroglancer_annotations_v1',
            'dimensions': {'x': [4e-9, 'm'], 'y': [4e-9, 'm'], 'z': [4e-8, 'm']},
            'lower_bound': [0, 0, 0], 'upper_bound': [1e6, 100, 100], 'annotation_type': 'LINE',
            'properties': ANN_PROPS, 'relationships': [{'id': 'segments', 'key': 'rel_segments'}],
            'by_id': by_id, 'spatial': []}


def write_annotations(src):
    for name, anns in (('ann', {i: ann_record(*a) for i, a in ANNS.items()}),
                       ('ann_bad', {1: ann_record(*ANNS[5])[:30]})):
        d = os.path.join(src, name)
        os.makedirs(os.path.join(d, 'by_id'))
        with open(os.path.join(d, 'info'), 'w') as f:
            json.dump(annotation_info(), f)
        for i, rec in anns.items():
            with open(os.path.join(d, 'by_id', str(i)), 'wb') as f:
                f.write(rec)


def f32(v):
    return struct.unpack('<f', struct.pack('<f', v))[0]


def verify_annotations(src, mnt):
    import csv
    d = os.path.join(mnt, 'ann')
    assert sorted(os.listdir(d)) == sorted(os.listdir(os.path.join(src, 'ann')) + ['annotations.csv']), os.listdir(d)
    check_annotations_csv(os.path.join(d, 'annotations.csv'), ANNS)
    expect_eio([os.path.join(mnt, 'ann_bad', 'annotations.csv')])


def check_annotations_csv(path, anns):
    """Reads path with Python's csv module and checks it against anns."""
    import csv
    with open(path, newline='') as f:
        rows = list(csv.reader(f))
    assert rows[0] == ['id', 'point_a_x', 'point_a_y', 'point_a_z', 'point_b_x', 'point_b_y', 'point_b_z',
                       'kind', 'score', 'color', 'level', 'segments'], rows[0]
    got = {int(r[0]): r for r in rows[1:]}
    assert len(got) == len(rows) - 1, 'an id in two rows'
    assert sorted(got) == sorted(anns), sorted(got)
    for i, (a, b, kind, score, color, level, rel) in anns.items():
        r = got[i]
        assert [f32(float(x)) for x in r[1:7]] == [f32(x) for x in a + b], (i, r)
        assert r[7] == ['axon', 'dendrite'][kind], (i, r)
        assert f32(float(r[8])) == f32(score), (i, r)  # float32 text round-trips
        assert r[9] == '#%02x%02x%02x' % color, (i, r)
        assert int(r[10]) == level, (i, r)
        assert [int(x) for x in r[11].split()] == rel, (i, r)


def write(src):
    write_annotations(src)
    seg = os.path.join(src, 'seg')
    os.makedirs(os.path.join(seg, '8_8_40'))
    info = {'type': 'segmentation', 'data_type': 'uint64', 'num_channels': 1, 'skeletons': 'skel', 'mesh': 'mesh',
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
    mesh = os.path.join(seg, 'mesh')
    os.makedirs(mesh)
    with open(os.path.join(mesh, 'info'), 'w') as f:
        json.dump({'@type': 'neuroglancer_legacy_mesh'}, f)
    for i, frags in MESHES.items():
        names = ['%d:0:%d' % (i, k) for k in range(len(frags))]
        with open(os.path.join(mesh, '%d:0' % i), 'w') as f:
            json.dump({'fragments': names}, f)
        for n, fr in zip(names, frags):
            with open(os.path.join(mesh, n), 'wb') as f:
                f.write(fragment(*fr))
    for i, (names, files) in hostile_meshes().items():
        with open(os.path.join(mesh, '%d:0' % i), 'w') as f:
            json.dump({'fragments': names}, f)
        for n, b in files.items():
            with open(os.path.join(mesh, n), 'wb') as f:
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

    for i, obj in OBJECTS.items():
        check_skeleton(view, i, obj, 2 if i == 12 else 1)

    verify_meshes(seg)
    verify_annotations(src, mnt)
    hostile_paths = [os.path.join(view, '%d.swc' % i) for i in hostile()]
    for i in hostile_meshes():
        hostile_paths += [os.path.join(seg, 'mesh.obj', '%d.obj' % i), os.path.join(seg, 'mesh.ply', '%d.ply' % i)]
    expect_eio(hostile_paths)
    print('ok')


def check_skeleton(view, i, obj, nroots):
    """Reads view/<i>.swc with parse_swc and checks it against obj, as
    written: positions, edges as sets, roots, radii, the vtype attribute."""
    verts, edges, radius, vtype = obj
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
    assert roots == nroots, (i, roots)
    for k, n in enumerate(idx):
        r = rows[n - 1][3]
        assert abs(r - radius[k] * RSCALE / 1000) <= 1.01e-5, (i, k, r)
    attrs = {}
    for c in comments:
        f = c.split()
        if f[1] == 'attribute' and f[3] == 'vtype':
            attrs[int(f[2])] = float(f[4])
    assert attrs == {idx[k]: float(t) for k, t in enumerate(vtype)}, (i, attrs)


def expect_eio(paths):
    """Each path must fail to read with EIO within 5 seconds."""
    for path in paths:
        t0 = time.monotonic()
        try:
            open(path, 'rb').read()
        except OSError as e:
            assert e.errno == errno.EIO, (path, e)
        else:
            raise AssertionError('hostile object %s read' % path)
        assert time.monotonic() - t0 < 5, (path, time.monotonic() - t0)


def merged(i):
    pts, tris = [], []
    for verts, t in MESHES[i]:
        base = len(pts)
        pts += [tuple(struct.unpack('<3f', struct.pack('<3f', *v))) for v in verts]
        tris += [tuple(base + k for k in tri) for tri in t]
    return pts, tris


def assimp_faces(path):
    out = subprocess.run(['assimp', 'info', path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.strip().startswith('Faces:'):
            return int(line.split(':')[1])
    raise AssertionError('assimp info %s: no face count:\n%s' % (path, out))


def verify_meshes(seg):
    import meshio
    ids = sorted(list(MESHES) + list(hostile_meshes()))
    for view, ext in (('mesh.obj', 'obj'), ('mesh.ply', 'ply')):
        got = sorted(os.listdir(os.path.join(seg, view)))
        assert got == sorted('%d.%s' % (i, ext) for i in ids), (view, got)
    for i in MESHES:
        pts, tris = merged(i)
        for ext in ('obj', 'ply'):
            path = os.path.join(seg, 'mesh.' + ext, '%d.%s' % (i, ext))
            m = meshio.read(path)
            got_pts = [tuple(float(c) for c in p) for p in m.points]
            assert got_pts == [tuple(float(c) for c in p) for p in pts], (path, got_pts, pts)
            got_tris = [tuple(int(k) for k in t) for t in m.cells_dict['triangle']]
            assert got_tris == tris, (path, got_tris, tris)
            assert assimp_faces(path) == len(tris), (path, assimp_faces(path), len(tris))
            # assimp converts the view to another format: the positions survive.
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, 'x.stl')
                subprocess.run(['assimp', 'export', path, out, '-fstla'], capture_output=True, check=True)
                seen = set()
                for line in open(out):
                    f = line.split()
                    if f and f[0] == 'vertex':
                        seen.add(tuple(float(c) for c in f[1:4]))
                want = {tuple(round(c, 3) for c in pts[k]) for t in tris for k in t}
                assert {tuple(round(c, 3) for c in p) for p in seen} == want, (path, seen, want)


# ---------------------------------------------------------------- sharded
# Sharded skeletons and a sharded annotation by_id index (sharded.md), in
# shard files written by decode/testdata/precomputed_writer.py's shard
# writer (built from the specification, murmurhash3 checked against
# tensorstore's vectors), keyed by the object id as is.
def shard_writer():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'decode', 'testdata'))
    import precomputed_writer
    return precomputed_writer


def sharding(hash_name, pre, mb, sb, index, data):
    return {'@type': 'neuroglancer_uint64_sharded_v1', 'hash': hash_name, 'preshift_bits': pre,
            'minishard_bits': mb, 'shard_bits': sb, 'minishard_index_encoding': index, 'data_encoding': data}


SKEL_SHARDING = sharding('murmurhash3_x86_128', 1, 2, 2, 'gzip', 'gzip')
ANN_SHARDING = sharding('identity', 0, 1, 1, 'raw', 'gzip')


def sharded_objects():
    """id -> skeleton: OBJECTS, and random trees under ids up to 2^64-1."""
    import random
    rnd = random.Random(33)
    objs = dict(OBJECTS)
    ids = {rnd.randrange(1, 2**64) for _ in range(40)} | {2**64 - 1, 2**63 + 17, 1, 2, 3}
    for i in sorted(ids):
        n = rnd.randrange(1, 30)
        verts = [(rnd.uniform(-1e4, 1e4), rnd.uniform(0, 1e4), rnd.uniform(0, 500)) for _ in range(n)]
        edges = [(k, rnd.randrange(k)) for k in range(1, n)]
        rnd.shuffle(edges)
        objs[i] = (verts, edges, [rnd.uniform(0, 5) for _ in range(n)], [rnd.randrange(256) for _ in range(n)])
    return objs


def sharded_anns():
    import random
    rnd = random.Random(34)
    anns = dict(ANNS)
    for _ in range(60):
        i = rnd.randrange(2**64)
        anns[i] = (tuple(rnd.uniform(0, 1e5) for _ in range(3)), tuple(rnd.uniform(0, 1e5) for _ in range(3)),
                   rnd.randrange(2), rnd.uniform(-1, 1), tuple(rnd.randrange(256) for _ in range(3)),
                   rnd.randrange(-2**15, 2**15), [rnd.randrange(2**64) for _ in range(rnd.randrange(4))])
    return anns


def put(path, data, mode='wb'):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(data)


def write_sharded(src):
    w = shard_writer()
    seg = os.path.join(src, 'segsh')
    put(os.path.join(seg, 'info'), json.dumps({
        'type': 'segmentation', 'data_type': 'uint64', 'num_channels': 1, 'skeletons': 'skel', 'mesh': 'mesh',
        'scales': [{'key': 's0', 'size': [64, 64, 16], 'resolution': [8, 8, 40], 'voxel_offset': [0, 0, 0],
                    'chunk_sizes': [[64, 64, 16]], 'encoding': 'raw'}]}), 'w')
    put(os.path.join(seg, 'skel', 'info'), json.dumps({
        '@type': 'neuroglancer_skeletons', 'transform': TRANSFORM, 'sharding': SKEL_SHARDING,
        'vertex_attributes': [{'id': 'radius', 'data_type': 'float32', 'num_components': 1},
                              {'id': 'vtype', 'data_type': 'uint8', 'num_components': 1}]}), 'w')
    objs = {i: encode(*o) for i, o in sharded_objects().items()}
    objs.update(hostile())
    files, _ = w.shard_files(SKEL_SHARDING, objs)
    assert len(files) > 1, 'one shard file only'
    for name, data in files.items():
        put(os.path.join(seg, 'skel', name), data)
    put(os.path.join(seg, 'skel', 'README'), b'not a shard\n')  # listed by the pass-through only
    # A multi-resolution (Draco) mesh directory: not converted, passed through.
    put(os.path.join(seg, 'mesh', 'info'), json.dumps({
        '@type': 'neuroglancer_multilod_draco', 'vertex_quantization_bits': 10, 'transform': TRANSFORM,
        'lod_scale_multiplier': 1.0, 'sharding': ANN_SHARDING}), 'w')
    for name, data in w.shard_files(ANN_SHARDING, {7: b'draco bytes', 12: b'more draco bytes'})[0].items():
        put(os.path.join(seg, 'mesh', name), data)

    for name, anns in (('annsh', {i: ann_record(*a) for i, a in sharded_anns().items()}),
                       ('annsh_bad', {1: ann_record(*ANNS[5]), 2: ann_record(*ANNS[5])[:30]})):
        d = os.path.join(src, name)
        put(os.path.join(d, 'info'), json.dumps(annotation_info(ANN_SHARDING)), 'w')
        for fname, data in w.shard_files(ANN_SHARDING, anns)[0].items():
            put(os.path.join(d, 'by_id', fname), data)


def verify_sharded(src, mnt):
    seg = os.path.join(mnt, 'segsh')
    view = os.path.join(seg, 'skeletons.swc')
    objs = sharded_objects()
    want = sorted('%d.swc' % i for i in list(objs) + list(hostile()))
    got = sorted(os.listdir(view))
    assert got == want, (len(got), len(want), sorted(set(got) ^ set(want))[:10])
    assert sorted(os.listdir(os.path.join(seg, 'skel'))) == sorted(os.listdir(os.path.join(src, 'segsh', 'skel')))
    for i, obj in objs.items():
        check_skeleton(view, i, obj, 2 if i == 12 else 1)
    for v in ('mesh.obj', 'mesh.ply'):
        assert os.listdir(os.path.join(seg, v)) == [], (v, os.listdir(os.path.join(seg, v)))
    for name in os.listdir(os.path.join(src, 'segsh', 'mesh')):
        with open(os.path.join(src, 'segsh', 'mesh', name), 'rb') as a, open(os.path.join(seg, 'mesh', name), 'rb') as b:
            assert a.read() == b.read(), name
    for name in ('99.swc', '18446744073709551614.swc', '007.swc'):
        try:
            os.stat(os.path.join(view, name))
        except OSError as e:
            assert e.errno == errno.ENOENT, (name, e)
        else:
            raise AssertionError('%s exists' % name)
    expect_eio([os.path.join(view, '%d.swc' % i) for i in hostile()])
    check_annotations_csv(os.path.join(mnt, 'annsh', 'annotations.csv'), sharded_anns())
    assert 'annotations.csv' in os.listdir(os.path.join(mnt, 'annsh'))
    expect_eio([os.path.join(mnt, 'annsh_bad', 'annotations.csv')])
    print('ok')


if __name__ == '__main__':
    {'write': lambda: write(sys.argv[2]), 'verify': lambda: verify(sys.argv[2], sys.argv[3]),
     'write-sharded': lambda: write_sharded(sys.argv[2]),
     'verify-sharded': lambda: verify_sharded(sys.argv[2], sys.argv[3])}[sys.argv[1]]()
