package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/urfave/cli/v2"
)

// sourceHelp says what a SOURCE may be, in `volfs --help`, each command's
// help and the man page.
const sourceHelp = `SOURCE is where the volumes are: a local path or file:///PATH, http://... or https://...,
gs://BUCKET[/PREFIX] or s3://BUCKET[/PREFIX] (--endpoint-url for an S3-compatible store).
A prefix pins the format of its root: precomputed://, zarr://, zarr2://, zarr3://, n5://
(precomputed://https://HOST/LAYER).`

// commandHelp is each command's DESCRIPTION in its --help and the man
// page: what it does beyond its one-line usage, and two or three examples.
var commandHelp = map[string]string{
	"mount": sourceHelp + `

A signal (Ctrl-C, SIGTERM) or umount MOUNTPOINT unmounts and exits; while a program
uses the mount, a second Ctrl-C detaches it and exits. SIGHUP does not stop it.

EXAMPLES:
   volfs mount /data/brain.zarr /mnt/brain
   volfs mount --cache-size 2GiB https://example.org/datasets/brain/image /mnt/image
   volfs mount --endpoint-url http://127.0.0.1:8333 s3://bucket/brain /mnt/brain`,
	"demo": `Generates a sample volume in memory, serves it on loopback HTTP and mounts it at
MOUNTPOINT (default: a new temporary directory). Needs no data and no network. It serves
until Ctrl-C or umount MOUNTPOINT, then exits.

EXAMPLES:
   volfs demo                  # prints the mountpoint and what to try, in another terminal
   volfs demo /tmp/demo &      # then: ls /tmp/demo/image/8_8_8; umount /tmp/demo`,
	"info": sourceHelp + `

Exits non-zero when SOURCE holds no volume.

EXAMPLES:
   volfs info /data/brain.zarr
   volfs info gs://bucket/brain
   volfs info --anonymous s3://bucket/brain.zarr`,
	"cat": sourceHelp + `

PATH is relative to the mount root, as ls MOUNTPOINT shows it.

EXAMPLES:
   volfs cat /data/brain/image 8_8_8/0-64_0-64_0-64 > chunk.raw
   volfs cat https://example.org/brain/image info`,
	"warm": sourceHelp + `

EXAMPLES:
   volfs warm --cache-dir /var/cache/volfs https://example.org/brain/image
   volfs warm --cache-dir /var/cache/volfs --bbox 0:1024,0:1024,0:64 https://example.org/brain/image 8_8_8
   volfs warm --dry-run https://example.org/brain/image 8_8_8`,
	"serve": sourceHelp + `

Listens on 127.0.0.1:8080 by default; beyond loopback it needs --auth, --auth-file or
--allow-anonymous.

EXAMPLES:
   volfs serve /data/brain                        # http://127.0.0.1:8080/
   volfs serve --webdav --addr :8080 --auth-file /etc/volfs.htpasswd --cert c.pem --key k.pem gs://bucket/brain
   curl 'http://127.0.0.1:8080/image/8_8_8/?format=json'`,
	"man": `EXAMPLES:
   volfs man > /usr/local/share/man/man1/volfs.1 && man volfs
   volfs man | man -l -`,
	"completion": `EXAMPLES:
   source <(volfs completion bash)
   volfs completion zsh > "${fpath[1]}/_volfs"
   volfs completion fish > ~/.config/fish/completions/volfs.fish`,
}

// appExamples close `volfs --help` and the man page.
const appExamples = `EXAMPLES:
   volfs demo                                           # a sample volume, no data needed
   volfs info https://example.org/datasets/brain        # what SOURCE holds
   volfs mount /data/brain.zarr /mnt/brain              # until Ctrl-C or umount /mnt/brain
   volfs serve s3://bucket/brain                        # over HTTP, for hosts without FUSE`

