package fs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/volfs/volfs/cache"
	"github.com/volfs/volfs/decode"
	"github.com/volfs/volfs/fetcher"
)

// An array's metadata rewritten during a mount
//
// A volume's metadata is read once, when its directory is opened, and the
// tree decodes every chunk of its arrays as that version says. A chunk's
// load pins the objects it reads (Tree.load), not the metadata: an array
// whose metadata and chunks were rewritten together (a "<u2" zarr array
// rewritten as ">u2", another codec) would have its later chunks decoded
// under the old metadata, bytes of neither version. With
// Options.MetadataTTL set, the tree therefore watches the object each
// volume's metadata was parsed from (a metaWatch, one per volume, shared
// by its arrays): before a chunk of one of its arrays is loaded (from a
// tier or the origin; a chunk in memory is served as it was decoded),
// at most once per TTL, the object's identity is compared with the one
// parsed (keep.Source.Current: free when a request or a listing taught it
// within the TTL, else one Stat). When it moved, the metadata is read and
// parsed again, and each array compared with the one served
// (decode.Appended):
//
//   - every array decodes the chunks of its old grid as before (an
//     append: zarr-python's resize, sections added): the tree goes on
//     serving the arrays as they were mounted, their shape included (a
//     remount shows the new one), and watches the new version;
//   - anything else (another recipe, an array gone or shrunk, metadata
//     gone or unreadable): every later load of the volume's chunks fails
//     with errMetadataChanged (ESTALE), and one line is logged that names
//     the metadata object and says to remount: no chunk decoded under
//     the old metadata from the new objects once a check has seen them.
//
// A check may come earlier than the TTL: a load during which the tree
// learnt that an object of its source changed (keep.Source.Changes: a
// chunk this mount read before, now rewritten) keeps its bytes only once
// a check begun after the load began, asking the origin, finds the
// metadata unchanged (Tree.watched). What is left to the TTL is a chunk
// the mount never read before, loaded after the rewrite and before the
// next check: it is decoded under the metadata held.
//
// An origin that cannot be asked (offline, or failing) leaves the arrays
// served as they are, checked again a TTL later: the tiers' own checks
// decide what is served then. With a TTL of 0 the source is read as
// unchanging for the mount's life and nothing is watched, as before.

// errMetadataChanged is wrapped by the refusal of a load of an array whose
// metadata changed at the source in a way that decodes its chunks
// otherwise: ESTALE (it wraps fetcher.ErrChanged), logged once by its
// metaWatch rather than once per path (Tree.Errno).
var errMetadataChanged = fmt.Errorf("fs: array metadata changed at the source: %w", fetcher.ErrChanged)

// metaWatch watches the metadata object of one volume; see above. It is
// safe for concurrent use.
type metaWatch struct {
	t      *Tree
	dir    string // the volume's directory
	meta   string // the metadata file's name in dir
	parse  func(dir string, meta []byte) (*decode.Volume, error)
	arrays []*decode.Array // the arrays the tree serves

	mu sync.Mutex
	// forms are the identities of the stored forms of the metadata the
	// arrays are served by (storedForms: the plain object, or its
	// absence and the ".gz" sibling's identity).
	forms   []seen        // GUARDED_BY(mu)
	checked time.Time     // GUARDED_BY(mu); when the last check began
	fresh   time.Time     // GUARDED_BY(mu); when the last check that asked the origin began
	running chan struct{} // GUARDED_BY(mu); closed when the check in progress ends
	stale   error         // GUARDED_BY(mu); the refusal of every load, once decided
}

// watchMeta starts watching the metadata of vol, read from the object
// at objKey of version id (the metadata file name, or its ".gz"
// sibling), when the tree's TTL is set and the source names versions.
func (t *Tree) watchMeta(vol *decode.Volume, name, objKey string, id fetcher.Identity, parse func(string, []byte) (*decode.Volume, error)) {
	if t.opts.MetadataTTL <= 0 || len(vol.Arrays) == 0 || !id.Known() {
		return
	}
	w := &metaWatch{t: t, dir: vol.Dir, meta: name, parse: parse, arrays: vol.Arrays,
		forms: metaForms(path.Join(vol.Dir, name), objKey, id), checked: time.Now()}
	for _, a := range vol.Arrays {
		t.watches.Store(a, w)
	}
}

