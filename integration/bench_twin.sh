#!/bin/bash
# bench_twin.sh BINARY ZARR PRECOMPUTED: the same gzip chunks read as a
# Zarr (compressor gzip) and as its precomputed twin (encoding raw, ".gz"
# files), three rounds alternating, each a fresh mount with the page cache
# dropped: cat of every chunk file, then volfs's CPU seconds (utime+stime
# from /proc) for the read. Prints per format the runs and medians.
set -eu
bin=$1 zarr=$2 pre=$3
mnt=$(mktemp -d)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"' EXIT
tck=$(getconf CLK_TCK)
one() { # NAME SOURCE GLOB
	"$bin" mount "$2" "$mnt" 2>/dev/null &
	local pid=$! i t0 t1 c0 c1
	for i in $(seq 400); do mountpoint -q "$mnt" && break; sleep 0.025; done
	ls "$mnt" "$mnt"/s0 >/dev/null 2>&1 || true
	sync; echo 3 > /proc/sys/vm/drop_caches
	c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
	t0=$(date +%s.%N)
	(cd "$mnt" && cat $3 >/dev/null)
	t1=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
	echo "$1 $(echo "$t1 - $t0" | bc) $(echo "($c1 - $c0) / $tck" | bc -l | cut -c1-5)"
	umount "$mnt"; wait $pid
}
for r in 1 2 3; do
	one zarr "$zarr" '[0-9]*.[0-9]*.[0-9]*'
	one precomputed "$pre" 's0/[0-9]*'
done | sort -k1,1 -k2,2n | awk '{a[$1] = a[$1] " " $2; c[$1] = c[$1] " " $3} END {for (d in a) {split(a[d], v, " "); print d, "seconds:" a[d], "median:", v[2], "cpu-s:" c[d]}}'
