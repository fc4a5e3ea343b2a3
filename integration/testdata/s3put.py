"""Uploads to an S3-compatible server with boto3, as a user of volfs would.

s3put.py ENDPOINT put BUCKET PREFIX DIR [--gzip-encoded]
    Creates BUCKET if needed and uploads every file under DIR to
    PREFIX/<relative path>. With --gzip-encoded, a file X.gz becomes object
    X stored with Content-Encoding: gzip, as CloudVolume uploads.
s3put.py ENDPOINT policy BUCKET JSON
    Sets the bucket's policy.

Credentials come from the environment (AWS_ACCESS_KEY_ID, ...).
"""
import concurrent.futures
import os
import sys

import boto3
from botocore.config import Config


def client(endpoint):
    cfg = Config(retries={"max_attempts": 20, "mode": "standard"}, max_pool_connections=16,
                 s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=cfg)


def put(s3, bucket, prefix, src, gzip_encoded):
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    except s3.exceptions.BucketAlreadyExists:
        pass
    jobs = []
    for root, _, files in os.walk(src):
        for f in files:
            path = os.path.join(root, f)
            key = os.path.relpath(path, src).replace(os.sep, "/")
            if prefix:
                key = prefix + "/" + key
            extra = {}
            if gzip_encoded and key.endswith(".gz"):
                key, extra = key[:-3], {"ContentEncoding": "gzip"}
            jobs.append((path, key, extra))

    def one(job):
        path, key, extra = job
        with open(path, "rb") as fh:
            s3.put_object(Bucket=bucket, Key=key, Body=fh.read(), **extra)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(one, jobs))
    print(f"{len(jobs)} objects to s3://{bucket}/{prefix}")


def main():
    endpoint, cmd = sys.argv[1], sys.argv[2]
    s3 = client(endpoint)
    if cmd == "put":
        put(s3, sys.argv[3], sys.argv[4], sys.argv[5], "--gzip-encoded" in sys.argv[6:])
    elif cmd == "policy":
        s3.put_bucket_policy(Bucket=sys.argv[3], Policy=sys.argv[4])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
