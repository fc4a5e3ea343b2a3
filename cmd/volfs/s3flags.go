package main

import (
	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/fetcher"
)

// s3FlagTable lists the flags of s3:// sources, rows of flagTable.
func s3FlagTable() []flagDef {
	return []flagDef{
		{onSource, &cli.StringFlag{Name: "profile", Usage: "s3:// sources: the AWS shared-config profile whose credentials and region to use (default: AWS_PROFILE, else default)"}},
		{onSource, &cli.StringFlag{Name: "region", Usage: "s3:// sources: the bucket's region (default: discovered from the bucket, else the configured region, else us-east-1)"}},
		{onSource, &cli.StringFlag{Name: "endpoint-url", Usage: "s3:// sources: an S3-compatible service (MinIO, Ceph, SeaweedFS, R2...), addressed path-style (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS S3)"}},
		{onSource, &cli.BoolFlag{Name: "requester-pays", Usage: "s3:// sources: read a requester-pays bucket, billed to the caller's account"}},
	}
}

// s3Options is what c's flags ask of an s3:// source; the session flags
// are the HTTP source's.
func s3Options(c *cli.Context, h fetcher.HTTPOptions) fetcher.S3Options {
	return fetcher.S3Options{
		Conns: h.Conns, StallTimeout: h.StallTimeout, MinRate: h.MinRate, Log: h.Log, MaxAttempts: h.MaxAttempts,
		Anonymous: c.Bool("anonymous"), Profile: c.String("profile"), Region: c.String("region"),
		Endpoint: c.String("endpoint-url"), RequesterPays: c.Bool("requester-pays"),
	}
}
