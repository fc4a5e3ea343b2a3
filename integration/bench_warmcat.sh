#!/bin/bash
# bench_warmcat.sh DIR...: the warm-page-cache row of issue 31. For each
# DIR (a local source, or volfs mounts of it), cat its chunk files
# ([0-9]*.[0-9]*.[0-9]*) once to fill the page cache, then time three
# rounds, the DIRs alternating inside each round so that a loaded
# machine weighs on all alike; prints each DIR's runs and median seconds.
set -eu
for d in "$@"; do (cd "$d" && cat [0-9]*.[0-9]*.[0-9]* >/dev/null); done
for r in 1 2 3; do
	for d in "$@"; do
		t0=$(date +%s.%N)
		(cd "$d" && cat [0-9]*.[0-9]*.[0-9]* >/dev/null)
		t1=$(date +%s.%N)
		echo "$d $(echo "$t1 - $t0" | bc)"
	done
done | sort -k1,1 -k2,2n | awk '{a[$1] = a[$1] " " $2} END {for (d in a) {split(a[d], v, " "); print d, "runs:" a[d], "median:", v[2]}}'
