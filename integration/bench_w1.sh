#!/usr/bin/env bash
# Workload W1 of issue 11 through real mounts, side by side in one run:
# 32 chunks of 4 MiB uint8 EM-like data (a smooth field plus noise), gzip
# level 6, written by Debian's python3-zarr as a zarr v2 array and as a
# precomputed twin with identical decoded bytes ("raw" chunks stored as
# "<key>.gz", CloudVolume's convention), served from local disk and from a
# loopback Go static server (testdata/origin). Every row is the median of
# COUNT runs, each through a fresh mount (chunk cache cold) unless it says
# warm; the page cache of the source files is warm for every reader alike.
# W1 is also written as zarr with Zstd(level=3) (the zstd twin), read by
# zarr-python and through volfs; the gzip zarr is read through volfs too,
# to show that the format does not matter. For each volfs mount the script
# keeps the peak RSS of the volfs process (VmHWM, read just before
# unmounting) and the TCP connections it opened (volfs_fetch_dials_total
# from --metrics-addr), and prints them in tables of their own.
#
# Readers other than volfs: zarr-python from disk, and with fsspec over
# HTTP; rclone mount of the same origin (--vfs-cache-mode off, so rclone
# streams each object from the origin with its in-memory read buffer and
# keeps nothing on disk, as volfs with no --cache-dir) with the gunzip in
# the reader, one python3 process that reads every .gz object and
# gzip.decompress-es it (zlib's inflate, the one numcodecs' GZip and
# zarr-python use, so the row differs from zarr-http in the transport, not
# the decoder); and `volfs cat` of the same files in one process (no FUSE).
#
# Rows added for issue 18: threads (one python3 process whose 8 threads take
# whole chunk files from a shared queue in lexical order, through a fresh
# mount, with and without read-ahead, against zarr-python reading the array
# with 8 threads over chunk-aligned slices); raw (W1 as an uncompressed
# zarr); scale (W1's chunks hard-linked into precomputed scales of 256 and
# 2048 chunks, 1 GiB and 8 GiB decoded, so that only the decoded size
# grows: throughput and peak RSS, and a shuffled reader of the 2048 chunks
# with and without read-ahead); quota (volfs in a cgroup with a CPU quota
# of 2 CPUs, Go's quota-derived GOMAXPROCS against 4 Ps). zarr-python is
# timed twice in one process and both are printed: its first read (fresh
# memory, what a script pays) and its second (its best case, which the
# targets are held against).
#
# ROWS="core threads raw scale quota" (the default: all) picks the groups
# of rows to run; zarr-python's rows run with the groups that compare
# against them.
#
# With BASE=REV set, the volfs of git revision REV is built too and read
# W1 through a fresh mount beside this tree's in every run (rows base-*),
# so that a change is measured against its parent in one run.
#
# With SERVE_ONLY=1 (integration/bench.sh serve) only the rows of `volfs
# serve` read by curl and of the FUSE mount read by cat beside them run.
#
# Usage: [BASE=REV] [SERVE_ONLY=1] integration/bench_w1.sh [COUNT]. Needs root (mount, drop_caches),
# python3-zarr, curl, GNU time (/usr/bin/time); python3-fsspec with
# python3-aiohttp for the HTTP row of zarr-python, and rclone (with fuse3)
# for the rclone row, each row skipped without them:
#   apt-get install -y python3-zarr python3-fsspec python3-aiohttp rclone fuse3 curl time
set -euo pipefail
cd "$(dirname "$0")/.."
source integration/benchlib.sh
count=${1:-3}
work=$(mktemp -d /tmp/volfs-w1.XXXXXX)
mnt=$work/mnt mnt2=$work/rclone
mkdir -p "$mnt" "$mnt2"
origin_pid= volfs_pid= rclone_pid=
cleanup() {
	if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
	if mountpoint -q "$mnt2"; then umount "$mnt2" || umount -l "$mnt2"; fi
	[ -n "$volfs_pid" ] && kill "$volfs_pid" 2>/dev/null || true
	[ -n "$rclone_pid" ] && kill "$rclone_pid" 2>/dev/null || true
	[ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
	[ -n "${quota_cg:-}" ] && rmdir "$quota_cg" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export LC_ALL=C

go build -o "$work/volfs" ./cmd/volfs
if [ -n "${BASE:-}" ]; then
	git worktree add -q --detach "$work/base" "$BASE"
	(cd "$work/base" && go build -o "$work/volfs-base" ./cmd/volfs)
	git worktree remove --force "$work/base"
fi
go build -o "$work/origin" ./integration/testdata/origin

bench_py "$work/data" <<'PY'
import os
import zarr
from numcodecs import GZip, Zstd
root = sys.argv[1]
cz, cy, cx = 64, 256, 256
data = w1()
z = zarr.open(os.path.join(root, "w1.zarr"), mode="w", shape=data.shape, chunks=(cz, cy, cx),
              dtype="u1", compressor=GZip(level=6))
z[:] = data
zs = zarr.open(os.path.join(root, "w1z.zarr"), mode="w", shape=data.shape, chunks=(cz, cy, cx),
               dtype="u1", compressor=Zstd(level=3))
zs[:] = data
zr = zarr.open(os.path.join(root, "w1raw.zarr"), mode="w", shape=data.shape, chunks=(cz, cy, cx),
               dtype="u1", compressor=None)
zr[:] = data
write_precomputed(os.path.join(root, "w1.precomputed"), data, cz)
PY
data=$work/data
want() { [ -z "${ROWS:-}" ] || [[ " $ROWS " == *" $1 "* ]]; }
# Scales of 256 and 2048 chunks: W1's gzip chunks hard-linked in turn (no
# disk, and the source's page cache is the same warm one).
if want scale; then
	for n in 256 2048; do
		d=$data/w1s$n.precomputed
		mkdir -p "$d/s0"
		sed "s/\"size\": \[256, 256, 2048\]/\"size\": [256, 256, $((n * 64))]/" "$data/w1.precomputed/info" > "$d/info"
		grep -q "$((n * 64))" "$d/info" || { echo "scale $n: info not rewritten" >&2; exit 1; }
		for ((i = 0; i < n; i++)); do
			j=$((i % 32))
			ln "$data/w1.precomputed/s0/0-256_0-256_$((j * 64))-$((j * 64 + 64)).gz" "$d/s0/0-256_0-256_$((i * 64))-$((i * 64 + 64)).gz"
		done
	done
fi
"$work/origin" "$data" > "$work/origin.url" &
origin_pid=$!
for _ in $(seq 100); do [ -s "$work/origin.url" ] && break; sleep 0.05; done
url=$(cat "$work/origin.url")
# Every row is a line "NAME SECONDS" in results; every volfs process a line
# "NAME PEAK_KIB BUDGET_MIB" in rss (BUDGET_MIB its --cache-size), and every
# mount a line "NAME DIALS" in dials.
results=$work/results rss=$work/rss dials=$work/dials cpu=$work/cpu sizes=$work/sizes
: > "$sizes"
: > "$cpu"
: > "$results"
: > "$rss"
: > "$dials"
metrics=127.0.0.1:$(free_port)
default_cache_mib=512 # cmd/volfs/flags.go: --cache-size 512MiB

# mount SOURCE FLAGS...: serve SOURCE at $mnt in the background, with its
# metrics at $metrics. FLAGS may set --cache-size in MiB.
mount_volfs() {
	local src=$1
	shift
	budget=$default_cache_mib
	local args=("$@") i
	for ((i = 0; i < ${#args[@]}; i++)); do
		if [ "${args[i]}" = --cache-size ]; then budget=${args[i + 1]%MiB}; fi
	done
	"${bin:-$work/volfs}" mount --log-level warn --metrics-addr "$metrics" "$@" "$src" "$mnt" &
	volfs_pid=$!
	wait_mount "$mnt"
}
# unmount_volfs NAME: records the peak RSS and the dials of the mount under
# NAME, then unmounts.
unmount_volfs() {
	echo "$1 $(awk '/^VmHWM:/ {print $2}' "/proc/$volfs_pid/status") $budget" >> "$rss"
	# utime + stime, in clock ticks (fields 14 and 15 of /proc/PID/stat).
	echo "$1 $(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$volfs_pid/stat")" >> "$cpu"
	record_dials "$1" "$metrics"
	umount "$mnt"
	wait "$volfs_pid" || true
	volfs_pid=
}
files() { ls "$mnt/s0" | grep "^0-" | sed "s|^|$mnt/s0/|"; }
# cat_all [GLOB]: one cat of the chunk files GLOB under the mount (s0/0-*:
# the precomputed chunks, not the views beside them; [0-9]* for a zarr
# array's).
cat_all() {
	local glob=${1:-s0/0-*}
	cat "$mnt"/$glob > /dev/null
}
# incat NAME SOURCE: `volfs cat` of the chunk files of cat_all, in its order,
# in one process; records its peak RSS under NAME.
incat() {
	local paths
	mapfile -t paths < <(ls "$data/w1.precomputed/s0" | sed 's/\.gz$//; s|^|s0/|' | sort)
	/usr/bin/time -f %M -o "$work/time.out" "$work/volfs" cat --log-level warn "$2" "${paths[@]}" > /dev/null
	echo "$1 $(tail -n 1 "$work/time.out") $default_cache_mib" >> "$rss"
}
# cat_stored_raw: the raw zarr's stored chunk files read straight from the
# page cache, no FUSE: the ceiling of FUSE passthrough, which would hand
# such files to the kernel.
cat_stored_raw() { cat "$data/w1raw.zarr"/[0-9]* > /dev/null; }
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

# zarr_read SRC [THREADS]: zarr-python reads every chunk-aligned slab of
# SRC twice in one fresh process (with THREADS threads sharing out the
# slabs, numcodecs releasing the GIL); prints the seconds of the first
# read and of the second.
zarr_read() {
	/usr/bin/python3 - "$1" "${2:-1}" <<'PY'
import sys, time, zarr
from concurrent.futures import ThreadPoolExecutor
src, threads = sys.argv[1], int(sys.argv[2])
if src.startswith("http"):
    import fsspec
    store = fsspec.get_mapper(src)
else:
    store = src
z = zarr.open(store, mode="r")
n, c = z.shape[0] // z.chunks[0], z.chunks[0]
def slab(i):
    return z[i * c:(i + 1) * c]
out = []
for _ in range(2):
    t0 = time.perf_counter()
    if threads == 1:
        for i in range(n):
            slab(i)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(slab, range(n)))
    out.append(time.perf_counter() - t0)
print(*out)
PY
}
# record_zarr NAME SRC [THREADS]: zarr_read's two timings as NAME (first
# read) and NAME-best (second read).
record_zarr() {
	local t
	t=$(zarr_read "$2" "${3:-1}")
	record "$1" "${t% *}"
	record "$1-best" "${t#* }"
}
# pool_read THREADS: one python3 process whose THREADS threads take whole
# chunk files of the mounted precomputed scale from a shared queue in
# lexical order (integration/threads_test.go's reader, without the output).
pool_read() {
	/usr/bin/python3 - "$mnt/s0" "$1" <<'PY'
import os, queue, sys, threading
d, n = sys.argv[1], int(sys.argv[2])
q = queue.Queue()
for x in sorted(x for x in os.listdir(d) if x.startswith("0-")):
    q.put(x)
sizes = []  # list.append is atomic; a += on a shared int is not
def work():
    while True:
        try:
            x = q.get_nowait()
        except queue.Empty:
            return
        with open(os.path.join(d, x), "rb") as f:
            sizes.append(len(f.read()))
ts = [threading.Thread(target=work) for _ in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert sum(sizes) == 128 << 20, sum(sizes)
PY
}
# quota_volfs SOURCE FLAGS...: mount_volfs inside a cgroup with a CPU quota
# of 2 CPUs (v2 cpu.max, or v1 cpu.cfs_quota_us); quota_cg is empty when
# this machine offers neither.
quota_cg=
if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	quota_cg=/sys/fs/cgroup/volfs-w1-$$
	mkdir "$quota_cg" && echo "200000 100000" > "$quota_cg/cpu.max"
elif [ -w /sys/fs/cgroup/cpu ]; then
	quota_cg=/sys/fs/cgroup/cpu/volfs-w1-$$
	mkdir "$quota_cg" && echo 200000 > "$quota_cg/cpu.cfs_quota_us"
fi
[ -n "$quota_cg" ] || echo "no writable cgroup cpu controller: no quota rows" >&2
quota_volfs() {
	local src=$1
	shift
	budget=$default_cache_mib
	sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$quota_cg" \
		"$work/volfs" mount --log-level warn --metrics-addr "$metrics" "$@" "$src" "$mnt" &
	volfs_pid=$!
	wait_mount "$mnt"
}
have_fsspec=$(/usr/bin/python3 -c 'import fsspec, aiohttp' 2>/dev/null && echo yes || echo no)
[ "$have_fsspec" = yes ] || echo "no python3-fsspec or python3-aiohttp: no zarr-http row" >&2

# rclone_gunzip: rclone mount of the origin's precomputed twin, fresh (so
# nothing is cached), then one python3 process that reads every .gz object
# of s0 and decompresses it; prints the seconds the reads took, listing
# included, as zarr_read does.
have_rclone=$(command -v rclone > /dev/null && command -v fusermount3 > /dev/null && echo yes || echo no)
[ "$have_rclone" = yes ] || echo "no rclone or fusermount3 (fuse3): no rclone row" >&2
rclone_gunzip() {
	rclone mount :http: "$mnt2" --http-url "$url/w1.precomputed" --read-only \
		--vfs-cache-mode off --log-level ERROR &
	rclone_pid=$!
	wait_mount "$mnt2"
	bench_py "$mnt2/s0" <<'PY'
print(gunzip_all(sys.argv[1], 128 << 20))
PY
	fusermount3 -u "$mnt2"
	wait "$rclone_pid" || true
	rclone_pid=
}

# curl_all URL...: one curl process reads every URL in order, over one
# keep-alive connection, the bodies thrown away.
curl_all() { curl -sSf "$@" > /dev/null; }
# serve_rows: W1 through `volfs serve` read by one curl process (every chunk
# file in order over one keep-alive connection), beside a fresh FUSE mount of
# the same source read by one cat, local and over HTTP, alternated in each
# run, every server and mount fresh (chunk cache cold).
serve_rows() {
	local src where urls name
	for src in "$data/w1.precomputed" "$url/w1.precomputed"; do
		where=local
		case $src in http*) where=http ;; esac
		mount_volfs "$src"
		time_cmd "fuse-$where-cat" cat_all
		unmount_volfs "fuse-$where-cat"
		name=serve-$where-curl
		: > "$work/serve.log"
		"$work/volfs" serve --addr 127.0.0.1:0 --log-level info --metrics-addr "$metrics" "$src" 2> "$work/serve.log" &
		volfs_pid=$!
		for _ in $(seq 400); do grep -q 'msg=serving source=' "$work/serve.log" && break; sleep 0.025; done
		local base
		base=$(grep 'msg=serving source=' "$work/serve.log" | grep -o 'url=[^ ]*' | cut -d= -f2)
		[ -n "$base" ] || { echo "volfs serve did not start" >&2; cat "$work/serve.log" >&2; exit 1; }
		mapfile -t urls < <(ls "$data/w1.precomputed/s0" | sed 's/\.gz$//' | sort | sed "s|^|${base}s0/|")
		time_cmd "$name" curl_all "${urls[@]}"
		echo "$name $(awk '/^VmHWM:/ {print $2}' "/proc/$volfs_pid/status") $default_cache_mib" >> "$rss"
		echo "$name $(awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$volfs_pid/stat")" >> "$cpu"
		kill -TERM "$volfs_pid"
		wait "$volfs_pid" || true
		volfs_pid=
	done
}
if [ -n "${SERVE_ONLY:-}" ]; then
	for run in $(seq "$count"); do
		echo "run $run of $count" >&2
		serve_rows
	done
	count=0 # the full loop below runs no row
fi

for run in $(seq "$count"); do
	echo "run $run of $count" >&2
	if want core || want scale || want quota; then record_zarr zarr-local "$data/w1.zarr"; fi
	if [ -n "${BASE:-}" ]; then
		bin=$work/volfs-base mount_volfs "$data/w1.precomputed"
		time_cmd base-local-cat cat_all
		unmount_volfs base-local-cat
	fi
	if want threads; then
		record_zarr zarr-local-threads8 "$data/w1.zarr" 8
		mount_volfs "$data/w1.precomputed"
		time_cmd volfs-local-threads8 pool_read 8
		unmount_volfs volfs-local-threads8
		mount_volfs "$data/w1.precomputed" --read-ahead 0
		time_cmd volfs-local-threads8-ra0 pool_read 8
		unmount_volfs volfs-local-threads8-ra0
	fi
	if want raw; then
		record_zarr zarr-local-zstd3 "$data/w1z.zarr"
		mount_volfs "$data/w1z.zarr"
		time_cmd volfs-local-cat-zstd3 cat_all '[0-9]*'
		unmount_volfs volfs-local-cat-zstd3
		if [ -n "${BASE:-}" ]; then
			bin=$work/volfs-base mount_volfs "$data/w1z.zarr"
			time_cmd base-local-cat-zstd3 cat_all '[0-9]*'
			unmount_volfs base-local-cat-zstd3
			bin=$work/volfs-base mount_volfs "$data/w1raw.zarr"
			time_cmd base-local-cat-raw cat_all '[0-9]*'
			unmount_volfs base-local-cat-raw
		fi
		record_zarr zarr-local-raw "$data/w1raw.zarr"
		mount_volfs "$data/w1raw.zarr"
		time_cmd volfs-local-cat-raw cat_all '[0-9]*'
		unmount_volfs volfs-local-cat-raw
		cat_stored_raw
		time_cmd stored-cat-raw cat_stored_raw
	fi
	if want scale; then
		mount_volfs "$data/w1.precomputed"
		time_cmd volfs-scale32 cat_all
		unmount_volfs volfs-scale32
		for n in 256 2048; do
			echo "volfs-scale$n $((n * 4))" >> "$sizes"
			mount_volfs "$data/w1s$n.precomputed"
			time_cmd "volfs-scale$n" cat_all
			unmount_volfs "volfs-scale$n"
		done
		echo "volfs-scale2048-random 8192" >> "$sizes"
		echo "volfs-scale2048-random-ra0 8192" >> "$sizes"
		mount_volfs "$data/w1s2048.precomputed"
		time_cmd volfs-scale2048-random cat_shuffled
		unmount_volfs volfs-scale2048-random
		mount_volfs "$data/w1s2048.precomputed" --read-ahead 0
		time_cmd volfs-scale2048-random-ra0 cat_shuffled
		unmount_volfs volfs-scale2048-random-ra0
	fi
	if want quota && [ -n "$quota_cg" ]; then
		quota_volfs "$data/w1.precomputed"
		time_cmd volfs-local-cat-quota cat_all
		unmount_volfs volfs-local-cat-quota
		GOMAXPROCS=4 quota_volfs "$data/w1.precomputed"
		time_cmd volfs-local-cat-quota-4p cat_all
		unmount_volfs volfs-local-cat-quota-4p
	fi
	want core || continue
	if [ "$have_fsspec" = yes ]; then record_zarr zarr-http "$url/w1.zarr"; fi
	if [ "$have_rclone" = yes ]; then record rclone-http-cat "$(rclone_gunzip)"; fi
	for src in "$data/w1.precomputed" "$url/w1.precomputed"; do
		where=local
		case $src in http*) where=http ;; esac
		mount_volfs "$src"
		time_cmd "volfs-$where-cat" cat_all
		unmount_volfs "volfs-$where-cat"
		mount_volfs "$src" --read-ahead 0
		time_cmd "volfs-$where-cat-ra0" cat_all
		unmount_volfs "volfs-$where-cat-ra0"
		time_cmd "volfs-$where-incat" incat "volfs-$where-incat" "$src"
	done
	# The zarr arrays through volfs: gzip (the same codec as the
	# precomputed twin) and zstd level 3.
	mount_volfs "$data/w1.zarr"
	time_cmd volfs-local-cat-zarr cat_all '[0-9]*'
	unmount_volfs volfs-local-cat-zarr
	# Without the page cache: decoded bytes held once, by volfs.
	mount_volfs "$data/w1.precomputed" --direct-io
	time_cmd volfs-local-cat-dio cat_all
	unmount_volfs volfs-local-cat-dio
	mount_volfs "$data/w1z.zarr" --direct-io
	time_cmd volfs-local-cat-zstd3-dio cat_all '[0-9]*'
	unmount_volfs volfs-local-cat-zstd3-dio
	# A chunk cache smaller than W1 (128 MiB), so that its budget binds.
	mount_volfs "$data/w1.precomputed" --cache-size 64MiB
	time_cmd volfs-local-cat-cache64m cat_all
	unmount_volfs volfs-local-cat-cache64m
	for k in 2 4; do
		mount_volfs "$data/w1.precomputed"
		time_cmd "volfs-local-readers$k" cat_readers "$k"
		unmount_volfs "volfs-local-readers$k"
	done
	mount_volfs "$data/w1.precomputed"
	time_cmd volfs-local-random cat_shuffled
	unmount_volfs volfs-local-random
	mount_volfs "$data/w1.precomputed" --read-ahead 0
	time_cmd volfs-local-random-ra0 cat_shuffled
	unmount_volfs volfs-local-random-ra0

	# FUSE transfer: the chunk cache warm, the page cache bypassed.
	mount_volfs "$data/w1.precomputed"
	cat_all
	direct_all 1048576 > /dev/null # the first O_DIRECT reads of a file are not timed either
	record volfs-warm-direct-128k "$(direct_all 131072)"
	record volfs-warm-direct-1m "$(direct_all 1048576)"
	unmount_volfs volfs-warm-direct

	# Disk cache: fill it through one mount, then read it through another.
	rm -rf "$work/dc"
	mount_volfs "$url/w1.precomputed" --cache-dir "$work/dc"
	time_cmd volfs-http-cat-fill-disk cat_all
	unmount_volfs volfs-http-cat-fill-disk
	mount_volfs "$url/w1.precomputed" --cache-dir "$work/dc"
	time_cmd volfs-http-cat-disk-hit cat_all
	unmount_volfs volfs-http-cat-disk-hit
	serve_rows
done

bench_py "$results" "$rss" "$dials" "$cpu" "$sizes" <<'PY'
runs, med = medians(sys.argv[1])
mib = 128.0
size = {}
for line in open(sys.argv[5]):
    k, v = line.split()
    size[k] = float(v)
table(runs, med, size=size)
def ratio(label, a, b, target=None):
    ratio_of(med, label, a, b, target)
print()
ratio("zarr-python local, 1st read / volfs local cat (speed-up)", "zarr-local", "volfs-local-cat")
ratio("zarr-python local, 2nd read / volfs local cat (speed-up)", "zarr-local-best", "volfs-local-cat", 2.0)
ratio("zarr-python 8 threads 1st read / volfs 8 threads", "zarr-local-threads8", "volfs-local-threads8")
ratio("zarr-python 8 threads 2nd read / volfs 8 threads", "zarr-local-threads8-best", "volfs-local-threads8", 2.0)
ratio("read-ahead off / on, 8 threads in one process", "volfs-local-threads8-ra0", "volfs-local-threads8", 1.3)
ratio("zarr-python zstd-3 2nd read / volfs zstd-3 cat", "zarr-local-zstd3-best", "volfs-local-cat-zstd3", 1.0)
ratio("zarr-python raw 1st read / volfs raw cat", "zarr-local-raw", "volfs-local-cat-raw")
ratio("zarr-python raw 2nd read / volfs raw cat", "zarr-local-raw-best", "volfs-local-cat-raw", 1.0)
ratio("volfs raw cat / cat of the stored files (passthrough's ceiling)", "volfs-local-cat-raw", "stored-cat-raw")
ratio("zarr-python+fsspec HTTP 2nd read / volfs HTTP cat", "zarr-http-best", "volfs-http-cat", 2.5)
for n in (256, 2048):
    a, b = f"volfs-scale{n}", "volfs-scale32"
    if a in med and b in med:
        r = (size[a] / med[a]) / (mib / med[b])
        print(f"{'throughput ' + str(n) + ' chunks / 32 chunks (target >= 0.9)':62} {r:6.2f}x  target 0.9x: {'met' if r >= 0.9 else 'missed'}")
ratio("2048 chunks shuffled: read-ahead off / on (>= 1 no slower)", "volfs-scale2048-random-ra0", "volfs-scale2048-random", 1.0)
ratio("CPU quota of 2: GOMAXPROCS=4 / Go's quota default (>= 1: keep)", "volfs-local-cat-quota-4p", "volfs-local-cat-quota")
ratio("zarr-python local / volfs local cat --direct-io (speed-up)", "zarr-local", "volfs-local-cat-dio", 2.0)
ratio("BASE volfs / this volfs, local cat (speed-up)", "base-local-cat", "volfs-local-cat")
ratio("BASE volfs / this volfs, zstd-3 cat (speed-up)", "base-local-cat-zstd3", "volfs-local-cat-zstd3")
ratio("BASE volfs / this volfs, raw cat (speed-up)", "base-local-cat-raw", "volfs-local-cat-raw")
ratio("zarr-python zstd-3 local 1st read / volfs zstd-3 zarr cat", "zarr-local-zstd3", "volfs-local-cat-zstd3")
ratio("zarr-python zstd-3 local 2nd read / volfs zstd-3 cat --direct-io", "zarr-local-zstd3-best", "volfs-local-cat-zstd3-dio", 1.0)
ratio("zarr-python+fsspec HTTP 1st read / volfs HTTP cat", "zarr-http", "volfs-http-cat")
ratio("rclone mount + gunzip in reader / volfs HTTP cat", "rclone-http-cat", "volfs-http-cat")
ratio("gzip zarr / precomputed twin, volfs local cat (format)", "volfs-local-cat-zarr", "volfs-local-cat")
ratio("in-process volfs cat / mount cat, local (target >= 0.8)", "volfs-local-incat", "volfs-local-cat", 0.8)
ratio("in-process volfs cat / mount cat, HTTP (target >= 0.8)", "volfs-http-incat", "volfs-http-cat", 0.8)
ratio("in-process volfs cat / mount cat read-ahead 0, local", "volfs-local-incat", "volfs-local-cat-ra0")
ratio("read-ahead off / on, local cat", "volfs-local-cat-ra0", "volfs-local-cat", 1.5)
ratio("read-ahead off / on, HTTP cat", "volfs-http-cat-ra0", "volfs-http-cat")
ratio("1 reader / 2 readers, local", "volfs-local-cat", "volfs-local-readers2", 1.7)
ratio("1 reader / 4 readers, local", "volfs-local-cat", "volfs-local-readers4")
ratio("random order: read-ahead off / on (>= 1 is no slower)", "volfs-local-random-ra0", "volfs-local-random", 1.0)
ratio("--cache-size 64MiB / 512MiB, local cat", "volfs-local-cat-cache64m", "volfs-local-cat")
ratio("origin / disk-cache hit, HTTP", "volfs-http-cat", "volfs-http-cat-disk-hit")
ratio("origin + filling the disk cache / origin alone", "volfs-http-cat-fill-disk", "volfs-http-cat")
ratio("volfs serve read by curl / FUSE mount read by cat, local", "serve-local-curl", "fuse-local-cat")
ratio("volfs serve read by curl / FUSE mount read by cat, HTTP", "serve-http-curl", "fuse-http-cat")
for bs in ("128k", "1m"):
    k = "volfs-warm-direct-" + bs
    if k in med:
        gbs = mib * 2**20 / med[k] / 1e9
        print(f"{'FUSE transfer, chunk cache warm, O_DIRECT ' + bs:62} {gbs:6.2f} GB/s" + ("  target 2 GB/s: %s" % ("met" if gbs >= 2 else "missed") if bs == "1m" else ""))

# Peak RSS of each volfs process: the most over the runs.
peak, budget = {}, {}
for line in open(sys.argv[2]):
    k, kib, b = line.split()
    peak[k] = max(peak.get(k, 0), int(kib) / 1024)
    budget[k] = int(b)
print(f"\n{'volfs process (peak RSS, max of runs)':40} {'VmHWM MiB':>9} {'cache+100':>9}  target: under the cache budget plus 100 MiB")
for k in peak:
    lim = budget[k] + 100
    print(f"{k:40} {peak[k]:9.0f} {lim:9d}  {'met' if peak[k] < lim else 'missed'}")

# TCP connections to the origin per HTTP mount (volfs_fetch_dials_total).
dials_table(sys.argv[3], "HTTP mount (TCP connections per run)", lambda row: "http" in row)

# CPU of the volfs process (user + system) per mount.
cpu = {}
for line in open(sys.argv[4]):
    k, v = line.split()
    cpu.setdefault(k, []).append(float(v))
print(f"\n{'volfs process (CPU s, user + system)':40} {'median':>6}  runs")
for k, v in cpu.items():
    print(f"{k:40} {statistics.median(v):6.2f}  " + " ".join(f"{x:.2f}" for x in v))
PY
