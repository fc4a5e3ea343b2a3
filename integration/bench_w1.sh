#!/usr/bin/env bash
# Workload W1 of issue 11 through real mounts, side by side in one run:
# 32 chunks of 4 MiB uint8 EM-like data (a smooth field plus noise), gzip
# level 6, written by Debian's python3-zarr as a zarr v2 array and as a
# precomputed twin with identical decoded bytes ("raw" chunks stored as
# "<key>.gz", CloudVolume's convention), served from local disk and from a
# loopback Go static server (testdata/origin). Every row is the median of
# COUNT runs, each through a fresh mount (chunk cache cold) unless it says
# warm; the page cache of the source files is warm for every reader alike.
# Usage: integration/bench_w1.sh [COUNT]. Needs root (mount, drop_caches),
# python3-zarr, and python3-fsspec with python3-aiohttp for the HTTP row
# of zarr-python (skipped without them).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
work=$(mktemp -d /tmp/volfs-w1.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
origin_pid= volfs_pid=
cleanup() {
	if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
	[ -n "$volfs_pid" ] && kill "$volfs_pid" 2>/dev/null || true
	[ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export LC_ALL=C

go build -o "$work/volfs" ./cmd/volfs
go build -o "$work/origin" ./integration/testdata/origin

/usr/bin/python3 - "$work/data" <<'PY'
import gzip, json, os, sys
import numpy as np, zarr
from numcodecs import GZip
root = sys.argv[1]
nz, cz, cy, cx = 32, 64, 256, 256          # 32 chunks of 64x256x256 uint8 = 4 MiB
rng = np.random.default_rng(11)
z, y, x = np.meshgrid(np.arange(nz * cz), np.arange(cy), np.arange(cx), indexing="ij", sparse=True)
field = 128 + 60 * np.sin(x / 23.0) * np.cos(y / 31.0) + 40 * np.sin(z / 17.0 + x / 41.0)
data = np.clip(field + rng.normal(0, 12, (nz * cz, cy, cx)), 0, 255).astype(np.uint8)
z = zarr.open(os.path.join(root, "w1.zarr"), mode="w", shape=data.shape, chunks=(cz, cy, cx),
              dtype="u1", compressor=GZip(level=6))
z[:] = data
pre = os.path.join(root, "w1.precomputed")
os.makedirs(os.path.join(pre, "s0"))
json.dump({"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8",
           "num_channels": 1, "scales": [{"key": "s0", "size": [cx, cy, nz * cz], "voxel_offset": [0, 0, 0],
           "resolution": [4, 4, 40], "chunk_sizes": [[cx, cy, cz]], "encoding": "raw"}]},
          open(os.path.join(pre, "info"), "w"))
for i in range(nz):
    # precomputed raw is x fastest: the C-order bytes of a (z, y, x) chunk.
    chunk = np.ascontiguousarray(data[i * cz:(i + 1) * cz]).tobytes()
    with open(os.path.join(pre, "s0", f"0-{cx}_0-{cy}_{i*cz}-{(i+1)*cz}.gz"), "wb") as f:
        f.write(gzip.compress(chunk, compresslevel=6))
PY
data=$work/data
"$work/origin" "$data" > "$work/origin.url" &
origin_pid=$!
for _ in $(seq 100); do [ -s "$work/origin.url" ] && break; sleep 0.05; done
url=$(cat "$work/origin.url")
results=$work/results
: > "$results"

# mount SOURCE FLAGS...: serve SOURCE at $mnt in the background.
mount_volfs() {
	local src=$1
	shift
	"$work/volfs" mount --log-level warn "$@" "$src" "$mnt" &
	volfs_pid=$!
	for _ in $(seq 400); do mountpoint -q "$mnt" && return; sleep 0.025; done
	echo "volfs did not mount" >&2
	exit 1
}
unmount_volfs() {
	umount "$mnt"
	wait "$volfs_pid" || true
	volfs_pid=
}
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

files() { ls "$mnt/s0" | grep "^0-" | sed "s|^|$mnt/s0/|"; }
cat_all() { cat "$mnt"/s0/0-* > /dev/null; } # the chunks, not the views beside them
cat_shuffled() { files | shuf --random-source=<(yes) | xargs cat > /dev/null; }
cat_readers() {
	local k=$1 i pids=()
	files > "$work/list"
	for ((i = 0; i < k; i++)); do
		# Reader i reads the i-th contiguous share of the sorted names.
		awk -v k="$k" -v i="$i" -v n="$(wc -l < "$work/list")" 'NR > i*n/k && NR <= (i+1)*n/k' "$work/list" | xargs cat > /dev/null &
		pids+=($!)
	done
	wait "${pids[@]}" # not a bare wait: the volfs server is a child too
}
# direct_all BYTES: one process reads every chunk file with O_DIRECT in
# requests of BYTES, bypassing the page cache, and prints the seconds its
# reads took (dd per file would time 32 process starts).
direct_all() {
	/usr/bin/python3 - "$1" "$mnt"/s0/0-* <<'PY'
import mmap, os, sys, time
bs = int(sys.argv[1])
buf = mmap.mmap(-1, bs)  # page-aligned, as O_DIRECT wants
t0 = time.perf_counter()
for p in sys.argv[2:]:
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    while os.readv(fd, [buf]) == bs:
        pass
    os.close(fd)
print(time.perf_counter() - t0)
PY
}

zarr_read() {
	/usr/bin/python3 - "$1" <<'PY'
import sys, time, zarr
src = sys.argv[1]
if src.startswith("http"):
    import fsspec
    store = fsspec.get_mapper(src)
else:
    store = src
z = zarr.open(store, mode="r")
t0 = time.perf_counter()
for i in range(z.shape[0] // z.chunks[0]):
    z[i * z.chunks[0]:(i + 1) * z.chunks[0]]
print(time.perf_counter() - t0)
PY
}
have_fsspec=$(/usr/bin/python3 -c 'import fsspec, aiohttp' 2>/dev/null && echo yes || echo no)

for run in $(seq "$count"); do
	echo "run $run of $count" >&2
	record zarr-local "$(zarr_read "$data/w1.zarr")"
	if [ "$have_fsspec" = yes ]; then record zarr-http "$(zarr_read "$url/w1.zarr")"; fi

	for src in "$data/w1.precomputed" "$url/w1.precomputed"; do
		where=local
		case $src in http*) where=http ;; esac
		mount_volfs "$src"
		time_cmd "volfs-$where-cat" cat_all
		unmount_volfs
		mount_volfs "$src" --read-ahead 0
		time_cmd "volfs-$where-cat-ra0" cat_all
		unmount_volfs
	done
	for k in 2 4; do
		mount_volfs "$data/w1.precomputed"
		time_cmd "volfs-local-readers$k" cat_readers "$k"
		unmount_volfs
	done
	mount_volfs "$data/w1.precomputed"
	time_cmd volfs-local-random cat_shuffled
	unmount_volfs
	mount_volfs "$data/w1.precomputed" --read-ahead 0
	time_cmd volfs-local-random-ra0 cat_shuffled
	unmount_volfs

	# FUSE transfer: the chunk cache warm, the page cache bypassed.
	mount_volfs "$data/w1.precomputed"
	cat_all
	direct_all 1048576 > /dev/null # the first O_DIRECT reads of a file are not timed either
	record volfs-warm-direct-128k "$(direct_all 131072)"
	record volfs-warm-direct-1m "$(direct_all 1048576)"
	unmount_volfs

	# Disk cache: fill it through one mount, then read it through another.
	rm -rf "$work/dc"
	mount_volfs "$url/w1.precomputed" --cache-dir "$work/dc"
	time_cmd volfs-http-cat-fill-disk cat_all
	unmount_volfs
	mount_volfs "$url/w1.precomputed" --cache-dir "$work/dc"
	time_cmd volfs-http-cat-disk-hit cat_all
	unmount_volfs
done

/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
mib = 128.0
print(f"\n{'row':28} {'median s':>9} {'MiB/s':>7}  runs")
for k, v in runs.items():
    print(f"{k:28} {med[k]:9.3f} {mib/med[k]:7.0f}  " + " ".join(f"{x:.3f}" for x in v))
def ratio(label, a, b, target=None):
    if a in med and b in med:
        r = med[a] / med[b]
        t = "" if target is None else ("  target %.1fx: %s" % (target, "met" if r >= target else "missed"))
        print(f"{label:62} {r:6.2f}x{t}")
print()
ratio("zarr-python local / volfs local cat (speed-up)", "zarr-local", "volfs-local-cat", 2.0)
ratio("zarr-python+fsspec HTTP / volfs HTTP cat (speed-up)", "zarr-http", "volfs-http-cat", 2.5)
ratio("read-ahead off / on, local cat", "volfs-local-cat-ra0", "volfs-local-cat", 1.5)
ratio("read-ahead off / on, HTTP cat", "volfs-http-cat-ra0", "volfs-http-cat")
ratio("1 reader / 2 readers, local", "volfs-local-cat", "volfs-local-readers2", 1.7)
ratio("1 reader / 4 readers, local", "volfs-local-cat", "volfs-local-readers4")
ratio("random order: read-ahead off / on (>= 1 is no slower)", "volfs-local-random-ra0", "volfs-local-random", 1.0)
ratio("origin / disk-cache hit, HTTP", "volfs-http-cat", "volfs-http-cat-disk-hit")
ratio("origin + filling the disk cache / origin alone", "volfs-http-cat-fill-disk", "volfs-http-cat")
for bs in ("128k", "1m"):
    k = "volfs-warm-direct-" + bs
    if k in med:
        gbs = mib * 2**20 / med[k] / 1e9
        print(f"{'FUSE transfer, chunk cache warm, O_DIRECT ' + bs:62} {gbs:6.2f} GB/s" + ("  target 2 GB/s: %s" % ("met" if gbs >= 2 else "missed") if bs == "1m" else ""))
PY
