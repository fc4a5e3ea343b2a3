// Command volfs mounts chunked image volumes (Neuroglancer precomputed,
// Zarr v2 and v3, N5) from gs://, HTTP(S) or local disk as a read-only
// directory tree in which every chunk is a file of decoded voxels.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/fs/fuse"
)

// decodeCores is the number of cores volfs decodes on: GOMAXPROCS as the
// runtime chose it (the process's CPUs, or its cgroup's quota), before
// spareProcs raises it.
var decodeCores = runtime.GOMAXPROCS(0)

// spareProcs runs twice as many Ps as cores, unless GOMAXPROCS is set or
// a cgroup CPU quota binds the process (hasCPUQuota: Go's own default,
// from the quota, is then left alone).
// go-fuse serves each request on a goroutine of its own; with one P per
// core and every P busy decoding, a request waits for the next preemption
// (Go's time slice is 10 ms) before it is even read, and the program
// reading the mount stalls with it. Prefetch decodes stay at one per core
// (the chunk store's CPU slots are decodeCores), so the spare Ps only let
// request goroutines run at once, interleaved with the decoders by the
// kernel's scheduler, which favours a thread that just woke. W1 through a
// mount on 2 cores: 0.79-0.85 s with 2 Ps, 0.68-0.70 s with 4
// (docs/PERFORMANCE.md, "Spare Ps").
func spareProcs() {
	if os.Getenv("GOMAXPROCS") == "" && !hasCPUQuota("") {
		runtime.GOMAXPROCS(2 * decodeCores)
	}
}

func main() {
	spareProcs()
	args := os.Args
	helper := isMountHelper(os.Args[0])
	if helper {
		call, warnings, err := parseHelperArgs(os.Args[1:], flagsFor(onMount))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
			os.Exit(exitUsage)
		}
		for _, w := range warnings {
			fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(os.Args[0]), w)
		}
		if call.verbose {
			fmt.Fprintf(os.Stderr, "%s: running volfs %s\n", filepath.Base(os.Args[0]), strings.Join(call.args, " "))
		}
		if call.fake {
			// -f: everything but the mount. The mountpoint is the last
			// argument.
			if err := fuse.CheckMountpoint(call.args[len(call.args)-1]); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
				os.Exit(exitMountFailure)
			}
			return
		}
		args = append([]string{os.Args[0]}, call.args...)
	}
	if values, ok := completeFlagValue(args); ok {
		fmt.Println(strings.Join(values, "\n"))
		return
	}
	rep := newReporter()
	if err := app(rep).Run(args); err != nil {
		err = errors.New(userMessage(err))
		rep.failed(err)
		if rep.child {
			// Stderr is the log file or nowhere: log it where the
			// logs go (syslog without a file).
			slog.Error("stopped", "err", err)
		} else {
			fmt.Fprintln(os.Stderr, "volfs:", err)
		}
		if helper {
			os.Exit(exitMountFailure)
		}
		os.Exit(1)
	}
}

