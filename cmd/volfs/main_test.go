package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"512MiB", 512 << 20, false},
		{"2GiB", 2 << 30, false},
		{"2G", 2 << 30, false},
		{"2g", 2 << 30, false},
		{"2GB", 2e9, false},
		{"2gb", 2e9, false},
		{"64K", 64 << 10, false},
		{"64KB", 64e3, false},
		{"1T", 1 << 40, false},
		{"1.5GiB", 3 << 29, false},
		{"100MB", 100e6, false},
		{"1048576", 1 << 20, false},
		{"1048576B", 1 << 20, false},
		{"0", 0, false},
		{"12 KiB", 12 << 10, false},
		{" 7MiB ", 7 << 20, false},
		{"4EiB", 1 << 62, false},
		{"lots", 0, true},
		{"NaN", 0, true},
		{"nan", 0, true},
		{"Inf", 0, true},
		{"+Inf", 0, true},
		{"-1MiB", 0, true},
		{"-0", 0, true},
		{"+1MiB", 0, true},
		{"1e9", 0, true},
		{"0x10", 0, true},
		{"1,000", 0, true},
		{".5G", 0, true},
		{"1.G", 0, true},
		{"12  KiB", 0, true},
		{"5XB", 0, true},
		{"5 MiBs", 0, true},
		{"8EiB", 0, true},
		{"MiB", 0, true},
		{"", 0, true},
	} {
		got, err := parseSize(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestFormatSize checks that what volfs prints as a size reads back.
func TestFormatSize(t *testing.T) {
	for _, n := range []int64{0, 1023, 16 << 20, 512 << 20, 3 << 29} {
		got, err := parseSize(formatSize(n))
		if err != nil || got != n {
			t.Errorf("parseSize(formatSize(%d) = %q) = %d, %v; want %d", n, formatSize(n), got, err, n)
		}
	}
}

func TestSplitFormat(t *testing.T) {
	for _, tc := range []struct {
		in, formats, rest string
	}{
		{"precomputed://https://h/a", "[precomputed]", "https://h/a"},
		{"precomputed:///data/a", "[precomputed]", "/data/a"},
		{"https://h/a", "[]", "https://h/a"},
		{"/data/a", "[]", "/data/a"},
		{"zarr://https://h/a", "[zarr3 zarr2]", "https://h/a"},
		{"zarr2://https://h/a", "[zarr2]", "https://h/a"},
		{"zarr3:///data", "[zarr3]", "/data"},
		{"n5:///data", "[n5]", "/data"},
	} {
		f, r, err := splitFormat(tc.in)
		if fmt.Sprint(f) != tc.formats || r != tc.rest || err != nil {
			t.Errorf("splitFormat(%q) = %v, %q, %v; want %s, %q", tc.in, f, r, err, tc.formats, tc.rest)
		}
	}
}

func TestParseHelperArgs(t *testing.T) {
	flags := flagsFor(onMount)
	for _, tc := range []struct {
		name string
		argv []string
		want string // args joined by spaces
		fake bool
		err  string
	}{
		{"options after", []string{"src", "/mnt", "-o", "rw,cache_size=2GiB,allow_other,uid=7,missing=error"},
			"mount --daemon --cache-size=2GiB --allow-other --uid=7 --missing=error -- src /mnt", false, ""},
		{"options before", []string{"-o", "log_file=/var/log/volfs.log", "https://h/a", "/mnt"},
			"mount --daemon --log-file=/var/log/volfs.log -- https://h/a /mnt", false, ""},
		{"generic options ignored", []string{"src", "/mnt", "-o", "defaults,ro,noauto,auto,_netdev,nofail,user,users,exec,noexec,suid,nosuid,dev,nodev,x-systemd.automount,x-systemd.idle-timeout=60,user=alice,comment=\"a,b\""},
			"mount --daemon -- src /mnt", false, ""},
		{"attached -o and flags", []string{"-nv", "src", "/mnt", "-oallow_non_empty,debug_fuse=false", "-t", "volfs"},
			"mount --daemon --allow-non-empty --debug-fuse=false -- src /mnt", false, ""},
		{"fake", []string{"-f", "src", "/mnt"}, "mount --daemon -- src /mnt", true, ""},
		{"sloppy", []string{"-s", "src", "/mnt", "-o", "colour=blue"}, "mount --daemon -- src /mnt", false, ""},
		{"daemon=false ignored", []string{"src", "/mnt", "-o", "daemon=false,daemon,cache_size=1G"}, "mount --daemon --cache-size=1G -- src /mnt", false, ""},
		{"dashes accepted", []string{"src", "/mnt", "-o", "cache-size=1G"}, "mount --daemon --cache-size=1G -- src /mnt", false, ""},
		{"unknown option", []string{"src", "/mnt", "-o", "ro,colour=blue"}, "", false, "unknown option colour"},
		{"value missing", []string{"src", "/mnt", "-o", "missing"}, "", false, "option missing needs a value"},
		{"no mountpoint", []string{"src", "-o", "ro"}, "", false, "usage"},
		{"dangling -o", []string{"src", "/mnt", "-o"}, "", false, "-o needs a value"},
		{"namespace", []string{"src", "/mnt", "-N", "/proc/1/ns/mnt"}, "", false, "-N"},
		{"unknown letter", []string{"-q", "src", "/mnt"}, "", false, "unknown argument -q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call, _, err := parseHelperArgs(tc.argv, flags)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(call.args, " "); got != tc.want || call.fake != tc.fake {
				t.Errorf("got %q fake=%v, want %q fake=%v", got, call.fake, tc.want, tc.fake)
			}
		})
	}
}

