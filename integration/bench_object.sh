#!/bin/bash
# bench_object.sh BINARY URL NAME: one large object over HTTP (issue 31's
# object row): cat of NAME through a fresh mount of URL by BINARY, one
# curl of URL/NAME, and 8 curls of its eighths as ranges in parallel,
# three rounds alternating, medians; page cache dropped before each.
# Prints each one's runs, median seconds and MiB/s, the mount's peak RSS
# (VmHWM) per run, and the ratios of issue 31's rows beside their goals.
# integration/bench.sh object runs it on both of that issue's origins.
# With RA_KB=N each round also reads through a mount whose kernel
# read-ahead (the FUSE bdi's read_ahead_kb, 1024 as volfs asks) was set to
# N KiB after mounting, as row "mount-ra".
#
# What the kernel gives: max_pages_limit caps a FUSE request at 256 pages
# (1 MiB, volfs's MaxWrite) unless raised in /proc/sys/fs/fuse.
set -eu
bin=$1 url=$2 name=$3
mnt=$(mktemp -d)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"' EXIT
size=$(curl -sfI "$url/$name" | awk 'tolower($1) == "content-length:" {print $2 + 0}')
t() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
curl8() {
	local i part=$((size / 8))
	for i in 0 1 2 3 4 5 6 7; do
		local end=$(((i + 1) * part - 1))
		[ $i = 7 ] && end=$((size - 1))
		curl -sf -r $((i * part))-$end "$url/$name" -o /dev/null &
	done
	wait
}
catobj() { cat "$1" >/dev/null; }
mounted() {
	local label=${1:-mount}
	"$bin" mount "$url" "$mnt" 2>/dev/null &
	local pid=$! i
	for i in $(seq 400); do mountpoint -q "$mnt" && break; sleep 0.025; done
	ls "$mnt/$(dirname "$name")" >/dev/null # the volume found before the clock starts
	if [ "$label" = mount-ra ]; then
		echo "$RA_KB" > "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb"
	fi
	echo "$label $(t catobj "$mnt/$name")" >&2
	[ "$label" = mount ] && grep VmHWM /proc/$pid/status >&2
	umount "$mnt"; wait $pid
}
for r in 1 2 3; do
	sync; echo 3 > /proc/sys/vm/drop_caches
	echo "curl1 $(t curl -sf "$url/$name" -o /dev/null)"
	sync; echo 3 > /proc/sys/vm/drop_caches
	echo "curl8 $(t curl8)"
	sync; echo 3 > /proc/sys/vm/drop_caches
	mounted 2>&1 | awk '/^mount/ {print} /VmHWM/ {print "rss-kB", $2}'
	if [ -n "${RA_KB:-}" ]; then
		sync; echo 3 > /proc/sys/vm/drop_caches
		mounted mount-ra 2>&1 | awk '/^mount/ {print}'
	fi
done | sort -k1,1 -k2,2n | awk -v mib=$(echo "$size / 1048576" | bc) '{a[$1] = a[$1] " " $2} END {
	for (d in a) {split(a[d], v, " "); m[d] = v[2]; printf "%s runs:%s median: %s", d, a[d], v[2]; if (d != "rss-kB") printf " (%.0f MiB/s)", mib / v[2]; print ""}
	best = m["curl1"] < m["curl8"] ? m["curl1"] : m["curl8"]
	printf "ratio mount / best curl: %.2fx   mount / 8 ranged curls: %.2fx   (goal >= 0.8x)\n", best / m["mount"], m["curl8"] / m["mount"]
	printf "peak RSS median: %.0f MiB   (goal <= 256 MiB)\n", m["rss-kB"] / 1024
}'
