package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/cache/disk"
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

// Exit statuses of `volfs warm` (README, volfs warm).
const (
	exitWarmFailed      = 1   // chunks failed, or the warm could not run
	exitWarmNotKept     = 3   // every chunk loaded, some not kept
	exitWarmInterrupted = 130 // SIGINT or SIGTERM: 128 + SIGINT, as shells report it
)

// warmProgressEvery is how often a warm whose stderr is not a terminal
// writes a progress line (a terminal gets a bar).
const warmProgressEvery = 5 * time.Second

// warmSummary counts a warm's results. Its memory is bounded whatever the
// plan: failed chunks beyond maxFailedNamed and the chunks of each reason
// not to keep are counted, not listed.
type warmSummary struct {
	chunks, fetched, cached, copied, missing, would, wouldCopy int64
	decoded                                                    int64 // bytes of the chunks fetched
	bytes                                                      int64 // bytes of the chunks done
	failed                                                     int64
	failedNamed                                                []string
	notKept                                                    int64
	reasons                                                    []notKeptReason
}

// notKeptReason is one reason why chunks were not kept, with how many and
// the first one.
type notKeptReason struct {
	why   string
	n     int64
	first string
}

// add counts r.
func (s *warmSummary) add(r fs.WarmResult) {
	s.chunks++
	s.bytes += r.Size
	switch r.Status {
	case fs.WarmFetched:
		s.fetched++
		s.decoded += r.Size
	case fs.WarmCached:
		s.cached++
	case fs.WarmCopied:
		s.copied++
	case fs.WarmMissing:
		s.missing++
	case fs.WarmWouldFetch:
		s.would++
	case fs.WarmWouldCopy:
		s.wouldCopy++
	case fs.WarmFailed:
		s.failed++
		if len(s.failedNamed) < maxFailedNamed {
			s.failedNamed = append(s.failedNamed, r.Key)
		}
	}
	if r.NotKept != nil {
		s.notKept++
		for _, why := range notKeptWhy(r.NotKept) {
			i := slices.IndexFunc(s.reasons, func(k notKeptReason) bool { return k.why == why })
			if i < 0 {
				s.reasons = append(s.reasons, notKeptReason{why: why, first: r.Key})
				i = len(s.reasons) - 1
			}
			s.reasons[i].n++
		}
	}
}

// notKeptWhy returns, for each tier that did not keep a chunk, why, in the
// user's words: the classes a user can act on are named, other errors
// given as the tier said them.
func notKeptWhy(err error) []string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []string
	for _, e := range errs {
		switch {
		case errors.Is(e, cache.ErrNoIdentity):
			out = append(out, "the origin sends no version of them (neither ETag nor Last-Modified), so no tier may keep them: a kept copy could never be checked")
		case errors.Is(e, disk.ErrFull):
			out = append(out, "the disk cache is full of what this warm kept before them: raise --disk-cache-size, or warm less (--bbox, PATH)")
		default:
			out = append(out, e.Error())
		}
	}
	return out
}

// kept is the number of chunks every tier holds after the warm.
func (s *warmSummary) kept() int64 { return s.fetched + s.cached + s.copied - s.notKept }

func runWarm(c *cli.Context) error {
	if c.NArg() < 1 {
		return errors.New("usage: volfs warm SOURCE [PATH...]")
	}
	dryRun := c.Bool("dry-run")
	if c.String("cache-dir") == "" && !dryRun {
		return errors.New("warm needs --cache-dir: it fills the disk cache that a mount with the same --cache-dir reads (--dry-run needs none)")
	}
	bbox, err := parseBBox(c.String("bbox"))
	if err != nil {
		return fmt.Errorf("--bbox: %w", err)
	}
	// Our own handler, installed before any network work: a warm that a
	// script started in the background (SIGINT ignored by the shell)
	// still stops on kill -INT, and any warm stops with its summary.
	ctx, stopSignals, signalled := warmSignals(c.Context)
	defer stopSignals()
	tree, err := openTree(c, c.Args().First(), "", false)
	if err != nil {
		return err
	}
	defer tree.Close()
	plan, err := tree.PlanWarm(ctx, c.Args().Slice()[1:], bbox, infoDepth)
	if err != nil {
		if signalled() != nil {
			return cli.Exit(fmt.Sprintf("volfs warm: interrupted (%v) before the first chunk", signalled()), exitWarmInterrupted)
		}
		return err
	}
	total, totalBytes, known := plan.Total()
	what := "chunks counted as they are warmed"
	if known {
		what = fmt.Sprintf("%d chunks, %s decoded at most", total, formatSize(totalBytes))
	}
	verb := "warming"
	if dryRun {
		verb = "dry run over"
	}
	fmt.Fprintf(os.Stderr, "volfs warm: %s %s of %s\n", verb, what, tree.Source())

	var mu sync.Mutex // guards sum
	var sum warmSummary
	stopProgress := warmProgress(&mu, &sum, total, totalBytes, known, dryRun)
	origin0 := originBytes(tree.Source())
	start := time.Now()
	err = plan.Run(ctx, c.Int("workers"), dryRun, func(r fs.WarmResult) {
		mu.Lock()
		sum.add(r)
		mu.Unlock()
		switch r.Status {
		case fs.WarmWouldFetch:
			fmt.Printf("would fetch %s (%s)\n", r.Key, formatSize(r.Size))
		case fs.WarmWouldCopy:
			fmt.Printf("would copy %s (%s) from %s to %s\n", r.Key, formatSize(r.Size), r.From, strings.Join(r.Lacked, ", "))
		case fs.WarmFailed:
			fmt.Fprintf(os.Stderr, "volfs warm: %s: %v\n", r.Key, r.Err)
		}
	})
	stopProgress()
	// The writes to disk run behind the loads: the summary counts them
	// done.
	tree.Close()
	elapsed := time.Since(start)
	printWarmSummary(os.Stdout, &sum, dryRun, originBytes(tree.Source())-origin0, elapsed)
	if sig := signalled(); sig != nil {
		left := "the rest"
		if known {
			left = strconv.FormatInt(total-sum.chunks, 10)
		}
		fmt.Printf("interrupted (%v) after %d chunks: %d kept, %s left, %d failed; run the same command again to resume (what is kept is skipped)\n",
			sig, sum.chunks, sum.kept(), left, sum.failed)
		return cli.Exit("", exitWarmInterrupted)
	}
	if err != nil {
		return err
	}
	if sum.failed > 0 {
		more := ""
		if n := sum.failed - int64(len(sum.failedNamed)); n > 0 {
			more = fmt.Sprintf(" and %d more (each logged above)", n)
		}
		return cli.Exit(fmt.Sprintf("volfs warm: %d chunks failed: %s%s", sum.failed, strings.Join(sum.failedNamed, ", "), more), exitWarmFailed)
	}
	if sum.notKept > 0 {
		return cli.Exit(fmt.Sprintf("volfs warm: %d chunks were loaded but not kept (see above): a mount without the origin cannot read them", sum.notKept), exitWarmNotKept)
	}
	return nil
}

