package fs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/volfs/volfs/fetcher"
)

// sourceDir is a directory shown as the source holds it.
type sourceDir struct {
	t   *Tree
	key string
	// refused is why the directory's metadata was not shown as a volume.
	refused error

	mu      sync.Mutex     // never held across I/O
	listing *listFlight    // GUARDED_BY(mu); the listing done or in progress
	dirs    map[string]Dir // GUARDED_BY(mu); children opened so far

	ann annotationState // whether d is an annotation directory (objects.go)
}

// listFlight is one listing of a directory, shared by every caller that
// wants it while it runs (go-fuse sends concurrent lookups of one
// directory), so a dead server costs one retry budget, not one per lookup.
type listFlight struct {
	done chan struct{} // closed when the fields below are set
	// at is when the origin gave the listing: when the listing was asked
	// for, or when the fleet's node whose answer stood in asked.
	at      time.Time
	entries []fetcher.Entry
	byName  map[string]int // index into entries
	err     error
}

func (d *sourceDir) IsDir() bool { return true }

// list returns the source's listing of d. A directory is listed once, or
// again when its listing was dropped to keep the tree's listings within
// their budget (listBudget); a listing that failed other than with
// ErrNotSupported is tried again by the next caller.
func (d *sourceDir) list(ctx context.Context) ([]fetcher.Entry, map[string]int, error) {
	d.mu.Lock()
	f := d.listing
	if f != nil && d.t.opts.MetadataTTL > 0 {
		select {
		case <-f.done:
			if time.Since(f.at) > d.t.opts.MetadataTTL {
				f = nil // expired: list again
			}
		default: // still running: share it
		}
	}
	if f == nil {
		f = &listFlight{done: make(chan struct{})}
		d.listing = f
		d.mu.Unlock()
		go d.runList(context.WithoutCancel(ctx), f)
	} else {
		d.mu.Unlock()
	}
	select {
	case <-f.done:
		if f.err == nil {
			d.t.lists.touch(d)
		}
		return f.entries, f.byName, f.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// runList lists d for every waiter of f: it is not cancelled when the
// caller that started it goes away, and it is bounded by the fetcher's
// retries and stall timeout.
func (d *sourceDir) runList(ctx context.Context, f *listFlight) {
	f.entries, f.at, f.err = d.t.origin.ListAt(ctx, d.key)
	if errors.Is(f.err, fetcher.ErrNotSupported) {
		if named, ok := d.t.named.entries(d.key); ok {
			f.entries, f.err = named, nil
		}
	}
	if f.err == nil {
		f.byName = make(map[string]int, len(f.entries))
		for i, e := range f.entries {
			f.byName[e.Name] = i
		}
	} else if !errors.Is(f.err, fetcher.ErrNotSupported) {
		d.mu.Lock()
		d.listing = nil
		d.mu.Unlock()
	}
	close(f.done)
	if f.err == nil {
		d.t.lists.keep(d, f)
	}
}

func (d *sourceDir) Lookup(ctx context.Context, name string) (Node, error) {
	key := path.Join(d.key, name)
	if err := fetcher.CheckKey(key); err != nil {
		return nil, err
	}
	entries, byName, err := d.list(ctx)
	if _, stored := byName[name]; name == AnnotationCSV && !stored {
		if ai := d.annotationInfo(ctx); ai != nil {
			return d.annotationCSV(ctx, ai)
		}
	}
	switch {
	case err == nil:
		i, ok := byName[name]
		if !ok {
			if _, named := d.t.named.entries(d.key); named {
				// A listing from consolidated metadata names its
				// metadata, not every object: look the rest up.
				return d.probe(ctx, name, key)
			}
			return nil, fmt.Errorf("fs: %s: %w", key, fetcher.ErrNotExist)
		}
		if entries[i].IsDir {
			return d.child(ctx, name, key)
		}
		return d.t.object(ctx, key, entries[i].Size, entries[i].ID)
	case errors.Is(err, fetcher.ErrNotSupported):
		return d.probe(ctx, name, key)
	default:
		return nil, err
	}
}

// probe looks name up without a listing: a child is a volume if it has
// metadata, a file if it exists as an object.
func (d *sourceDir) probe(ctx context.Context, name, key string) (Node, error) {
	dir, err := d.child(ctx, name, key)
	if err != nil {
		return nil, err
	}
	if _, isVol := dir.(*volumeDir); isVol {
		return dir, nil
	}
	return d.t.object(ctx, key, -1, "")
}

// listNamed drops d's listing, which the source could not give, so that
// the next one lists what consolidated metadata names in d.
func (d *sourceDir) listNamed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.listing; f != nil {
		select {
		case <-f.done:
			if f.err != nil {
				d.listing = nil
			}
		default:
		}
	}
}

// child opens the directory name once and remembers it.
func (d *sourceDir) child(ctx context.Context, name, key string) (Dir, error) {
	d.mu.Lock()
	dir, ok := d.dirs[name]
	d.mu.Unlock()
	if ok {
		return dir, nil
	}
	dir, err := d.t.openDir(ctx, key, false)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirs == nil {
		d.dirs = make(map[string]Dir)
	}
	if prev, ok := d.dirs[name]; ok {
		return prev, nil
	}
	d.dirs[name] = dir
	return dir, nil
}

func (d *sourceDir) List(ctx context.Context) (Listing, error) {
	entries, byName, err := d.list(ctx)
	if errors.Is(err, fetcher.ErrNotSupported) {
		return entryListing(nil), nil
	}
	_, stored := byName[AnnotationCSV]
	if _, info := byName["info"]; err == nil && info && !stored && d.annotationInfo(ctx) != nil {
		entries = append(slices.Clip(entries), fetcher.Entry{Name: AnnotationCSV})
	}
	return entryListing(entries), err
}

type entryListing []fetcher.Entry

func (l entryListing) Len() int64                   { return int64(len(l)) }
func (l entryListing) Entry(i int64) (string, bool) { return l[i].Name, l[i].IsDir }