// metaForms are the stored forms of the metadata at key whose identities
// decide which version a read of it finds, the object at objKey being of
// version id: the plain object, or its absence and the ".gz" sibling.
func metaForms(key, objKey string, id fetcher.Identity) []seen {
	if objKey == key {
		return []seen{{Key: key, ID: id}}
	}
	return []seen{{Key: key, ID: absent}, {Key: objKey, ID: id}}
}

// watched is load preceded by the check of a's metadata (metaWatch.check),
// or load itself when a's metadata is not watched. A load during which
// the tree learnt that an object of its source changed (keep.Source.Changes:
// a chunk this mount read before, rewritten, or another object) has its
// bytes kept only once a check begun after the load began finds the
// metadata unchanged (asking the origin, whatever the TTL): an array
// rewritten whole is so refused at the first chunk reloaded whose
// rewrite the tree sees, not only a TTL later.
func (t *Tree) watched(a *decode.Array, load cache.Loader) cache.Loader {
	v, ok := t.watches.Load(a)
	if !ok {
		return load
	}
	w := v.(*metaWatch)
	return func(ctx context.Context) ([]byte, error) {
		if err := w.check(ctx, time.Time{}); err != nil {
			return nil, err
		}
		began, changes := time.Now(), t.origin.Changes()
		b, err := load(ctx)
		if err == nil && t.origin.Changes() != changes {
			if err := w.check(ctx, began); err != nil {
				return nil, err
			}
		}
		return b, err
	}
}

// checkMeta is the check of a's metadata, nil when it is not watched: for
// the paths that serve a chunk's bytes without a load (a backing file, a
// window of ranged parts).
func (t *Tree) checkMeta(ctx context.Context, a *decode.Array) error {
	if v, ok := t.watches.Load(a); ok {
		return v.(*metaWatch).check(ctx, time.Time{})
	}
	return nil
}

// check returns nil when the volume's chunks may be loaded under the
// metadata the tree holds, and an error wrapping errMetadataChanged when
// they may not. Without since, it asks nothing within the TTL of the last
// check, and after it waits for one check. With since, a check that
// began after since and asked the origin (fresh, whatever the TTL)
// decides. One check runs at a time for every caller (not cancelled with
// the one that started it), each caller waiting for it at most until its
// own context ends.
func (w *metaWatch) check(ctx context.Context, since time.Time) error {
	for {
		w.mu.Lock()
		done := w.stale != nil
		if since.IsZero() {
			done = done || time.Since(w.checked) < w.t.opts.MetadataTTL
		} else {
			done = done || !w.fresh.Before(since)
		}
		if done {
			err := w.stale
			w.mu.Unlock()
			return err
		}
		run := w.running
		if run == nil {
			run = make(chan struct{})
			w.running = run
			forms, fresh := slices.Clone(w.forms), !since.IsZero()
			go func() {
				began := time.Now()
				forms, stale := w.run(context.WithoutCancel(ctx), forms, fresh)
				w.mu.Lock()
				w.stale, w.forms, w.checked, w.running = stale, forms, began, nil
				if fresh {
					w.fresh = began
				}
				w.mu.Unlock()
				close(run)
			}()
		}
		w.mu.Unlock()
		select {
		case <-run:
		case <-ctx.Done():
			return ctx.Err()
		}
		if since.IsZero() {
			w.mu.Lock()
			err := w.stale
			w.mu.Unlock()
			return err
		}
		// The check waited for may have begun before since, or not
		// asked the origin: then another one.
	}
}