// warmSignals returns a context that SIGINT or SIGTERM ends, the function
// that stops catching them, and one that returns the signal caught (nil
// if none). A second signal restores the default action and re-raises
// nothing: the next one kills the process, for a warm stuck in a load
// that ignores its context.
func warmSignals(parent context.Context) (context.Context, func(), func() os.Signal) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	var got atomic.Value
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			got.Store(sig)
			fmt.Fprintf(os.Stderr, "volfs warm: %v: stopping after the chunks in flight (again to kill)\n", sig)
			cancel()
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		case <-done:
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			signal.Stop(ch)
			cancel()
		})
	}
	return ctx, stop, func() os.Signal {
		sig, _ := got.Load().(os.Signal)
		return sig
	}
}

// warmProgress shows the progress of a warm on stderr until the function
// it returns is called: a bar on a terminal, else a line every
// warmProgressEvery (a script's log).
func warmProgress(mu *sync.Mutex, sum *warmSummary, total, totalBytes int64, known, dryRun bool) (stop func()) {
	snapshot := func() (chunks, bytes, failed, notKept int64) {
		mu.Lock()
		defer mu.Unlock()
		return sum.chunks, sum.bytes, sum.failed, sum.notKept
	}
	quit, done := make(chan struct{}), make(chan struct{})
	if term.IsTerminal(int(os.Stderr.Fd())) && !dryRun {
		max := total
		if !known {
			max = -1
		}
		bar := progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("warm"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("chunks"),
			progressbar.OptionSetPredictTime(known),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
		go func() {
			defer close(done)
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				chunks, bytes, _, _ := snapshot()
				desc := "warm " + formatSize(bytes)
				if known {
					desc += " of " + formatSize(totalBytes)
				}
				bar.Describe(desc)
				bar.Set64(chunks)
				select {
				case <-tick.C:
				case <-quit:
					bar.Finish()
					fmt.Fprintln(os.Stderr)
					return
				}
			}
		}()
	} else {
		go func() {
			defer close(done)
			tick := time.NewTicker(warmProgressEvery)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
				case <-quit:
					return
				}
				chunks, bytes, failed, notKept := snapshot()
				of := ""
				if known {
					of = fmt.Sprintf(" of %d", total)
				}
				fmt.Fprintf(os.Stderr, "volfs warm: %d%s chunks done (%s), %d failed, %d not kept\n", chunks, of, formatSize(bytes), failed, notKept)
			}
		}()
	}
	return func() {
		close(quit)
		<-done
	}
}

// printWarmSummary writes the summary of a warm: one line of counts, then
// one line per reason chunks were not kept.
func printWarmSummary(w io.Writer, s *warmSummary, dryRun bool, origin int64, elapsed time.Duration) {
	if dryRun {
		fmt.Fprintf(w, "dry run: %d chunks: %d would be fetched, %d already cached, %d would be copied between tiers, %d missing, %d failed\n",
			s.chunks, s.would, s.cached, s.wouldCopy, s.missing, s.failed)
		return
	}
	from := "bytes from the origin not counted for this source"
	if origin >= 0 {
		from = fmt.Sprintf("%s from the origin", formatSize(origin))
	}
	secs := max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(w, "warmed %d chunks in %.1f s: %d fetched, %d already cached, %d missing, %d failed; %d kept, %d not kept, %d copied between tiers; %s, %s decoded (%s/s)\n",
		s.chunks, elapsed.Seconds(), s.fetched, s.cached, s.missing, s.failed, s.kept(), s.notKept, s.copied,
		from, formatSize(s.decoded), formatSize(int64(float64(s.decoded)/secs)))
	for _, r := range s.reasons {
		fmt.Fprintf(w, "not kept: %d chunks (the first %s): %s\n", r.n, r.first, r.why)
	}
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