// app is the volfs command line. rep receives the readiness of a mount.
func app(rep *reporter) *cli.App {
	a := &cli.App{
		Name:    "volfs",
		Usage:   "mount chunked image volumes as decompressed files",
		Version: version(),
		Description: `volfs shows every chunk of a chunked image volume as a read-only file of decoded voxels,
and every volume as the same volume stored uncompressed.

FORMATS: Neuroglancer precomputed (raw, gzip, jpeg, png, compressed_segmentation,
sharded), Zarr v2 and v3 (blosc, gzip, zlib, zstd, lz4, bz2, xz; v3 sharding) and N5. The format
of each directory is found from its metadata files; a prefix pins the root's:
precomputed://, zarr:// (v2 or v3), zarr2://, zarr3://, n5://.

SOURCES: local paths or file:// URLs; http:// and https:// URLs; gs://BUCKET[/PREFIX]
(Application Default Credentials or anonymous; STORAGE_EMULATOR_HOST for an emulator);
s3://BUCKET[/PREFIX] (AWS credentials and region as the AWS CLI finds them, or --anonymous;
--endpoint-url for MinIO, Ceph, SeaweedFS, R2). A SOURCE that does not exist or holds nothing
volfs can serve is refused (--allow-empty-source mounts it).

` + sizeUnits + `

Every flag can also be set in the environment, as VOLFS_ and the flag's name in upper case
with underscores for dashes: VOLFS_CACHE_SIZE=2GiB is --cache-size=2GiB. A flag on the
command line wins.

Installed as mount.volfs (a symlink), volfs is a mount(8) helper: "mount -t volfs -o
cache_size=2GiB,allow_other SOURCE MOUNTPOINT", or the fstab line "SOURCE MOUNTPOINT volfs
cache_size=2GiB,_netdev 0 0", mounts in the background; every flag of mount is an -o option
by its name with underscores for dashes, and the generic options of mount(8) are ignored.

` + appExamples,
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			{
				Name:      "mount",
				Usage:     "serve SOURCE at MOUNTPOINT until SIGINT, SIGTERM or umount",
				ArgsUsage: "SOURCE MOUNTPOINT",
				Flags:     flagsFor(onMount),
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return errors.New("usage: volfs mount SOURCE MOUNTPOINT")
					}
					if c.Bool("daemon") && !rep.child {
						// Refuse what can be refused here, at once.
						if _, err := newLogger(logFlags(c, false)); err != nil {
							return err
						}
						if err := checkMountpoint(c, c.Args().Get(0), c.Args().Get(1)); err != nil {
							return err
						}
						if _, err := passthroughMinSize(c); err != nil {
							return err
						}
						return daemonize(c.String("log-file"))
					}
					return serve(c, rep, c.Args().Get(0), c.Args().Get(1), nil)
				},
			},
			{
				Name:      "demo",
				Usage:     "mount a built-in sample volume, served over loopback HTTP by this process",
				ArgsUsage: "[MOUNTPOINT]",
				Flags:     flagsFor(onDemo),
				Action:    func(c *cli.Context) error { return runDemo(c, rep) },
			},
			{
				Name:      "info",
				Usage:     "list the volumes and scales under SOURCE",
				ArgsUsage: "SOURCE",
				Flags:     flagsFor(onInfo),
				Action:    runInfo,
			},
			{
				Name:      "cat",
				Usage:     "write the bytes of the mounted files PATH... to stdout in order, without FUSE",
				ArgsUsage: "SOURCE PATH...",
				Flags:     flagsFor(onCat),
				Action:    runCat,
			},
			warmCommand(),
			serveCommand(rep),
			{
				Name:   "man",
				Usage:  "write volfs's man page (troff) to stdout: volfs man > volfs.1",
				Action: runMan,
			},
			{
				Name:      "completion",
				Usage:     "write a shell completion script to stdout: source <(volfs completion bash)",
				ArgsUsage: "bash|zsh|fish",
				Action:    runCompletion,
			},
		},
	}
	a.Action = unknownCommand
	a.OnUsageError = usageError
	for _, c := range a.Commands {
		c.Description = commandHelp[c.Name]
		c.OnUsageError = usageError
		// No command has subcommands: without this urfave/cli gives each
		// a "help" one, which shell completion then offers in place of
		// the file names SOURCE and MOUNTPOINT are. --help stays.
		c.HideHelpCommand = true
	}
	return a
}

// unknownCommand is the app's action, run when the first argument names
// no command: help without arguments, otherwise the closest command.
func unknownCommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowAppHelp(c)
	}
	name := c.Args().First()
	return fmt.Errorf("unknown command %q; did you mean %q? (volfs --help lists the commands)", name, closest(name, commandNames(c.App)))
}

// usageError answers a flag that the command does not take with the
// closest one it does, in one line instead of the whole help.
func usageError(c *cli.Context, err error, _ bool) error {
	cmd, flags := "volfs", c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		cmd, flags = "volfs "+c.Command.Name, c.Command.Flags
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		name = strings.TrimLeft(name, "-")
		msg = fmt.Sprintf("unknown flag --%s; did you mean --%s? (%s --help lists the flags)", name, closest(name, names), cmd)
	} else {
		msg += fmt.Sprintf(" (%s --help lists the flags)", cmd)
	}
	return errors.New(msg)
}

// commandNames lists the names of a's commands.
func commandNames(a *cli.App) []string {
	var names []string
	for _, c := range a.Commands {
		names = append(names, c.Names()...)
	}
	return names
}

// closest returns the candidate nearest to s by edit distance (a
// transposition counting as one edit), the first of equals.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and adjacent transpositions.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
