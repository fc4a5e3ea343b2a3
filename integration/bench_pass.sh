#!/usr/bin/env bash
# bench_pass.sh [COUNT]: the FUSE passthrough rows of issue 31, each a
# median of COUNT rounds (3 by default), run as root (drop_caches, and the
# kernel passes files through only for CAP_SYS_ADMIN). Data: W1 (32 chunks
# of 4 MiB, benchlib.sh) as precomputed gzip, and the same chunks as
# precomputed raw, under one directory on one disk ($BENCH_DIR, default
# /var/tmp), beside the disk cache and plain copies of the decoded chunks.
#
#   disk-cold   cat of every chunk file of a fresh mount whose disk cache
#               a first mount warmed, page cache dropped, vs cat of the
#               plain copies, page cache dropped (goal >= 0.9x)
#   disk-warm   the same cats once more (goal >= 0.8x)
#   raw         cat of every chunk of the raw layer through a fresh mount
#               with --passthrough, page cache dropped, vs cat of its source
#               files (goal >= 0.9x)
# and, for reference, the disk rows with --no-disk-passthrough (the path
# that every read takes without passthrough). The floor rows read the same
# data in chunks of 256 KiB (512 of them) from a warmed disk cache, cold
# and warm, with the default --passthrough-min-size (1 MiB: served by
# volfs) against --passthrough-min-size 0 (passed through): what the floor
# buys chunks that one read request serves.
set -euo pipefail
cd "$(dirname "$0")/.."
. integration/benchlib.sh
count=${1:-3}
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
bin=$(mktemp -d)/volfs
go build -o "$bin" ./cmd/volfs
work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/bench-pass.XXXXXX")
mnt=$work/mnt
results=$work/results
mkdir -p "$mnt"
cleanup() { umount "$mnt" 2>/dev/null || true; rm -rf "$work" "$(dirname "$bin")"; }
trap cleanup EXIT

bench_py "$work" <<'PY'
import os, sys
work = sys.argv[1]
data = w1()
write_precomputed(os.path.join(work, "gz"), data)
# The same chunks raw and whole: what --passthrough reads from the source.
import json, shutil
raw = os.path.join(work, "raw")
os.makedirs(os.path.join(raw, "s0"))
info = json.load(open(os.path.join(work, "gz", "info")))
json.dump(info, open(os.path.join(raw, "info"), "w"))
cz = info["scales"][0]["chunk_sizes"][0][2]
for i in range(data.shape[0] // cz):
    with open(os.path.join(raw, "s0", f"0-256_0-256_{i*cz}-{(i+1)*cz}"), "wb") as f:
        f.write(data[i * cz:(i + 1) * cz].tobytes())
# The floor rows: chunks of 256x256x4 voxels, 256 KiB.
write_precomputed(os.path.join(work, "gzs"), data, 4)
PY

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
catall() { (cd "$1" && cat s0/[0-9]* > /dev/null); }
# serve SOURCE ARGS...: a fresh mount of SOURCE at $mnt.
serve() {
	local src=$1
	shift
	"$bin" mount "$@" "$src" "$mnt" 2>> "$work/log" &
	wait_mount "$mnt"
	ls "$mnt/s0" > /dev/null
}
unserve() { umount "$mnt"; wait; }

# Warm the disk cache (a first mount, kept plain because it passes
# through), and make the plain copies from it.
serve "$work/gz" --cache-dir "$work/cache"
mkdir -p "$work/plain/s0"
for f in "$mnt"/s0/[0-9]*; do cat "$f" > "$work/plain/s0/$(basename "$f")"; done
unserve
serve "$work/gzs" --cache-dir "$work/cache-s"
catall "$mnt"
unserve
grep -h "passthrough:" "$work/log" | sort -u >&2
echo "data files in the disk cache: $(find "$work/cache" -name '*.dat' | wc -l)" >&2

for r in $(seq "$count"); do
	drop
	time_cmd plain-cold catall "$work/plain"
	time_cmd plain-warm catall "$work/plain"
	serve "$work/gz" --cache-dir "$work/cache"
	drop
	time_cmd disk-cold catall "$mnt"
	time_cmd disk-warm catall "$mnt"
	unserve
	serve "$work/gz" --cache-dir "$work/cache" --no-disk-passthrough
	drop
	time_cmd nopass-cold catall "$mnt"
	time_cmd nopass-warm catall "$mnt"
	unserve
	# The mount without passthrough rewrote nothing: it reads plain
	# entries as they are.
	drop
	time_cmd source-raw catall "$work/raw"
	serve "$work/raw" --passthrough
	drop
	time_cmd raw catall "$mnt"
	unserve
	serve "$work/gzs" --cache-dir "$work/cache-s"
	drop
	time_cmd floor-cold catall "$mnt"
	time_cmd floor-warm catall "$mnt"
	unserve
	serve "$work/gzs" --cache-dir "$work/cache-s" --passthrough-min-size 0
	drop
	time_cmd floor0-cold catall "$mnt"
	time_cmd floor0-warm catall "$mnt"
	unserve
done

bench_py "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
for k in sorted(runs):
    print(f"{k:12} median {med[k]:.3f} s  runs {' '.join(f'{v:.3f}' for v in runs[k])}")
print()
for row, a, b, goal in [
    ("disk tier, cold page cache", "disk-cold", "plain-cold", 0.9),
    ("disk tier, warm page cache", "disk-warm", "plain-warm", 0.8),
    ("raw local chunks", "raw", "source-raw", 0.9),
    ("(no passthrough) disk tier, cold", "nopass-cold", "plain-cold", None),
    ("(no passthrough) disk tier, warm", "nopass-warm", "plain-warm", None),
]:
    ratio = med[b] / med[a]
    g = f"goal >= {goal}x: {'met' if ratio >= goal else 'missed'}" if goal else ""
    print(f"{row:34} {ratio:.2f}x of cat of plain files  {g}")
print()
for row, a, b in [
    ("256 KiB chunks, cold page cache", "floor-cold", "floor0-cold"),
    ("256 KiB chunks, warm page cache", "floor-warm", "floor0-warm"),
]:
    print(f"{row:34} {med[b] / med[a]:.2f}x faster served by volfs (default floor) than passed through (--passthrough-min-size 0)")
PY
