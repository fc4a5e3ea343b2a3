package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// omeTransform is one coordinate transformation of NGFF 0.4 to 0.6. Only
// the fields of the types that can reduce to a scale and a translation
// per axis are read; the others are refused by type.
type omeTransform struct {
	Type            string
	Scale           []float64
	Translation     []float64
	Affine          json.RawMessage
	Transformations []omeTransform // "sequence" (0.6)
	Path            string         // parameters stored in an array
	Output          json.RawMessage
}

// outputName returns the name of the coordinate system t leads into (NGFF
// 0.6 names it by a string or by an object with a "name"), or "".
func (t omeTransform) outputName() string {
	var s string
	if json.Unmarshal(t.Output, &s) == nil {
		return s
	}
	var obj struct{ Name string }
	json.Unmarshal(t.Output, &obj)
	return obj.Name
}

// axisMap is a map of n coordinates that acts on each axis alone:
// x'[k] = scale[k]*x[k] + shift[k], the form every transform the views
// can describe reduces to.
type axisMap struct {
	scale, shift []float64
}

// newAxisMap returns the identity map of n axes.
func newAxisMap(n int) *axisMap {
	m := &axisMap{scale: make([]float64, n), shift: make([]float64, n)}
	for k := range m.scale {
		m.scale[k] = 1
	}
	return m
}

// maxSequenceDepth bounds the nesting of "sequence" transforms.
const maxSequenceDepth = 8

// apply composes ts, in order, after m. A transform that does not act on
// each axis alone with a positive scale (a rotation, a shear, a flip, an
// axis permutation, a displacement field), one whose parameters live in
// an array, and one of the wrong length are errors naming its index.
func (m *axisMap) apply(ts []omeTransform) error { return m.applyDepth(ts, 0) }

func (m *axisMap) applyDepth(ts []omeTransform, depth int) error {
	n := len(m.scale)
	for i, t := range ts {
		if t.Path != "" {
			return fmt.Errorf("[%d]: a %s stored at %q: %w", i, t.Type, t.Path, ErrUnsupported)
		}
		var err error
		switch t.Type {
		case "identity":
		case "scale":
			err = m.scaleBy(t.Scale, n)
		case "translation":
			if len(t.Translation) != n {
				err = fmt.Errorf("translation %s has %d values, want %d", short(t.Translation), len(t.Translation), n)
				break
			}
			for k, v := range t.Translation {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					err = fmt.Errorf("translation %s: want finite values", short(t.Translation))
					break
				}
				m.shift[k] += v
			}
		case "affine":
			err = m.affine(t.Affine, n)
		case "sequence":
			if depth >= maxSequenceDepth {
				err = fmt.Errorf("sequences nested more than %d deep", maxSequenceDepth)
				break
			}
			err = m.applyDepth(t.Transformations, depth+1)
		default:
			err = fmt.Errorf("type %q does not reduce to a scale and a translation: %w", t.Type, ErrUnsupported)
		}
		if err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

// scaleBy composes a scale of n positive values after m.
func (m *axisMap) scaleBy(s []float64, n int) error {
	if len(s) != n {
		return fmt.Errorf("scale %s has %d values, want %d", short(s), len(s), n)
	}
	for _, v := range s {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("scale %s: want positive values (a flip or a zero does not give a voxel size)", short(s))
		}
	}
	for k, v := range s {
		m.scale[k] *= v
		m.shift[k] *= v
	}
	return nil
}

// affine composes an NGFF 0.6 affine after m when its matrix is diagonal
// with a positive diagonal: n rows (or n+1, the last being 0…0 1) of n+1
// values, nested or flat in row-major order.
func (m *axisMap) affine(raw json.RawMessage, n int) error {
	var rows [][]float64
	if json.Unmarshal(raw, &rows) != nil {
		var flat []float64
		if err := json.Unmarshal(raw, &flat); err != nil {
			var b bytes.Buffer
			json.Compact(&b, raw)
			return fmt.Errorf("affine %.100s: want a matrix of numbers", b.Bytes())
		}
		for len(flat) >= n+1 && len(flat)%(n+1) == 0 {
			rows, flat = append(rows, flat[:n+1]), flat[n+1:]
		}
	}
	if len(rows) != n && len(rows) != n+1 {
		return fmt.Errorf("affine %s: want %d rows of %d values", short(rows), n, n+1)
	}
	for r, row := range rows {
		if len(row) != n+1 {
			return fmt.Errorf("affine %s: want %d rows of %d values", short(rows), n, n+1)
		}
		for c, v := range row {
			want := v
			switch {
			case r == n: // the homogeneous row
				want = 0
				if c == n {
					want = 1
				}
			case c != r && c != n:
				want = 0
			}
			if v != want || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("affine %s: a rotation, shear or axis permutation does not reduce to a scale and a translation: %w", short(rows), ErrUnsupported)
			}
		}
	}
	scale := make([]float64, n)
	for k := range scale {
		scale[k] = rows[k][k]
	}
	if err := m.scaleBy(scale, n); err != nil {
		return err
	}
	for k := range n {
		m.shift[k] += rows[k][n]
	}
	return nil
}

// short formats v for a message, cut to 120 bytes.
func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
