package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/volfs/volfs/fs"
)

// runCat writes the files PATH... of SOURCE to stdout in order, as
// cat(1) does, through one tree and so one chunk cache. Every path is
// resolved before the first byte is written, so a missing path writes
// nothing; a read that fails stops the command with the bytes before it
// written.
func runCat(c *cli.Context) error {
	if c.NArg() < 2 {
		return errors.New("usage: volfs cat SOURCE PATH [PATH ...]")
	}
	tree, err := openTree(c, c.Args().Get(0), "", false)
	if err != nil {
		return err
	}
	defer tree.Close()
	paths := c.Args().Slice()[1:]
	files := make([]fs.File, len(paths))
	var total int64
	for i, p := range paths {
		n, err := tree.Resolve(c.Context, p)
		if err != nil {
			return err
		}
		f, ok := n.(fs.File)
		if !ok {
			return fmt.Errorf("%s is a directory", p)
		}
		files[i] = f
		total += f.Size()
	}
	var out io.Writer = os.Stdout
	if total >= progressMinBytes && term.IsTerminal(int(os.Stderr.Fd())) {
		desc := paths[0]
		if len(paths) > 1 {
			desc = fmt.Sprintf("%d files", len(paths))
		}
		bar := progressbar.DefaultBytes(total, desc)
		defer bar.Close()
		out = io.MultiWriter(os.Stdout, bar)
	}
	buf := make([]byte, 1<<20)
	for i, f := range files {
		if err := copyFile(c.Context, out, f, paths[i], buf); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes the bytes of f, called name in errors, to w, reading
// into buf.
func copyFile(ctx context.Context, w io.Writer, f fs.File, name string, buf []byte) error {
	for off := int64(0); off < f.Size(); {
		n, err := f.ReadAt(ctx, buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%s: ends at %d bytes, want %d", name, off, f.Size())
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// progressMinBytes is the fewest bytes for which `volfs cat` shows a
// progress bar (on a terminal): a chunk file or two reads in well under a
// second.
const progressMinBytes = 64 << 20