// manPage renders the man page of a in section 1: NAME, a SYNOPSIS with
// every command, DESCRIPTION, each command with its flags by category,
// and EXAMPLES. It is rendered from the definitions, as --help is.
func manPage(a *cli.App) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%% %s 1\n\n# NAME\n\n%s - %s\n\n# SYNOPSIS\n\n", a.Name, a.Name, manText(a.Usage))
	for _, c := range a.Commands {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(&b, "**%s %s**%s %s\n\n", a.Name, c.Name, manOptions(c), manText(c.ArgsUsage))
	}
	fmt.Fprintf(&b, "**%s** --help | --version\n\n", a.Name)
	desc := strings.TrimSuffix(strings.TrimSpace(a.Description), appExamples)
	fmt.Fprintf(&b, "# DESCRIPTION\n\n%s\n\n# COMMANDS\n\n", manBlock(strings.TrimSpace(desc)))
	for _, c := range a.Commands {
		if c.Hidden {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n**%s %s**%s %s\n\n%s\n\n", c.Name, a.Name, c.Name, manOptions(c), manText(c.ArgsUsage), manText(c.Usage))
		if c.Description != "" {
			fmt.Fprintf(&b, "%s\n\n", manBlock(c.Description))
		}
		byCat := map[string][]cli.Flag{}
		var cats []string
		for _, f := range c.VisibleFlags() {
			vf, ok := f.(cli.CategorizableFlag)
			cat := ""
			if ok {
				cat = vf.GetCategory()
			}
			if _, seen := byCat[cat]; !seen {
				cats = append(cats, cat)
			}
			byCat[cat] = append(byCat[cat], f)
		}
		sort.Strings(cats)
		for _, cat := range cats {
			if cat != "" {
				fmt.Fprintf(&b, "*%s*\n\n", manText(strings.TrimSuffix(cat, ":")))
			}
			for _, f := range byCat[cat] {
				fmt.Fprintf(&b, "%s\n\n", manFlag(f))
			}
		}
	}
	fmt.Fprintf(&b, "# EXAMPLES\n\n%s\n", manBlock(strings.TrimPrefix(appExamples, "EXAMPLES:\n")))
	return string(md2man.Render([]byte(b.String())))
}

// manOptions is " [OPTIONS]" in the synopsis of a command that has any.
func manOptions(c *cli.Command) string {
	if len(c.VisibleFlags()) == 0 {
		return ""
	}
	return " [*OPTIONS*]"
}

// manFlag renders one flag as a man page paragraph: its name, value,
// meaning, default and environment variable.
func manFlag(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return "**--" + f.Names()[0] + "**"
	}
	name := "**--" + f.Names()[0] + "**"
	if df.TakesValue() {
		name += "=*value*"
	}
	text := df.GetUsage()
	def := df.GetDefaultText()
	if bf, ok := f.(*cli.BoolFlag); ok && bf.DefaultText == "" {
		def = "false"
	}
	if def != "" {
		text += " (default: " + def + ")"
	}
	if env := df.GetEnvVars(); len(env) > 0 {
		text += " [$" + strings.Join(env, ", $") + "]"
	}
	return name + ": " + manText(text)
}

// manText escapes s for go-md2man's markdown, so that a pair of brackets
// followed by parentheses (gs://BUCKET[/PREFIX] (...)) is not a link and
// stars and underscores are not emphasis.
func manText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`, "`", "\\`", "<", `\<`, ">", `\>`)
	return r.Replace(s)
}

// manBlock renders s, text laid out as --help shows it (paragraphs,
// indented examples and lists), for the man page: indented lines are
// kept as they are in a literal block, the rest flows.
func manBlock(s string) string {
	var out []string
	for _, para := range strings.Split(s, "\n\n") {
		lines := strings.Split(para, "\n")
		var text, code []string
		flush := func() {
			if len(text) > 0 {
				out = append(out, manText(strings.Join(text, "\n")))
				text = nil
			}
			if len(code) > 0 {
				out = append(out, "```\n"+strings.Join(code, "\n")+"\n```")
				code = nil
			}
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "   ") {
				if len(text) > 0 {
					flush()
				}
				code = append(code, strings.TrimPrefix(l, "   "))
				continue
			}
			if len(code) > 0 {
				flush()
			}
			if strings.HasSuffix(l, ":") && strings.ToUpper(l) == l {
				flush()
				out = append(out, "**"+strings.TrimSuffix(l, ":")+"**")
				continue
			}
			text = append(text, l)
		}
		flush()
	}
	return strings.Join(out, "\n\n")
}
