# Shared by the benchmark scripts of real mounts (bench_w1.sh, bench_s3.sh),
# sourced after `cd` to the repository's root: how a row is timed and
# recorded, how a mount is waited for, how W1 is made, and how the medians
# and ratios are printed, so that the scripts' tables are computed alike.
#
# Every row is a line "NAME SECONDS" in $results (set by the caller); the
# dials of a mount a line "NAME DIALS" in $dials.

now() { date +%s.%N; }
record() { echo "$1 $2" >> "$results"; }

# time_cmd NAME CMD...: runs CMD once and records its seconds under NAME.
time_cmd() {
	local name=$1 t0 t1
	shift
	t0=$(now)
	"$@"
	t1=$(now)
	record "$name" "$(echo "$t1 - $t0" | bc)"
}

# wait_mount DIR: waits up to 10 s for DIR to become a mountpoint, or
# exits the script.
wait_mount() {
	local i
	for i in $(seq 400); do mountpoint -q "$1" && return; sleep 0.025; done
	echo "$1: not mounted" >&2
	exit 1
}

# free_port: a TCP port on 127.0.0.1 free at the time of asking.
free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# record_dials NAME METRICS: records under NAME the TCP connections the
# volfs whose --metrics-addr is METRICS opened (volfs_fetch_dials_total).
record_dials() {
	echo "$1 $(curl -sf "http://$2/metrics" | awk '/^volfs_fetch_dials_total / {print $2}')" >> "$dials"
}

# bench_py ARGS... <<'PY' ... PY: runs the Python script on stdin with
# ARGS as sys.argv[1:], after the definitions of benchlib_py.
bench_py() {
	local body
	body=$(cat)
	/usr/bin/python3 -c "$benchlib_py
$body" "$@"
}

benchlib_py=$(cat <<'PY'
import statistics, sys

def w1():
    """W1: 32 chunks of 64x256x256 uint8 (4 MiB each) of EM-like data, a
    smooth field plus noise, as a (z, y, x) array."""
    import numpy as np
    nz, cz, cy, cx = 32, 64, 256, 256
    rng = np.random.default_rng(11)
    z, y, x = np.meshgrid(np.arange(nz * cz), np.arange(cy), np.arange(cx), indexing="ij", sparse=True)
    field = 128 + 60 * np.sin(x / 23.0) * np.cos(y / 31.0) + 40 * np.sin(z / 17.0 + x / 41.0)
    return np.clip(field + rng.normal(0, 12, (nz * cz, cy, cx)), 0, 255).astype(np.uint8)

def write_precomputed(root, data, cz=64):
    """Writes data as a precomputed layer at root with raw chunks of cz
    slices stored as "<key>.gz" at gzip level 6 (CloudVolume convention)."""
    import gzip, json, os
    import numpy as np
    nz, cy, cx = data.shape[0] // cz, data.shape[1], data.shape[2]
    os.makedirs(os.path.join(root, "s0"))
    json.dump({"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8",
               "num_channels": 1, "scales": [{"key": "s0", "size": [cx, cy, nz * cz], "voxel_offset": [0, 0, 0],
               "resolution": [4, 4, 40], "chunk_sizes": [[cx, cy, cz]], "encoding": "raw"}]},
              open(os.path.join(root, "info"), "w"))
    for i in range(nz):
        # precomputed raw is x fastest: the C-order bytes of a (z, y, x) chunk.
        chunk = np.ascontiguousarray(data[i * cz:(i + 1) * cz]).tobytes()
        with open(os.path.join(root, "s0", f"0-{cx}_0-{cy}_{i*cz}-{(i+1)*cz}.gz"), "wb") as f:
            f.write(gzip.compress(chunk, compresslevel=6))

def gunzip_all(d, want):
    """Reads every .gz file of d in one process and decompresses it (zlib
    inflate); returns the seconds, listing included. The decoded bytes
    must add up to want."""
    import gzip, os, time
    t0 = time.perf_counter()
    total = 0
    for n in sorted(os.listdir(d)):
        if n.endswith(".gz"):
            with open(os.path.join(d, n), "rb") as f:
                total += len(gzip.decompress(f.read()))
    t = time.perf_counter() - t0
    assert total == want, total
    return t

def medians(path):
    """The runs of each row of a results file, in first-seen order, and
    their medians."""
    runs = {}
    for line in open(path):
        k, v = line.split()
        runs.setdefault(k, []).append(float(v))
    return runs, {k: statistics.median(v) for k, v in runs.items()}

def table(runs, med, title="row", width=28, mib=128.0, size={}):
    """Prints each row: its median seconds, MiB/s of size.get(row, mib),
    and its runs."""
    print(f"\n{title:{width}} {'median s':>9} {'MiB/s':>7}  runs")
    for k, v in runs.items():
        print(f"{k:{width}} {med[k]:9.3f} {size.get(k, mib)/med[k]:7.0f}  " + " ".join(f"{x:.3f}" for x in v))

def ratio_of(med, label, a, b, target=None, width=62):
    """Prints med[a] / med[b], held against target if given, when both
    rows ran."""
    if a in med and b in med:
        r = med[a] / med[b]
        t = "" if target is None else ("  target %.1fx: %s" % (target, "met" if r >= target else "missed"))
        print(f"{label:{width}} {r:6.2f}x{t}")

def dials_table(path, title, keep=lambda row: True):
    """Prints the TCP connections per run of each kept row of a dials
    file, held against the target of at most 16; nothing when no row is kept."""
    dials = {}
    for line in open(path):
        f = line.split()
        if keep(f[0]):
            dials.setdefault(f[0], []).append(int(float(f[1])) if len(f) > 1 else None)
    if not dials:
        return
    print(f"\n{title:40} {'max':>5}  runs  target: at most 16")
    for k, v in dials.items():
        got = [x for x in v if x is not None]
        m = max(got) if got else None
        print(f"{k:40} {m if m is not None else '-':>5}  " + " ".join(str(x) if x is not None else "-" for x in v) +
              ("" if m is None else "  " + ("met" if m <= 16 else "missed")))
PY
)
