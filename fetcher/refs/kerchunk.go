package refs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits bound what ParseKerchunk accepts, so that a hostile reference set
// costs bounded memory and time.
type Limits struct {
	// MaxRefs bounds the keys, explicit and generated together
	// (default 8,388,608).
	MaxRefs int
	// MaxDepth bounds the nesting of an inline JSON value (default 64).
	MaxDepth int
	// MaxExpanded bounds the bytes templates and gen make: the target
	// URLs with templates, as expanded (each distinct one once), and the
	// keys and new URLs gen makes (default 256 MiB). A set's own keys and
	// URLs are bounded by its size; what expansion makes is not, so that
	// a template of 60 KiB named by a million short URLs would otherwise
	// hold 60 GB.
	MaxExpanded int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxRefs <= 0 {
		l.MaxRefs = 8 << 20
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 64
	}
	if l.MaxExpanded <= 0 {
		l.MaxExpanded = 256 << 20
	}
	return l
}

// ErrNotReferenceSet is returned by ParseKerchunk for input that is not a
// JSON object, so that a caller sniffing a source may try other forms.
var ErrNotReferenceSet = errors.New("refs: not a kerchunk reference set")

// ParseKerchunk reads a kerchunk / fsspec ReferenceFileSystem JSON
// reference set, version 0 (a flat object of key → value) or version 1
// ({"version": 1, "templates": {...}, "gen": [...], "refs": {...}}),
// streaming it so that only the manifest is held. A value is an inline
// string, "base64:"-prefixed inline bytes, an inline JSON object (kept as
// its compact JSON), [url] for a whole object or [url, offset, length] for
// a range. "{{name}}" in a URL is replaced by templates[name]. Each gen
// entry generates keys over the product of its dimensions (a {start, stop,
// step} range or a list); its key, url, offset and length are templates
// over the dimensions and the set's templates, and offset and length may
// be integer expressions (+ - * // % and parentheses). Relative and
// scheme-less URLs are kept as written; resolving them is the Resolver's.
func ParseKerchunk(r io.Reader, lim Limits) (*Manifest, error) {
	lim = lim.withDefaults()
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, ErrNotReferenceSet
	}
	p := &parser{dec: dec, lim: lim, m: NewManifest(), templates: map[string]string{}}
	var gens []json.RawMessage
	version := 0
	for dec.More() {
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		switch k {
		case "version":
			var n json.Number
			if err := dec.Decode(&n); err != nil {
				return nil, fmt.Errorf("refs: version: %w", err)
			}
			if n.String() != "1" {
				return nil, fmt.Errorf("refs: unsupported reference set version %s", n)
			}
			version = 1
		case "templates":
			if err := dec.Decode(&p.templates); err != nil {
				return nil, fmt.Errorf("refs: templates: want an object of strings: %w", err)
			}
		case "gen":
			if err := p.expect('['); err != nil {
				return nil, fmt.Errorf("refs: gen: %w", err)
			}
			for dec.More() {
				var g json.RawMessage
				if err := dec.Decode(&g); err != nil {
					return nil, fmt.Errorf("refs: gen: %w", err)
				}
				if err := checkDepth(g, 4); err != nil {
					return nil, fmt.Errorf("refs: gen: %w", err)
				}
				gens = append(gens, g)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("refs: gen: %w", err)
			}
		case "refs":
			if err := p.expect('{'); err != nil {
				return nil, fmt.Errorf("refs: refs: %w", err)
			}
			for dec.More() {
				k, err := p.key()
				if err != nil {
					return nil, err
				}
				if err := p.value(k); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("refs: refs: %w", err)
			}
		default:
			// Version 0: every top-level key is a reference. (A version 1
			// set ignores unknown top-level keys the same way fsspec
			// does not: it has none, so treating them as refs is safe.)
			if err := p.value(k); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("refs: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("refs: data after the reference set")
	}
	_ = version
	if err := p.m.expandURLs(func(u string) (string, error) {
		x, err := p.expand(u, nil)
		if err == nil {
			err = p.spend(len(x))
		}
		return x, err
	}); err != nil {
		return nil, err
	}
	for _, g := range gens {
		if err := p.gen(g); err != nil {
			return nil, err
		}
	}
	return p.m, nil
}

type parser struct {
	dec       *json.Decoder
	lim       Limits
	m         *Manifest
	templates map[string]string
	expanded  int64 // bytes templates and gen have made, bounded by lim.MaxExpanded
}

// spend counts n bytes made by templates or gen against lim.MaxExpanded.
func (p *parser) spend(n int) error {
	if p.expanded += int64(n); p.expanded > p.lim.MaxExpanded {
		return fmt.Errorf("templates and gen expand to more than %d bytes of keys and URLs", p.lim.MaxExpanded)
	}
	return nil
}

func (p *parser) key() (string, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return "", fmt.Errorf("refs: %w", err)
	}
	k, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("refs: want a key, got %v", tok)
	}
	return k, nil
}