// TestFlagTable checks that every flag reads its VOLFS_ variable and has a
// row, with that variable, in the README's flag table.
func TestFlagTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, name := range strings.Split(cells[1], ",") {
			rows[strings.Trim(strings.TrimSpace(name), "`")] = line
		}
	}
	for _, f := range flagsFor(onSource) {
		name := f.Names()[0]
		env := envName(name)
		if got := f.(interface{ GetEnvVars() []string }).GetEnvVars(); len(got) != 1 || got[0] != env {
			t.Errorf("--%s reads %v, want [%s]", name, got, env)
		}
		row, ok := rows["--"+name]
		if !ok {
			t.Errorf("the README's flag table has no row for --%s", name)
		} else if !strings.Contains(row, "`"+env+"`") {
			t.Errorf("the README's row for --%s does not name %s:\n%s", name, env, row)
		}
	}
}

// TestEnvOverridesDefault runs the mount command's flag parsing with
// VOLFS_ variables set and a command line that overrides one of them.
func TestEnvOverridesDefault(t *testing.T) {
	t.Setenv("VOLFS_CACHE_SIZE", "2GiB")
	t.Setenv("VOLFS_ALLOW_OTHER", "true")
	t.Setenv("VOLFS_MISSING", "error")
	var got []string
	a := app(&reporter{})
	for _, c := range a.Commands {
		if c.Name == "mount" {
			c.Action = func(c *cli.Context) error {
				got = []string{c.String("cache-size"), fmt.Sprint(c.Bool("allow-other")), c.String("missing"), c.String("log-format")}
				return nil
			}
		}
	}
	if err := a.Run([]string{"volfs", "mount", "--missing=fill", "src", "/mnt"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"2GiB", "true", "fill", "text"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestSuggestions runs the command line with a misspelt command or flag:
// the error names the closest valid one, in one line.
func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mout", "src", "/mnt"}, `unknown command "mout"; did you mean "mount"?`},
		{[]string{"ifno", "src"}, `unknown command "ifno"; did you mean "info"?`},
		{[]string{"catt"}, `unknown command "catt"; did you mean "cat"?`},
		{[]string{"mount", "--cache-sise", "1GiB", "src", "/mnt"}, "unknown flag --cache-sise; did you mean --cache-size? (volfs mount --help"},
		{[]string{"mount", "--alow-other", "src", "/mnt"}, "unknown flag --alow-other; did you mean --allow-other?"},
		{[]string{"info", "--anonymus", "gs://b"}, "unknown flag --anonymus; did you mean --anonymous? (volfs info --help"},
		{[]string{"cat", "-mising=error", "src", "p"}, "unknown flag --mising; did you mean --missing?"},
		{[]string{"--verson"}, "unknown flag --verson; did you mean --version? (volfs --help"},
	} {
		a := app(&reporter{})
		a.Writer, a.ErrWriter = io.Discard, io.Discard
		err := a.Run(append([]string{"volfs"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("volfs %s: got %v, want one line saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"mount", "mount", 0}, {"mout", "mount", 1}, {"mountt", "mount", 1},
		{"muont", "mount", 1}, {"cache-sise", "cache-size", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestHelpDescribes checks that --help (and so the man page, rendered
// from the same text) names today's formats, sources and size units.
func TestHelpDescribes(t *testing.T) {
	var help strings.Builder
	a := app(&reporter{})
	a.Writer = &help
	if err := a.Run([]string{"volfs", "--help"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"precomputed", "Zarr v2 and v3", "N5", "zarr3://", "n5://", "gs://", "https://", "file://", "KiB", "powers of 1000", "--allow-empty-source"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help does not say %q", want)
		}
	}
}

// TestReadmePython checks that the README's shell examples run python as
// Debian's /usr/bin/python3, which has numpy, and not whatever python3 is
// first on PATH.
func TestReadmePython(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	inCode := false
	for i, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if !inCode {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.HasSuffix(f, "python3") && f != "/usr/bin/python3" {
				t.Errorf("README.md:%d runs %s, want /usr/bin/python3: %s", i+1, f, line)
			}
		}
	}
}

// TestSizesNamesEverySizeFlag: every flag whose help says its value is a
// size ("see SIZES") is named in the SIZES paragraph of --help and the
// man page, and the paragraph names no other (--passthrough-min-size was
// left out of it).
func TestSizesNamesEverySizeFlag(t *testing.T) {
	head, _, _ := strings.Cut(sizeUnits, ")")
	named := map[string]bool{}
	for _, n := range strings.Split(strings.TrimPrefix(head, "SIZES ("), ",") {
		named[strings.TrimSpace(n)] = true
	}
	for _, d := range flagTable() {
		name := "--" + d.flag.Names()[0]
		usage := d.flag.(interface{ GetUsage() string }).GetUsage()
		if strings.Contains(usage, "see SIZES") != named[name] {
			t.Errorf("%s: help %q; SIZES names it: %v", name, usage, named[name])
		}
		delete(named, name)
	}
	for n := range named {
		t.Errorf("SIZES names %s, which is no flag", n)
	}
}
