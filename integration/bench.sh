#!/usr/bin/env bash
# Runs the read-path benchmarks side by side, several times, and prints the
# median of each with the ratios that matter. Results and the command go in
# docs/PERFORMANCE.md.
#
#   integration/bench.sh [COUNT]      the go test benchmarks (root, for the FUSE rows)
#   integration/bench.sh w1 [COUNT]   workload W1 through real mounts of the volfs
#                                     binary against zarr-python (root; see bench_w1.sh)
#   integration/bench.sh s3 [COUNT]   W1 from SeaweedFS's S3 gateway: volfs against s3fs
#                                     and rclone mount with gunzip in the reader (bench_s3.sh)
#   integration/bench.sh object       one large pass-through object over loopback HTTP
#                                     and behind a slow object-store-like origin, cat
#                                     through the mount against curl (bench_object.sh);
#                                     the same for one 64 MiB uncompressed Zarr chunk
#   integration/bench.sh serve [COUNT] W1 over `volfs serve` read by curl beside the
#                                     FUSE mount read by cat (the serve rows of bench_w1.sh)
#   integration/bench.sh pass [COUNT]  FUSE passthrough: chunks of a warm disk cache and raw
#                                     local chunks against cat of plain files (bench_pass.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = w1 ]; then
	exec integration/bench_w1.sh "${2:-3}"
fi
if [ "${1:-}" = s3 ]; then
	exec integration/bench_s3.sh "${2:-3}"
fi
if [ "${1:-}" = pass ]; then
	exec integration/bench_pass.sh "${2:-3}"
fi
if [ "${1:-}" = object ]; then
	# Issue 31's large-object rows: a 512 MiB object on loopback HTTP, and
	# a 256 MiB one behind an origin that caps each response at 64 MiB/s
	# and answers 20 ms late (integration/rangesrv), each read by cat
	# through a fresh mount against curl (bench_object.sh). Root: it
	# drops the page cache.
	. integration/benchlib.sh
	work=$(mktemp -d)
	pids=()
	trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
	go build -o "$work/volfs" ./cmd/volfs
	go build -o "$work/rangesrv" ./integration/rangesrv
	mkdir "$work/obj"
	head -c $((512 << 20)) /dev/urandom > "$work/obj/big512.bin"
	head -c $((256 << 20)) "$work/obj/big512.bin" > "$work/obj/big256.bin"
	# A Zarr array of one 64 MiB chunk with no compressor: read in ranged
	# parts too (fs/chunkparts.go), rows "chunk".
	mkdir "$work/obj/raw.zarr"
	echo '{"zarr_format": 2, "shape": [67108864], "chunks": [67108864], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}' > "$work/obj/raw.zarr/.zarray"
	head -c $((64 << 20)) "$work/obj/big512.bin" > "$work/obj/raw.zarr/0"
	fast=$(free_port)
	"$work/rangesrv" "127.0.0.1:$fast" "$work/obj" & pids+=($!)
	slow=$(free_port)
	"$work/rangesrv" "127.0.0.1:$slow" "$work/obj" 64 20 & pids+=($!)
	sleep 0.5
	echo "== 512 MiB object, loopback HTTP"
	integration/bench_object.sh "$work/volfs" "http://127.0.0.1:$fast" big512.bin
	echo "== 256 MiB object, origin capped at 64 MiB/s per response, 20 ms to first byte"
	integration/bench_object.sh "$work/volfs" "http://127.0.0.1:$slow" big256.bin
	echo "== chunk: one 64 MiB chunk of a Zarr array without compressor, loopback HTTP"
	integration/bench_object.sh "$work/volfs" "http://127.0.0.1:$fast" raw.zarr/0
	echo "== chunk: the same behind the origin capped at 64 MiB/s per response, 20 ms to first byte"
	integration/bench_object.sh "$work/volfs" "http://127.0.0.1:$slow" raw.zarr/0
	exit 0
fi
if [ "${1:-}" = serve ]; then
	SERVE_ONLY=1 exec integration/bench_w1.sh "${2:-5}"
fi
count=${1:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'Gunzip' -benchmem -count "$count" ./decode/codec/ | tee -a "$out" >&2
go test -run '^$' -bench 'ChurnHeap' -benchtime 5x -count "$count" ./cache/ | tee -a "$out" >&2
go test -run '^$' -bench 'Gate' -count "$count" ./cache/ | tee -a "$out" >&2
go test -run '^$' -bench 'ReadScale|MountScale' -benchmem -benchtime 20x -count "$count" ./integration/ 2>/dev/null | tee -a "$out" >&2
go test -run '^$' -bench 'ViewsWalk|ViewsRead' -benchmem -benchtime 5x -count "$count" ./fs/ | tee -a "$out" >&2
go test -run '^$' -bench 'ViewsMount' -benchtime 5x -count "$count" ./integration/ 2>/dev/null | tee -a "$out" >&2
/usr/bin/python3 - "$out" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"Benchmark(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op(.*)", line)
    if m:
        runs.setdefault(m.group(1), []).append((float(m.group(2)), m.group(3)))
