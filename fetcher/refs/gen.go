package refs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// genSpec is one entry of a version 1 set's "gen" list.
type genSpec struct {
	Key        string                     `json:"key"`
	URL        string                     `json:"url"`
	Offset     json.RawMessage            `json:"offset"`
	Length     json.RawMessage            `json:"length"`
	Dimensions map[string]json.RawMessage `json:"dimensions"`
}

type dim struct {
	name           string
	vals           []string // a list dimension
	start, step, n int64
}

func (d dim) at(i int64) string {
	if d.vals != nil {
		return d.vals[i]
	}
	return strconv.FormatInt(d.start+i*d.step, 10)
}

func (d dim) size() int64 {
	if d.vals != nil {
		return int64(len(d.vals))
	}
	return d.n
}

// gen adds the keys one gen entry generates, refusing before it starts
// when their count would pass the limit.
func (p *parser) gen(raw json.RawMessage) error {
	var g genSpec
	if err := json.Unmarshal(raw, &g); err != nil {
		return fmt.Errorf("refs: gen: %w", err)
	}
	if g.Key == "" || g.URL == "" {
		return fmt.Errorf("refs: gen: an entry needs key and url")
	}
	var dims []dim
	total := int64(1)
	room := int64(p.lim.MaxRefs - p.m.Len())
	for name, v := range g.Dimensions {
		d := dim{name: name}
		var list []json.RawMessage
		if json.Unmarshal(v, &list) == nil {
			for _, e := range list {
				// A string is its value, escapes undone (Python's json
				// writes é as \u00e9); a number is its text.
				s := string(e)
				if len(e) > 0 && e[0] == '"' {
					if err := json.Unmarshal(e, &s); err != nil {
						return fmt.Errorf("refs: gen: dimension %q: %w", name, err)
					}
				}
				d.vals = append(d.vals, s)
			}
			if d.vals == nil {
				d.vals = []string{}
			}
		} else {
			var r struct {
				Start *int64 `json:"start"`
				Stop  *int64 `json:"stop"`
				Step  *int64 `json:"step"`
			}
			if err := json.Unmarshal(v, &r); err != nil || r.Stop == nil {
				return fmt.Errorf("refs: gen: dimension %q: want a list or {start, stop, step}", name)
			}
			d.step = 1
			if r.Start != nil {
				d.start = *r.Start
			}
			if r.Step != nil {
				d.step = *r.Step
			}
			if d.step <= 0 {
				return fmt.Errorf("refs: gen: dimension %q: step %d", name, d.step)
			}
			if *r.Stop > d.start {
				// Differences of int64s can overflow; compare in uint64.
				span := uint64(*r.Stop) - uint64(d.start)
				n := (span + uint64(d.step) - 1) / uint64(d.step)
				if n > uint64(p.lim.MaxRefs) {
					return fmt.Errorf("refs: gen: dimension %q: %d values, more than %d references", name, n, p.lim.MaxRefs)
				}
				d.n = int64(n)
			}
		}
		if total *= d.size(); total > room {
			return fmt.Errorf("refs: gen %q: more than %d references", g.Key, p.lim.MaxRefs)
		}
		dims = append(dims, d)
	}
	if total == 0 {
		return nil
	}
	vars := map[string]string{}
	idx := make([]int64, len(dims))
	for {
		for i, d := range dims {
			vars[d.name] = d.at(idx[i])
		}
		key, err := p.expand(g.Key, vars)
		if err != nil {
			return fmt.Errorf("refs: gen key %q: %w", g.Key, err)
		}
		r := Ref{}
		if r.URL, err = p.expand(g.URL, vars); err != nil {
			return fmt.Errorf("refs: gen url %q: %w", g.URL, err)
		}
		if r.Offset, err = p.intField(g.Offset, vars); err != nil {
			return fmt.Errorf("refs: gen %q offset: %w", key, err)
		}
		if r.Length, err = p.intField(g.Length, vars); err != nil {
			return fmt.Errorf("refs: gen %q length: %w", key, err)
		}
		if r.Offset < 0 || r.Length < 0 {
			return fmt.Errorf("refs: gen %q: negative offset or length", key)
		}
		made := len(key)
		if _, ok := p.m.urlIdx[r.URL]; !ok {
			made += len(r.URL)
		}
		if err := p.spend(made); err != nil {
			return fmt.Errorf("refs: gen %q: %w", key, err)
		}
		if err := p.m.Add(key, r); err != nil {
			return err
		}
		i := len(idx) - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < dims[i].size() {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

func (p *parser) intField(raw json.RawMessage, vars map[string]string) (int64, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("missing")
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	s, err := p.expand(s, vars)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
}

// expand replaces each "{{expr}}" in s: a name of vars or of the set's
// templates, or an integer expression over vars.
func (p *parser) expand(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return "", fmt.Errorf("unclosed {{ in %q", s)
		}
		b.WriteString(s[:i])
		expr := strings.TrimSpace(s[i+2 : i+j])
		if v, ok := vars[expr]; ok {
			b.WriteString(v)
		} else if v, ok := p.templates[expr]; ok {
			b.WriteString(v)
		} else {
			n, err := evalInt(expr, vars)
			if err != nil {
				return "", fmt.Errorf("{{%s}}: %w", expr, err)
			}
			b.WriteString(strconv.FormatInt(n, 10))
		}
		if b.Len() > 1<<16 {
			return "", fmt.Errorf("expansion longer than 64 KiB")
		}
		s = s[i+j+2:]
	}
}

// evalInt evaluates an integer expression of names, integers, + - * //
// % and parentheses (the arithmetic fsspec's gen examples use), as
// Python (jinja2, which fsspec renders gen with) does: // and % floor
// toward negative infinity, and a result past int64, which Python holds
// whole, is refused rather than wrapped to another offset.
func evalInt(expr string, vars map[string]string) (int64, error) {
	e := &exprParser{s: expr, vars: vars}
	v, err := e.sum(0)
	if err != nil {
		return 0, err
	}
	if e.skip(); e.i != len(e.s) {
		return 0, fmt.Errorf("unexpected %q", e.s[e.i:])
	}
	return v, nil
}

type exprParser struct {
	s    string
	i    int
	vars map[string]string
}

func (e *exprParser) skip() {
	for e.i < len(e.s) && e.s[e.i] == ' ' {
		e.i++
	}
}

func (e *exprParser) sum(depth int) (int64, error) {
	v, err := e.product(depth)
	for err == nil {
		e.skip()
		if e.i >= len(e.s) || (e.s[e.i] != '+' && e.s[e.i] != '-') {
			return v, nil
		}
		op := e.s[e.i]
		e.i++
		var w int64
		if w, err = e.product(depth); err == nil {
			if op == '-' {
				w = -w
				if w == math.MinInt64 {
					return 0, errOverflow
				}
			}
			if (w > 0 && v > math.MaxInt64-w) || (w < 0 && v < math.MinInt64-w) {
				return 0, errOverflow
			}
			v += w
		}
	}
	return 0, err
}

func (e *exprParser) product(depth int) (int64, error) {
	v, err := e.atom(depth)
	for err == nil {
		e.skip()
		var op string
		switch {
		case strings.HasPrefix(e.s[e.i:], "//"):
			op = "//"
		case strings.HasPrefix(e.s[e.i:], "*"), strings.HasPrefix(e.s[e.i:], "%"):
			op = e.s[e.i : e.i+1]
		default:
			return v, nil
		}
		e.i += len(op)
		var w int64
		if w, err = e.atom(depth); err != nil {
			break
		}
		switch {
		case op == "*":
			hi, lo := bits.Mul64(uint64(abs(v)), uint64(abs(w)))
			if hi != 0 || lo > math.MaxInt64 || v == math.MinInt64 || w == math.MinInt64 {
				return 0, errOverflow
			}
			v *= w
		case w == 0:
			return 0, fmt.Errorf("division by zero")
		case v == math.MinInt64 && w == -1:
			return 0, errOverflow
		case op == "//":
			q := v / w
			if v%w != 0 && (v < 0) != (w < 0) {
				q--
			}
			v = q
		default:
			r := v % w
			if r != 0 && (r < 0) != (w < 0) {
				r += w
			}
			v = r
		}
	}
	return 0, err
}

var errOverflow = errors.New("integer overflow")

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (e *exprParser) atom(depth int) (int64, error) {
	if depth > 32 {
		return 0, fmt.Errorf("nested too deeply")
	}
	e.skip()
	if e.i >= len(e.s) {
		return 0, fmt.Errorf("unexpected end")
	}
	if e.s[e.i] == '(' {
		e.i++
		v, err := e.sum(depth + 1)
		if err != nil {
			return 0, err
		}
		if e.skip(); e.i >= len(e.s) || e.s[e.i] != ')' {
			return 0, fmt.Errorf("missing )")
		}
		e.i++
		return v, nil
	}
	j := e.i
	for j < len(e.s) && (e.s[j] == '_' || e.s[j] >= 'a' && e.s[j] <= 'z' || e.s[j] >= 'A' && e.s[j] <= 'Z' || e.s[j] >= '0' && e.s[j] <= '9') {
		j++
	}
	tok := e.s[e.i:j]
	if tok == "" {
		return 0, fmt.Errorf("unexpected %q", e.s[e.i:])
	}
	e.i = j
	if v, ok := e.vars[tok]; ok {
		tok = v
	}
	n, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer or a dimension", tok)
	}
	return n, nil
}