func (p *parser) expect(d json.Delim) error {
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("want %q, got %v", d, tok)
	}
	return nil
}

func (p *parser) count() error {
	if p.m.Len() >= p.lim.MaxRefs {
		return fmt.Errorf("refs: more than %d references", p.lim.MaxRefs)
	}
	return nil
}

// value reads key's value and adds it.
func (p *parser) value(key string) error {
	if err := p.count(); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return fmt.Errorf("refs: key %q: %w", key, err)
	}
	r, ok := fastRange(raw)
	var err error
	if !ok {
		if err := checkDepth(raw, p.lim.MaxDepth); err != nil {
			return fmt.Errorf("refs: key %q: %w", key, err)
		}
		r, err = parseValue(raw)
	}
	if err != nil {
		return fmt.Errorf("refs: key %q: %w", key, err)
	}
	// A URL with templates is kept as written, once in the manifest's
	// table of URLs, and expanded there at the end (templates may follow
	// the refs).
	return p.m.Add(key, r)
}

func parseValue(raw json.RawMessage) (Ref, error) {
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Ref{}, err
		}
		if b64, ok := strings.CutPrefix(s, "base64:"); ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return Ref{}, fmt.Errorf("base64: %w", err)
			}
			return Ref{Data: b}, nil
		}
		return Ref{Data: []byte(s)}, nil
	case '{':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return Ref{}, err
		}
		return Ref{Data: b.Bytes()}, nil
	case '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			return Ref{}, err
		}
		if len(a) != 1 && len(a) != 3 {
			return Ref{}, fmt.Errorf("want [url] or [url, offset, length], got %d elements", len(a))
		}
		var r Ref
		if err := json.Unmarshal(a[0], &r.URL); err != nil || r.URL == "" {
			return Ref{}, fmt.Errorf("want a URL string, got %s", a[0])
		}
		if len(a) == 1 {
			r.Length = -1
			return r, nil
		}
		var err error
		if r.Offset, err = strconv.ParseInt(string(a[1]), 10, 64); err != nil || r.Offset < 0 {
			return Ref{}, fmt.Errorf("offset %s: want an integer of 0 or more", a[1])
		}
		if r.Length, err = strconv.ParseInt(string(a[2]), 10, 64); err != nil || r.Length < 0 {
			return Ref{}, fmt.Errorf("length %s: want an integer of 0 or more", a[2])
		}
		return r, nil
	}
	return Ref{}, fmt.Errorf("want a string, an object or an array, got %.40s", raw)
}

// checkDepth refuses JSON nested deeper than max.
func checkDepth(raw []byte, max int) error {
	depth, inStr, esc := 0, false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case inStr:
			if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > max {
				return fmt.Errorf("JSON nested deeper than %d", max)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// fastRange parses the common value ["url", offset, length] whose URL has
// no escapes, without the decoder's reflection; ok is false for anything
// else, which parseValue then reads (and judges).
func fastRange(raw []byte) (r Ref, ok bool) {
	i := 0
	skip := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	want := func(c byte) bool {
		skip()
		if i < len(raw) && raw[i] == c {
			i++
			return true
		}
		return false
	}
	num := func() (int64, bool) {
		skip()
		j := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == j || i-j > 18 || raw[j] == '0' && i-j > 1 {
			return 0, false
		}
		n, err := strconv.ParseInt(string(raw[j:i]), 10, 64)
		return n, err == nil
	}
	if !want('[') || !want('"') {
		return Ref{}, false
	}
	j := i
	for i < len(raw) && raw[i] != '"' {
		if raw[i] == '\\' || raw[i] < 0x20 || raw[i] >= 0x80 {
			return Ref{}, false
		}
		i++
	}
	if i >= len(raw) || i == j {
		return Ref{}, false
	}
	r.URL = string(raw[j:i])
	i++
	if !want(',') {
		return Ref{}, false
	}
	if r.Offset, ok = num(); !ok || !want(',') {
		return Ref{}, false
	}
	if r.Length, ok = num(); !ok || !want(']') {
		return Ref{}, false
	}
	if skip(); i != len(raw) {
		return Ref{}, false
	}
	return r, true
}
