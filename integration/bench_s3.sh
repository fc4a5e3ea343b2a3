#!/usr/bin/env bash
# Workload W1 (bench_w1.sh: 32 chunks of 4 MiB uint8, gzip level 6, as a
# precomputed layer with "<key>.gz" objects) from an S3 server, side by
# side in one run: SeaweedFS's S3 gateway on loopback (the build .ci/run
# caches, or $VOLFS_WEED) (bucket bench-w1) holds the layer twice, uploaded with boto3:
# w1/gz keeps the .gz objects as they are on disk, w1/ce stores each as
# the plain key with Content-Encoding: gzip (CloudVolume's upload).
#
# Rows, each the median of COUNT runs through a fresh mount:
#   volfs-s3-cat      one `cat` of the 32 chunk files through a volfs mount
#                     of s3://bench-w1/gz (volfs gunzips the .gz objects)
#   volfs-s3-cat-ce   the same of s3://bench-w1/ce (Content-Encoding: gzip)
#   s3fs-gunzip       s3fs (Debian's s3fs-fuse) mount of the bucket, and one
#                     python3 process that reads every .gz object of s0 and
#                     gzip.decompress-es it (zlib's inflate)
#   rclone-gunzip     the same through `rclone mount :s3:` (--vfs-cache-mode
#                     off: streamed from the server, nothing kept on disk)
# and the TCP connections each volfs mount opened (volfs_fetch_dials_total).
#
# Usage: integration/bench_s3.sh [COUNT] (root; needs python3-zarr,
# python3-boto3, s3fs, rclone, fuse3, curl, bc).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
weed=${VOLFS_WEED:-/var/cache/volfs-ci/weed-v0.0.0-20261109003541-7506e5f91cd6}
[ -x "$weed" ] || { echo "no SeaweedFS at $weed (bash .ci/run builds it)" >&2; exit 1; }
work=$(mktemp -d /tmp/volfs-s3bench.XXXXXX)
mnt=$work/mnt mnt2=$work/peer
mkdir -p "$mnt" "$mnt2" "$work/weed"
weed_pid= volfs_pid= peer_pid=
cleanup() {
	if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
	if mountpoint -q "$mnt2"; then umount "$mnt2" || umount -l "$mnt2"; fi
	[ -n "$volfs_pid" ] && kill "$volfs_pid" 2>/dev/null || true
	[ -n "$peer_pid" ] && kill "$peer_pid" 2>/dev/null || true
	[ -n "$weed_pid" ] && kill "$weed_pid" 2>/dev/null && wait "$weed_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
export LC_ALL=C
# No credentials: the bucket is public, and every reader reads it anonymously.
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 || true 
# rclone 1.60 cannot load AWS_CA_BUNDLE into its transport; the server is plain HTTP.
unset AWS_CA_BUNDLE || true

go build -o "$work/volfs" ./cmd/volfs

/usr/bin/python3 - "$work/data" <<'PY'
import gzip, json, os, sys
import numpy as np
root = sys.argv[1]
nz, cz, cy, cx = 32, 64, 256, 256          # bench_w1.sh's W1
rng = np.random.default_rng(11)
z, y, x = np.meshgrid(np.arange(nz * cz), np.arange(cy), np.arange(cx), indexing="ij", sparse=True)
field = 128 + 60 * np.sin(x / 23.0) * np.cos(y / 31.0) + 40 * np.sin(z / 17.0 + x / 41.0)
data = np.clip(field + rng.normal(0, 12, (nz * cz, cy, cx)), 0, 255).astype(np.uint8)
os.makedirs(os.path.join(root, "s0"))
json.dump({"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8",
           "num_channels": 1, "scales": [{"key": "s0", "size": [cx, cy, nz * cz], "voxel_offset": [0, 0, 0],
           "resolution": [4, 4, 40], "chunk_sizes": [[cx, cy, cz]], "encoding": "raw"}]},
          open(os.path.join(root, "info"), "w"))
for i in range(nz):
    chunk = np.ascontiguousarray(data[i * cz:(i + 1) * cz]).tobytes()
    with open(os.path.join(root, "s0", f"0-{cx}_0-{cy}_{i*cz}-{(i+1)*cz}.gz"), "wb") as f:
        f.write(gzip.compress(chunk, compresslevel=6))
PY

ports=($(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(8)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'))
ep=http://127.0.0.1:${ports[0]}
cat > "$work/s3.json" <<EOF
{"identities": [
  {"name": "anonymous", "actions": ["Read:bench-w1", "List:bench-w1"]},
  {"name": "admin", "credentials": [{"accessKey": "benchadmin", "secretKey": "benchadminsecret"}], "actions": ["Admin", "Read", "List", "Write"]}
]}
EOF
"$weed" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$work/weed" -master.telemetry=false -volume.max=16 \
	-master.port="${ports[1]}" -master.port.grpc="${ports[2]}" -volume.port="${ports[3]}" -volume.port.grpc="${ports[4]}" \
	-filer -filer.port="${ports[5]}" -filer.port.grpc="${ports[6]}" \
	-s3 -s3.port="${ports[0]}" -s3.port.grpc="${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
	-s3.config="$work/s3.json" -s3.localSocket="$work/s3.sock" > "$work/weed.log" 2>&1 &
weed_pid=$!
for _ in $(seq 1200); do curl -s -o /dev/null "$ep/" && break; sleep 0.1; done
put() { AWS_ACCESS_KEY_ID=benchadmin AWS_SECRET_ACCESS_KEY=benchadminsecret /usr/bin/python3 integration/testdata/s3put.py "$ep" put bench-w1 "$@"; }
put gz "$work/data" >&2
put ce "$work/data" --gzip-encoded >&2

results=$work/results dials=$work/dials
: > "$results"
: > "$dials"
metrics=127.0.0.1:$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
now() { date +%s.%N; }
record() { echo "$1 $2" >> "$results"; }
wait_mount() {
	local i
	for i in $(seq 400); do mountpoint -q "$1" && return; sleep 0.025; done
	echo "$1: not mounted" >&2
	exit 1
}

# volfs_cat NAME PREFIX: a fresh volfs mount of s3://bench-w1/PREFIX, one cat of
# its chunk files, the dials it made.
volfs_cat() {
	"$work/volfs" mount --log-level warn --metrics-addr "$metrics" --endpoint-url "$ep" "s3://bench-w1/$2" "$mnt" &
	volfs_pid=$!
	wait_mount "$mnt"
	local t0 t1
	t0=$(now)
	cat "$mnt"/s0/0-* > /dev/null
	t1=$(now)
	record "$1" "$(echo "$t1 - $t0" | bc)"
	echo "$1 $(curl -sf "http://$metrics/metrics" | awk '/^volfs_fetch_dials_total / {print $2}')" >> "$dials"
	umount "$mnt"
	wait "$volfs_pid" || true
	volfs_pid=
}

# gunzip_all DIR: one python3 process reads every .gz file of DIR and
# decompresses it; prints the seconds, listing included.
gunzip_all() {
	/usr/bin/python3 - "$1" <<'PY'
import gzip, os, sys, time
d = sys.argv[1]
t0 = time.perf_counter()
total = 0
for n in sorted(os.listdir(d)):
    if n.endswith(".gz"):
        with open(os.path.join(d, n), "rb") as f:
            total += len(gzip.decompress(f.read()))
t = time.perf_counter() - t0
assert total == 128 << 20, total
print(t)
PY
}

# peer NAME CMD...: mount the bucket's w1/gz with CMD at $mnt2, gunzip_all
# its s0, unmount.
peer() {
	local name=$1
	shift
	"$@" &
	peer_pid=$!
	wait_mount "$mnt2"
	record "$name" "$(gunzip_all "$mnt2/gz/s0")"
	fusermount3 -u "$mnt2" 2>/dev/null || umount "$mnt2"
	wait "$peer_pid" || true
	peer_pid=
}

for run in $(seq "$count"); do
	echo "run $run of $count" >&2
	volfs_cat volfs-s3-cat gz
	volfs_cat volfs-s3-cat-ce ce
	peer s3fs-gunzip s3fs bench-w1 "$mnt2" -f -o url="$ep" -o use_path_request_style -o public_bucket=1 -o ro
	peer rclone-gunzip rclone mount ":s3:bench-w1" "$mnt2" --s3-provider Other --s3-endpoint "$ep" \
		--s3-force-path-style --read-only --vfs-cache-mode off --log-level ERROR
done

/usr/bin/python3 - "$results" "$dials" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"\n{'row (W1 from S3, 128 MiB decoded)':34} {'median s':>9} {'MiB/s':>7}  runs")
for k, v in runs.items():
    print(f"{k:34} {med[k]:9.3f} {128/med[k]:7.0f}  " + " ".join(f"{x:.3f}" for x in v))
print()
for peer in ("s3fs-gunzip", "rclone-gunzip"):
    for row in ("volfs-s3-cat", "volfs-s3-cat-ce"):
        if peer in med and row in med:
            r = med[peer] / med[row]
            print(f"{peer + ' / ' + row:50} {r:6.2f}x  target 2.5x: {'met' if r >= 2.5 else 'missed'}")
dials = {}
for line in open(sys.argv[2]):
    f = line.split()
    dials.setdefault(f[0], []).append(int(float(f[1])) if len(f) > 1 else None)
print(f"\n{'volfs mount (TCP connections per run)':40} {'max':>5}  runs  target: at most 16")
for k, v in dials.items():
    got = [x for x in v if x is not None]
    m = max(got) if got else None
    print(f"{k:40} {m if m is not None else '-':>5}  " + " ".join(str(x) for x in v) +
          ("" if m is None else "  " + ("met" if m <= 16 else "missed")))
PY
