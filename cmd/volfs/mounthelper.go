package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// mount(8) runs /sbin/mount.TYPE as an external helper (see "EXTERNAL
// HELPERS" in mount(8)):
//
//	mount.volfs SOURCE MOUNTPOINT [-sfnv] [-N namespace] [-o options] [-t type.subtype]
//
// volfs installed under that name (a symlink) translates this into
// `volfs mount --daemon --flag=value... SOURCE MOUNTPOINT`: each -o option
// is a flag of the mount command by its underscore name (cache_size=2GiB,
// allow_other, missing=error), the generic options mount passes to every
// filesystem are ignored, and an unknown one is refused by name. The helper
// always detaches: daemon=false is ignored with a warning.

// helperPrefix is how a mount helper's name starts; mount.fuse.volfs is
// what mount(8) looks for given "-t fuse.volfs".
const helperPrefix = "mount."

// isMountHelper reports whether argv0 names volfs as a mount helper.
func isMountHelper(argv0 string) bool {
	return strings.HasPrefix(filepath.Base(argv0), helperPrefix)
}

// Exit statuses of a mount helper, as mount(8) documents them.
const (
	exitUsage        = 1  // incorrect invocation or permissions
	exitMountFailure = 32 // mount failure
)

// genericOptions are the options mount(8) and fstab pass to every
// filesystem: they mean nothing to volfs, which is always read-only,
// always nodev and nosuid through FUSE, and has no device to probe.
var genericOptions = map[string]bool{
	"rw": true, "ro": true, "defaults": true, "auto": true, "noauto": true,
	"_netdev": true, "nofail": true, "user": true, "nouser": true, "users": true,
	"owner": true, "group": true, "exec": true, "noexec": true,
	"suid": true, "nosuid": true, "dev": true, "nodev": true,
	"sync": true, "async": true, "atime": true, "noatime": true, "diratime": true,
	"nodiratime": true, "relatime": true, "norelatime": true, "strictatime": true,
	"lazytime": true, "nolazytime": true, "silent": true, "loud": true,
}

// isGenericOption reports whether a -o option (name, without its value)
// is one that volfs ignores: a generic option, a userspace x-* option
// (x-systemd.automount, ...), a comment=, a helper=, or the user=NAME
// libmount adds for a user mount.
func isGenericOption(name string) bool {
	return genericOptions[name] || strings.HasPrefix(name, "x-") || name == "comment" || name == "helper" || name == "uhelper"
}

// helperCall is a parsed mount helper invocation.
type helperCall struct {
	args    []string // for the volfs app, after argv[0]
	fake    bool     // -f: check everything, mount nothing
	verbose bool     // -v
}

// parseHelperArgs translates a mount helper's arguments (after argv[0])
// into volfs's, given the flags of the mount command. sloppy (-s) turns the
// refusal of an unknown option into a warning in the returned list.
func parseHelperArgs(argv []string, flags []cli.Flag) (call helperCall, warnings []string, err error) {
	var pos, opts []string
	sloppy := false
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		switch a {
		case "-o", "-t", "-N":
			if i+1 == len(argv) {
				return helperCall{}, nil, fmt.Errorf("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, splitOptions(argv[i])...)
			case "-N":
				// Entering another mount namespace needs a single-threaded
				// process; a Go program is not one.
				return helperCall{}, nil, errors.New("-N (another mount namespace) is not supported")
			}
			continue
		}
		if strings.HasPrefix(a, "-o") { // -oopt1,opt2
			opts = append(opts, splitOptions(a[2:])...)
			continue
		}
		if strings.HasPrefix(a, "-t") || strings.HasPrefix(a, "--") {
			return helperCall{}, nil, fmt.Errorf("unknown argument %s", a)
		}
		for _, c := range a[1:] {
			switch c {
			case 's':
				sloppy = true
			case 'f':
				call.fake = true
			case 'v':
				call.verbose = true
			case 'n': // no /etc/mtab to write: the kernel keeps the table
			default:
				return helperCall{}, nil, fmt.Errorf("unknown argument -%c", c)
			}
		}
	}
	if len(pos) != 2 {
		return helperCall{}, nil, fmt.Errorf("usage: %svolfs SOURCE MOUNTPOINT [-sfnv] [-o options]", helperPrefix)
	}
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		byName[f.Names()[0]] = f
	}
	call.args = []string{"mount", "--daemon"}
	for _, o := range opts {
		name, value, hasValue := strings.Cut(o, "=")
		if name == "" {
			continue
		}
		f, ok := byName[strings.ReplaceAll(name, "_", "-")]
		switch {
		case ok && f.Names()[0] == "daemon":
			// mount(8) waits for its helper: one that serves in the
			// foreground never returns.
			warnings = append(warnings, fmt.Sprintf("ignoring %s: mount.volfs always serves in the background", o))
			continue
		case ok:
		case isGenericOption(name):
			continue
		case sloppy:
			warnings = append(warnings, fmt.Sprintf("ignoring unknown option %s (-s)", name))
			continue
		default:
			return helperCall{}, nil, fmt.Errorf("unknown option %s", name)
		}
		flag := "--" + f.Names()[0]
		if _, isBool := f.(*cli.BoolFlag); isBool {
			if hasValue {
				flag += "=" + value
			}
		} else if !hasValue {
			return helperCall{}, nil, fmt.Errorf("option %s needs a value (%s=...)", name, name)
		} else {
			flag += "=" + value
		}
		call.args = append(call.args, flag)
	}
	call.args = append(call.args, "--", pos[0], pos[1])
	return call, warnings, nil
}

// splitOptions splits a -o list at commas outside double quotes and drops
// the quotes, as libmount writes a value such as comment="a,b".
func splitOptions(s string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteRune(c)
		}
	}
	return append(out, b.String())
}
