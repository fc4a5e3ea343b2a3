package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/volfs/volfs/fetcher"
)

// sourceKinds is what a SOURCE may be, for messages that refuse one.
const sourceKinds = "a SOURCE is a directory of volumes or a URL of one: a local path or file:///PATH, " +
	"http(s)://HOST/PATH, gs://BUCKET[/PREFIX] or s3://BUCKET[/PREFIX], " +
	"optionally after a format prefix (precomputed://, zarr://, zarr2://, zarr3://, n5://)"

// packagePrefix is a package's error prefix ("fs: ") at the start of a
// message or of a wrapped cause: the packages' errors carry them for the
// programmer, and the user needs none. The fetcher's errors carry none:
// they begin with the operation and the object ("read gs://b/k: ...").
var packagePrefix = regexp.MustCompile(`(^|: )(?:fs|decode|codec|cache|disk|shared|serve|view): `)

// userMessage presents err, as a command ends with it, in the user's
// words: no internal package names, the cause said once, and for the
// errors a newcomer meets first (a refused connection, an unknown scheme,
// a file given as SOURCE) what to check. The packages keep their prefixed
// errors; only this presentation changes them.
func userMessage(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED) {
		addr := ""
		if op.Addr != nil {
			addr = " " + op.Addr.String()
		}
		return fmt.Sprintf("cannot connect to%s: connection refused; check that the server is running and that SOURCE names the right host and port", addr)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("cannot find the host %q (%s); check the host name in SOURCE", dns.Name, dns.Err)
	}
	msg := packagePrefix.ReplaceAllString(err.Error(), "$1")
	msg = strings.ReplaceAll(msg, "object does not exist", "not found")
	msg = dedupe(msg)
	if errors.Is(err, fetcher.ErrUnsupportedScheme) || errors.Is(err, fetcher.ErrNotDirectory) {
		msg += "; " + sourceKinds
	}
	return msg
}

// dedupe drops a ": "-separated part of msg that repeats the one before
// it ("not found: not found").
func dedupe(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p != out[len(out)-1] {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}
