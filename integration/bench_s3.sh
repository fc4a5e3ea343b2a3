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
source integration/benchlib.sh
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

bench_py "$work/data" <<'PY'
write_precomputed(sys.argv[1], w1())
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
metrics=127.0.0.1:$(free_port)

# volfs_cat NAME PREFIX: a fresh volfs mount of s3://bench-w1/PREFIX, one cat of
# its chunk files, the dials it made.
volfs_cat() {
	"$work/volfs" mount --log-level warn --metrics-addr "$metrics" --endpoint-url "$ep" "s3://bench-w1/$2" "$mnt" &
	volfs_pid=$!
	wait_mount "$mnt"
	time_cmd "$1" cat_all
	record_dials "$1" "$metrics"
	umount "$mnt"
	wait "$volfs_pid" || true
	volfs_pid=
}

cat_all() { cat "$mnt"/s0/0-* > /dev/null; }

# gunzip_all DIR: one python3 process reads every .gz file of DIR and
# decompresses it; prints the seconds, listing included.
gunzip_all() {
	bench_py "$1" <<'PY'
print(gunzip_all(sys.argv[1], 128 << 20))
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

bench_py "$results" "$dials" <<'PY'
runs, med = medians(sys.argv[1])
table(runs, med, title="row (W1 from S3, 128 MiB decoded)", width=34)
print()
for peer in ("s3fs-gunzip", "rclone-gunzip"):
    for row in ("volfs-s3-cat", "volfs-s3-cat-ce"):
        ratio_of(med, peer + " / " + row, peer, row, 2.5, width=50)
dials_table(sys.argv[2], "volfs mount (TCP connections per run)")
PY
