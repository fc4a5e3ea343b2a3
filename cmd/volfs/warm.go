package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fs"
)

// warmCommand is `volfs warm SOURCE [PATH...]`: stage chunks in the disk
// cache before a job (README, volfs warm).
func warmCommand() *cli.Command {
	return &cli.Command{
		Name:      "warm",
		Usage:     "fetch and decode the chunks under PATH... (a volume, scale, array or chunk files; none: everything) into --cache-dir, so that a mount with the same --cache-dir serves them without the origin",
		ArgsUsage: "SOURCE [PATH...]",
		Flags:     flagsFor(onWarm),
		Action:    runWarm,
	}
}

// maxFailedNamed bounds the failed chunks that warm's error names; all of
// them are logged.
const maxFailedNamed = 20

// warmSummary counts a warm's results.
type warmSummary struct {
	chunks, fetched, cached, missing, would int64
	decoded                                 int64 // bytes of the chunks fetched
	failed                                  []string
}

func runWarm(c *cli.Context) error {
	if c.NArg() < 1 {
		return errors.New("usage: volfs warm SOURCE [PATH...]")
	}
	dryRun := c.Bool("dry-run")
	if c.String("cache-dir") == "" && !dryRun {
		return errors.New("volfs warm: --cache-dir is required: warm fills the disk cache that a mount with the same --cache-dir reads")
	}
	bbox, err := parseBBox(c.String("bbox"))
	if err != nil {
		return fmt.Errorf("--bbox: %w", err)
	}
	tree, err := openTree(c, c.Args().First(), "", false)
	if err != nil {
		return err
	}
	defer tree.Close()
	plan, err := tree.PlanWarm(c.Context, c.Args().Slice()[1:], bbox, infoDepth)
	if err != nil {
		return err
	}
	total, totalBytes := plan.Count()
	var bar *progressbar.ProgressBar
	if !dryRun && total > 0 && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(fmt.Sprintf("warm %s", formatSize(totalBytes))),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("chunks"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(os.Stderr) }),
		)
	}
	origin0 := originBytes(tree.Source())
	start := time.Now()
	var sum warmSummary
	var done int64
	err = plan.Run(c.Context, c.Int("workers"), dryRun, func(r fs.WarmResult) {
		sum.chunks++
		done += r.Size
		switch r.Status {
		case fs.WarmFetched:
			sum.fetched++
			sum.decoded += r.Size
		case fs.WarmCached:
			sum.cached++
		case fs.WarmMissing:
			sum.missing++
		case fs.WarmWouldFetch:
			sum.would++
			fmt.Printf("would fetch %s (%s)\n", r.Key, formatSize(r.Size))
		case fs.WarmFailed:
			sum.failed = append(sum.failed, r.Key)
			fmt.Fprintf(os.Stderr, "volfs warm: %s: %v\n", r.Key, r.Err)
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("warm %s of %s", formatSize(done), formatSize(totalBytes)))
			bar.Add(1)
		}
	})
	if bar != nil {
		bar.Finish()
	}
	// The writes to disk run behind the loads: the summary counts them
	// done.
	tree.Close()
	elapsed := time.Since(start)
	printWarmSummary(os.Stdout, sum, dryRun, originBytes(tree.Source())-origin0, elapsed)
	if err != nil {
		return err
	}
	if n := len(sum.failed); n > 0 {
		named := sum.failed[:min(n, maxFailedNamed)]
		more := ""
		if n > len(named) {
			more = fmt.Sprintf(" and %d more (each logged above)", n-len(named))
		}
		return fmt.Errorf("volfs warm: %d chunks failed: %s%s", n, strings.Join(named, ", "), more)
	}
	return nil
}

// printWarmSummary writes the summary line of a warm.
func printWarmSummary(w io.Writer, s warmSummary, dryRun bool, origin int64, elapsed time.Duration) {
	if dryRun {
		fmt.Fprintf(w, "dry run: %d chunks: %d would be fetched, %d already cached\n", s.chunks, s.would, s.cached)
		return
	}
	from := "bytes from the origin not counted for this source"
	if origin >= 0 {
		from = fmt.Sprintf("%s from the origin", formatSize(origin))
	}
	secs := max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "warmed %d chunks in %.1f s: %d fetched, %d already cached, %d missing, %d failed; %s, %s decoded (%s/s)\n",
		s.chunks, elapsed.Seconds(), s.fetched, s.cached, s.missing, len(s.failed), from, formatSize(s.decoded), formatSize(int64(float64(s.decoded)/secs)))
}

// originBytes returns the object bytes src has received, or -1 when it
// does not count them.
func originBytes(src fetcher.Fetcher) int64 {
	if h, ok := src.(fetcher.Statser); ok {
		return h.Stats().Bytes
	}
	return -1
}

// parseBBox parses x0:x1,y0:y1,z0:z1 (one to three ranges, x first; an
// empty range, as in ",0:64", is the whole axis) into ranges of voxel
// coordinates. Empty means no box.
func parseBBox(s string) ([]fs.Range, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 3 {
		return nil, fmt.Errorf("want x0:x1,y0:y1,z0:z1, got %d ranges in %q", len(parts), s)
	}
	out := make([]fs.Range, len(parts))
	for i, p := range parts {
		if p == "" {
			out[i] = fs.Range{Lo: -1 << 62, Hi: 1 << 62}
			continue
		}
		lo, hi, ok := strings.Cut(p, ":")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("range %q of %q: want START:END, whole numbers", p, s)
		}
		if b <= a {
			return nil, fmt.Errorf("range %q of %q is empty: END must be above START", p, s)
		}
		out[i] = fs.Range{Lo: a, Hi: b}
	}
	return out, nil
}