med = {k: statistics.median(v[0] for v in vs) for k, vs in runs.items()}
def extra(name, unit):
    vals = [float(x) for _, rest in runs[name] for x in re.findall(r"([\d.]+) " + re.escape(unit), rest)]
    return statistics.median(vals) if vals else float("nan")
print(f"\n{'benchmark':34} {'median ms/op':>12} {'MB/s':>8} {'allocs/op':>10} {'dials/op':>9} {'peak heap/cache':>16}")
for k in sorted(m for m in med if not m.startswith(("Views", "Gate/"))):
    print(f"{k:34} {med[k]/1e6:12.3f} {extra(k, 'MB/s'):8.0f} {extra(k, 'allocs/op'):10.0f} {extra(k, 'dials/op'):9.2f} {extra(k, 'peak-heap/cache'):16.2f}")
def ratio(label, a, b):
    if a in med and b in med:
        print(f"{label:60} {med[a]/med[b]:6.2f}x")
print()
ratio("stdlib gzip / volfs Gunzip (1 MiB chunk)", "Gunzip/stdlib", "Gunzip/volfs")
ratio("cold read from disk / gunzip alone (read-path overhead)", "ReadScale/cold-disk", "ReadScale/gunzip")
ratio("cold read over loopback HTTP / gunzip alone", "ReadScale/cold", "ReadScale/gunzip")
ratio("cold read, 1 reader / GOMAXPROCS readers (scaling)", "ReadScale/cold", "ReadScale/cold-parallel")
ratio("cold read / warm read (cache hit speed-up)", "ReadScale/cold", "ReadScale/warm")
if all(k in med for k in ("MountScale/fuse-cat", "MountScale/fuse-mount-only", "MountScale/inprocess")):
    f = med["MountScale/fuse-cat"] - med["MountScale/fuse-mount-only"]
    print(f"{'FUSE cat (less mount+sh) / in-process cold read':60} {f/med['MountScale/inprocess']:6.2f}x")
if all(k in med for k in ("MountScale/fuse-cat-warm", "MountScale/fuse-mount-only", "MountScale/inprocess")):
    w = med["MountScale/fuse-cat-warm"] - med["MountScale/fuse-mount-only"]
    print(f"{'FUSE cat, chunk cache full (less mount+sh) / in-process cold':60} {w/med['MountScale/inprocess']:6.2f}x")
# The gate table (cache.BatchInline): ms per batch of k chunk loads by
# strategy, each strategy's median over the runs, and the medians of the
# ratios BenchmarkGate measures side by side within each run.
gate = {}
for name, vs in runs.items():
    m = re.match(r"Gate/(\w+)/k=(\d+)$", name)
    if m:
        for _, rest in vs:
            for val, unit in re.findall(r"([\d.]+) (\S+-ms|\S+/inline)", rest):
                gate.setdefault((m.group(1), int(m.group(2)), unit), []).append(float(val))
if gate:
    ks = sorted({k for _, k, _ in gate})
    print(f"\n{'gate: ms per batch of k loads':30}" + "".join(f"{'k=' + str(k):>9}" for k in ks))
    for codec in ("none", "raw", "gzip", "zstd"):
        for unit in ("inline-ms", "pool-ms", "gated-ms", "pool/inline", "gated/inline"):
            vals = [gate.get((codec, k, unit)) for k in ks]
            if any(vals):
                label = f"{codec} {unit.removesuffix('-ms')}"
                print(f"{label:30}" + "".join(f"{statistics.median(v):9.3f}" if v else f"{'-':>9}" for v in vals))
views = sorted(m for m in med if m.startswith("Views"))
if views:
    print(f"\n{'benchmark':34} {'median ms/op':>12} {'MB/s':>8} {'decodes/chunk':>14} {'fetches/chunk':>14}")
    for k in views:
        print(f"{k:34} {med[k]/1e6:12.3f} {extra(k, 'MB/s'):8.1f} {extra(k, 'decodes/chunk'):14.2f} {extra(k, 'fetches/chunk'):14.2f}")
    print()
    ratio("section / the chunks under it, in process", "ViewsRead/section", "ViewsRead/section-chunks")
    ratio("volume.raw / every chunk, in process", "ViewsRead/volume.raw", "ViewsRead/volume-chunks")
    ratio("section / the chunks under it, cat through the mount", "ViewsMount/section", "ViewsMount/section-chunks")
    ratio("volume.raw / every chunk, cat through the mount", "ViewsMount/volume.raw", "ViewsMount/volume-chunks")
PY