// run is one check of the metadata whose stored forms were forms: the
// forms to watch from now on, and the refusal of every later load (nil
// to go on serving). Fresh asks the origin for each form's version, where
// the check within the TTL takes the one learnt (keep.Source.Current).
func (w *metaWatch) run(ctx context.Context, forms []seen, fresh bool) ([]seen, error) {
	t := w.t
	if t.origin.Offline() {
		return forms, nil
	}
	moved := false
	for _, f := range forms {
		cur, err := w.version(ctx, f.Key, fresh)
		if err != nil {
			t.log.Debug("the metadata of an array could not be checked: its chunks are served as mounted", "metadata", "/"+f.Key, "err", err)
			return forms, nil
		}
		if cur != f.ID {
			moved = true
			break
		}
	}
	if !moved {
		return forms, nil
	}
	key := path.Join(w.dir, w.meta)
	// From the origin itself: a fleet's answer (fetchMeta) may be a TTL
	// old, the version the tree already serves.
	obj, objKey, err := t.fetchBy(ctx, key, maxMetadataBytes, t.src.Get)
	if err == nil {
		t.ids.learn(objKey, obj.ID)
	}
	if err != nil && !errors.Is(err, fetcher.ErrNotExist) {
		t.log.Debug("the metadata of an array changed and could not be read again: its chunks are served as mounted", "metadata", "/"+key, "err", err)
		return forms, nil
	}
	var why string
	switch {
	case err != nil:
		why = "it is gone"
	case !obj.ID.Known():
		why = "the source no longer names its version"
	default:
		why = w.compare(obj, objKey)
	}
	if why == "" {
		return metaForms(key, objKey, obj.ID), nil
	}
	t.log.Error("an array's metadata changed at the source, and decodes its chunks otherwise: they are refused (ESTALE) until a remount reads the new version",
		"metadata", "/"+key, "source", t.src.String(), "why", why)
	return forms, fmt.Errorf("fs: %s/%s: %s; remount to read the new version: %w", t.src, key, why, errMetadataChanged)
}

// version returns the version of the object at key: as learnt within the
// TTL or else from one Stat (keep.Source.Current), or, fresh, from a Stat
// now. A key with no object is absent.
func (w *metaWatch) version(ctx context.Context, key string, fresh bool) (fetcher.Identity, error) {
	if !fresh {
		return w.t.origin.Current(ctx, key)
	}
	_, id, err := w.t.origin.Stat(ctx, key)
	if errors.Is(err, fetcher.ErrNotExist) {
		return absent, nil
	}
	return id, err
}

// compare parses obj, the metadata read again from objKey, and returns ""
// when every array served decodes the chunks of its grid as it parses now
// (decode.Appended), else why not. An array that grew is logged once: the
// mount shows the shape it was mounted with.
func (w *metaWatch) compare(obj fetcher.Object, objKey string) string {
	data, err := untransport(obj, objKey, 1<<20, maxMetadataBytes)
	var vol *decode.Volume
	if err == nil {
		vol, err = w.parse(w.dir, data)
	}
	if err != nil {
		return err.Error()
	}
	if vol == nil {
		return "it no longer describes an array"
	}
	var grown []string
	for _, old := range w.arrays {
		i := slices.IndexFunc(vol.Arrays, func(a *decode.Array) bool { return a.Name == old.Name })
		switch {
		case i < 0:
			return fmt.Sprintf("array %q is gone", "/"+old.Key)
		case !decode.Appended(old, vol.Arrays[i]):
			return fmt.Sprintf("array %q decodes its chunks otherwise (dtype, codecs, chunk grid, fill value, or a shape that shrank or moved chunks)", "/"+old.Key)
		case !slices.Equal(old.Shape, vol.Arrays[i].Shape):
			grown = append(grown, "/"+old.Key)
		}
	}
	if len(grown) > 0 {
		w.t.log.Info("arrays grew at the source: the mount goes on showing the shape it was mounted with; remount to see the new one",
			"metadata", "/"+path.Join(w.dir, w.meta), "arrays", strings.Join(grown, " "))
	}
	return ""
}
