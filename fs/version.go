package fs

import (
	"context"
	"errors"
	"fmt"

	"github.com/volfs/volfs/fetcher"
	"github.com/volfs/volfs/fetcher/keep"
)

// ErrNoVersion is wrapped by Version's refusals of a file whose version
// it cannot name.
var ErrNoVersion = errors.New("fs: no version known")

// ErrVersionNotKnown is wrapped by KnownVersion's refusal of a file whose
// version only the origin can tell now.
var ErrVersionNotKnown = errors.New("fs: version not known without asking the origin")

// Version names the version of f's bytes: equal for two files (of this
// tree or of another over the same source) exactly when, up to a hash
// collision, their bytes are the same. It is the recipe fingerprint of the
// chunk's array (decode.Array.Recipe), the chunk's key, and the identity of
// each object its bytes come from, as the origin holds it now
// (keep.Source.Current: learnt within the metadata TTL, or asked with one
// Stat); it changes when the object is rewritten, when its ".gz" twin is,
// and when the metadata comes to decode the chunk another way. Only the
// file of a chunk stored as its own object (decode.Array.OwnObject) has
// one, and only from a source that identifies its versions (an HTTP server
// without ETag or Last-Modified does not); any other file's refusal wraps
// ErrNoVersion, and an origin that cannot be asked returns its error.
func (t *Tree) Version(ctx context.Context, f File) (string, error) {
	return t.version(f, func(key string) (fetcher.Identity, error) { return t.origin.Current(ctx, key) })
}

// KnownVersion is Version without asking the origin: an error wrapping
// ErrVersionNotKnown when Version would ask it (an identity not learnt
// within the metadata TTL). A listing of many files names the versions it
// knows at no cost.
func (t *Tree) KnownVersion(f File) (string, error) {
	return t.version(f, func(key string) (fetcher.Identity, error) {
		if id, ok := t.origin.Known(key); ok {
			return id, nil
		}
		return "", fmt.Errorf("%w: %s", ErrVersionNotKnown, key)
	})
}

// version is Version with the identity of an object from current.
func (t *Tree) version(f File, current func(key string) (fetcher.Identity, error)) (string, error) {
	c, ok := f.(*chunkFile)
	if !ok || !c.a.OwnObject() {
		return "", fmt.Errorf("%w: not a chunk stored as its own object", ErrNoVersion)
	}
	v := keep.EncodeFields([]keep.Field{{Key: "recipe", ID: fetcher.Identity(c.a.Recipe())}})
	for _, key := range storedForms(c.key) {
		id, err := current(key)
		if err != nil {
			return "", err
		}
		if !id.Known() {
			return "", fmt.Errorf("%w: %s: the source names no version of it", ErrNoVersion, key)
		}
		v = append(v, keep.EncodeFields([]keep.Field{{Key: key, ID: id}})...)
		if id != keep.Absent {
			break // a later form is read only when this one is absent
		}
	}
	return string(v), nil
}

// Changes returns how many times the tree has seen an object of its source
// change version (keep.Source.Changes): the validators of a file whose
// version Version cannot name (a stitched view, a pass-through object)
// change with it, so that none stands for bytes of two versions once the
// change was seen.
func (t *Tree) Changes() uint64 { return t.origin.Changes() }
