#!/bin/bash
# bench_passthrough.sh SOURCE OLD NEW: the raw-local row of issue 31. cat of
# every chunk file ([0-9]*.[0-9]*[.0-9]*) of the local raw array SOURCE,
# page cache dropped before each, three rounds, in each round: the source
# directory itself, a fresh mount by the binary OLD, a fresh mount by NEW
# as it runs (passthrough of local sources is opt-in), and one by NEW with
# --passthrough (as root, where the kernel allows it).
# Prints each one's runs and median seconds. Run as root (drop_caches).
set -eu
src=$1 old=$2 new=$3
mnt=$(mktemp -d)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"' EXIT
catall() { (cd "$1" && cat [0-9]*.[0-9]*[.0-9]* >/dev/null); }
one() { # NAME DIR
	sync; echo 3 > /proc/sys/vm/drop_caches
	local t0 t1
	t0=$(date +%s.%N); catall "$2"; t1=$(date +%s.%N)
	echo "$1 $(echo "$t1 - $t0" | bc)"
}
mounted() { # NAME BINARY ARGS...
	local name=$1 bin=$2
	shift 2
	"$bin" mount "$@" "$src" "$mnt" 2>/dev/null &
	for i in $(seq 400); do mountpoint -q "$mnt" && break; sleep 0.025; done
	ls "$mnt" >/dev/null
	one "$name" "$mnt"
	umount "$mnt"; wait
}
for r in 1 2 3; do
	one source "$src"
	mounted old "$old"
	mounted no-passthrough "$new"
	mounted passthrough "$new" --passthrough
done | sort -k1,1 -k2,2n | awk '{a[$1] = a[$1] " " $2} END {for (d in a) {split(a[d], v, " "); print d, "runs:" a[d], "median:", v[2]}}'
