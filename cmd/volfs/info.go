package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fs"
)

func runInfo(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("usage: volfs info SOURCE")
	}
	tree, err := openTree(c, c.Args().First(), "", false)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	// ORDER says how SIZE, OFFSET, RESOLUTION and CHUNK list the axes:
	// x first (precomputed, N5) or as the metadata does, x last (Zarr).
	fmt.Fprintln(w, "VOLUME\tARRAY\tFORMAT\tDTYPE\tCHANNELS\tORDER\tSIZE\tOFFSET\tRESOLUTION\tCHUNK\tENCODING\tCHUNKS\tDECODED\tNOTES")
	found, rows := false, 0
	var images []*decode.OMEImage
	var objects []fs.ObjectDir
	skipped, err := tree.WalkBounded(c.Context, infoDepth, fs.MaxWalkEntries, func(dir string, v *decode.Volume, refused error) {
		found = true
		if refused != nil {
			rows++
			fmt.Fprintf(w, "%s\t\t\t\t\t\t\t\t\t\t\t\t\tnot decoded: %v\n", orDot(dir), refused)
			return
		}
		rows += len(v.Arrays) + len(v.Skipped)
		objects = append(objects, tree.ObjectDirs(c.Context, v)...)
		for _, a := range v.Arrays {
			if a.OME != nil && !slices.Contains(images, a.OME) {
				images = append(images, a.OME)
			}
			var notes []string
			for _, kv := range a.Describe {
				notes = append(notes, kv[0]+"="+kv[1])
			}
			if a.Unitless {
				notes = append(notes, "resolution=no-unit")
			}
			for _, why := range fs.ViewNotes(a) {
				notes = append(notes, "views: "+why)
			}
			order := "x-first"
			if a.XLast {
				order = "x-last"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
				orDot(v.Dir), orDot(a.Name), v.Format, a.DType.Name, a.Channels, order, dims(a.Shape), dims(a.Offset),
				resolution(a), dims(a.Chunk), a.Encoding, a.NumChunks(), formatSize(decodedBytes(a)), strings.Join(notes, " "))
		}
		for _, sk := range v.Skipped {
			fmt.Fprintf(w, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\tnot decoded: %v\n", orDot(v.Dir), sk.Name, v.Format, sk.Err)
		}
	})
	if err != nil {
		return err
	}
	if !found || rows == 0 {
		printSkipped(skipped)
		return fmt.Errorf("no volume found under %s: no metadata (info, .zarray, .zgroup with .zmetadata, zarr.json, attributes.json) there or in the directories below", tree.Source())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	printSkipped(skipped)
	if err := printObjects(objects); err != nil {
		return err
	}
	return printOME(images)
}

// printObjects lists the object directories of precomputed segmentations
// (skeletons, meshes): each one's type, whether it is sharded, and the
// views that convert it or why none does.
func printObjects(objects []fs.ObjectDir) error {
	if len(objects) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nOBJECTS\tTYPE\tSTORAGE\tVIEWS")
	for _, o := range objects {
		storage := "unsharded"
		switch {
		case o.Sharding != "":
			storage = "sharded(" + o.Sharding + ")"
		case o.Type == "":
			storage = "-" // its info was not read: nothing is known
		}
		views := o.Views
		if o.Note != "" {
			views = o.Note
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", o.Dir, orDash(o.Type), storage, views)
	}
	return w.Flush()
}

// printOME lists OME-Zarr images, one entry each: the image's group, its
// axes (name, type, unit) and, per level, the array and its scale and
// translation in the axes' units; then one line per image whose
// transforms give no voxel size, saying why.
func printOME(images []*decode.OMEImage) error {
	if len(images) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nOME-ZARR IMAGE\tNGFF\tNAME\tAXES\tLEVEL\tSCALE\tTRANSLATION")
	for _, img := range images {
		axes := make([]string, len(img.Axes))
		for i, ax := range img.Axes {
			axes[i] = ax.Name
			if ax.Type != "" || ax.Unit != "" {
				axes[i] += "(" + strings.Trim(ax.Type+" "+ax.Unit, " ") + ")"
			}
		}
		for i, l := range img.Levels {
			scale, shift := floats(l.Scale, "x"), floats(l.Translation, ",")
			if img.NoScale != nil {
				scale, shift = "not used (views have unit spacing)", "-"
			} else if !slices.ContainsFunc(l.Translation, func(v float64) bool { return v != 0 }) {
				shift = "-"
			}
			if i == 0 {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDot(img.Dir), orDash(img.Version), orDash(img.Name), strings.Join(axes, " "), l.Path, scale, shift)
			} else {
				fmt.Fprintf(w, "\t\t\t\t%s\t%s\t%s\n", l.Path, scale, shift)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, img := range images {
		if img.NoScale != nil {
			fmt.Printf("OME-Zarr image %s: transforms not used: %v\n", orDot(img.Dir), img.NoScale)
		}
	}
	return nil
}

// floats joins v, each in its shortest form, with sep.
func floats(v []float64, sep string) string {
	s := make([]string, len(v))
	for k, x := range v {
		s[k] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, sep)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dims(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, "x")
}

func resolution(a *decode.Array) string {
	if a.Resolution == nil {
		return "-"
	}
	s := make([]string, len(a.Resolution))
	for i, x := range a.Resolution {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, "x")
}

func decodedBytes(a *decode.Array) int64 {
	n := int64(a.DType.Size * a.Channels)
	for _, s := range a.Shape {
		n *= s
	}
	return n
}

func orDot(s string) string {
	if s == "" {
		return "."
	}
	return s
}
