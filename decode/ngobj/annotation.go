package ngobj

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// AnnotationInfo is the part of a neuroglancer_annotations_v1 info file a
// conversion needs.
type AnnotationInfo struct {
	Type           string `json:"@type"`
	AnnotationType string `json:"annotation_type"`
	Properties     []struct {
		ID         string   `json:"id"`
		Type       string   `json:"type"`
		EnumValues []int64  `json:"enum_values"`
		EnumLabels []string `json:"enum_labels"`
	} `json:"properties"`
	Relationships []struct {
		ID       string          `json:"id"`
		Key      string          `json:"key"`
		Sharding json.RawMessage `json:"sharding"`
	} `json:"relationships"`
	ByID struct {
		Key      string          `json:"key"`
		Sharding json.RawMessage `json:"sharding"`
	} `json:"by_id"`
	// Dims are the names of the coordinate dimensions, in info order.
	Dims []string `json:"-"`
}

// IsAnnotationInfo reports whether b is an annotation info file.
func IsAnnotationInfo(b []byte) bool {
	var t struct {
		Type string `json:"@type"`
	}
	return json.Unmarshal(b, &t) == nil && t.Type == "neuroglancer_annotations_v1"
}

// ParseAnnotationInfo parses and checks an annotation info file.
func ParseAnnotationInfo(b []byte) (*AnnotationInfo, error) {
	var ai AnnotationInfo
	if err := json.Unmarshal(b, &ai); err != nil {
		return nil, fmt.Errorf("ngobj: annotation info: %w", err)
	}
	var raw struct {
		Dimensions json.RawMessage `json:"dimensions"`
	}
	_ = json.Unmarshal(b, &raw)
	dec := json.NewDecoder(bytes.NewReader(raw.Dimensions))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("ngobj: annotation info: dimensions is not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("ngobj: annotation info: dimensions: %w", err)
		}
		ai.Dims = append(ai.Dims, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, fmt.Errorf("ngobj: annotation info: dimensions: %w", err)
		}
	}
	if len(ai.Dims) == 0 || len(ai.Dims) > 32 {
		return nil, fmt.Errorf("ngobj: annotation info: %d dimensions", len(ai.Dims))
	}
	switch ai.AnnotationType {
	case "POINT", "LINE", "AXIS_ALIGNED_BOUNDING_BOX", "ELLIPSOID":
	default:
		return nil, fmt.Errorf("ngobj: annotation info: annotation_type %q", ai.AnnotationType)
	}
	for _, p := range ai.Properties {
		if propSize(p.Type) == 0 {
			return nil, fmt.Errorf("ngobj: annotation info: property %q: type %q", p.ID, p.Type)
		}
	}
	return &ai, nil
}

func propSize(t string) int {
	switch t {
	case "rgb":
		return 3
	case "rgba":
		return 4
	}
	return dtypeSize(t)
}

// propAlign is a property type's alignment: the record holds 4-byte types
// first, then 2-byte, then 1-byte ones (uint8, int8, rgb, rgba).
func propAlign(t string) int {
	if t == "rgb" || t == "rgba" {
		return 1
	}
	return dtypeSize(t)
}

// points is the number of rank-long coordinate vectors of the type.
func (ai *AnnotationInfo) points() int {
	if ai.AnnotationType == "POINT" {
		return 1
	}
	return 2
}

// Header returns the CSV header: id, the geometry columns, one column per
// property in info order, one per relationship.
func (ai *AnnotationInfo) Header() []string {
	h := []string{"id"}
	var groups []string
	switch ai.AnnotationType {
	case "POINT":
		groups = []string{"point"}
	case "ELLIPSOID":
		groups = []string{"center", "radii"}
	default:
		groups = []string{"point_a", "point_b"}
	}
	for _, g := range groups {
		for _, d := range ai.Dims {
			h = append(h, g+"_"+d)
		}
	}
	for _, p := range ai.Properties {
		h = append(h, p.ID)
	}
	for _, r := range ai.Relationships {
		h = append(h, r.ID)
	}
	return h
}

// Row decodes one annotation of the by_id index (id, its stored bytes)
// into CSV fields in Header's order: coordinates as float32 text, enum
// properties by label, rgb and rgba as "#rrggbb[aa]", a relationship as
// its ids separated by spaces. A record shorter or longer than its type
// and relationship counts say is refused (ErrCorrupt).
func (ai *AnnotationInfo) Row(id string, b []byte) ([]string, error) {
	row := []string{id}
	n := ai.points() * len(ai.Dims)
	if len(b) < 4*n {
		return nil, fmt.Errorf("%w: annotation %s: %d bytes, shorter than its geometry", ErrCorrupt, id, len(b))
	}
	for i := range n {
		row = append(row, strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))), 'g', -1, 32))
	}
	off := 4 * n
	order := make([]int, len(ai.Properties))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return propAlign(ai.Properties[b].Type) - propAlign(ai.Properties[a].Type)
	})
	vals := make([]string, len(ai.Properties))
	for _, i := range order {
		p := ai.Properties[i]
		sz := propSize(p.Type)
		if off+sz > len(b) {
			return nil, fmt.Errorf("%w: annotation %s: %d bytes, shorter than its properties", ErrCorrupt, id, len(b))
		}
		switch p.Type {
		case "rgb", "rgba":
			vals[i] = fmt.Sprintf("#%x", b[off:off+sz])
		default:
			v := value(p.Type, b[off:], 0)
			vals[i] = strconv.FormatFloat(v, 'g', -1, 32)
			if k := slices.Index(p.EnumValues, int64(v)); k >= 0 && k < len(p.EnumLabels) && float64(int64(v)) == v {
				vals[i] = p.EnumLabels[k]
			}
		}
		off += sz
	}
	off = (off + 3) &^ 3
	row = append(row, vals...)
	for _, r := range ai.Relationships {
		if off+4 > len(b) {
			return nil, fmt.Errorf("%w: annotation %s: record ends before relationship %q", ErrCorrupt, id, r.ID)
		}
		c := uint64(binary.LittleEndian.Uint32(b[off:]))
		off += 4
		if c > uint64(len(b)-off)/8 {
			return nil, fmt.Errorf("%w: annotation %s: relationship %q of %d ids past the record", ErrCorrupt, id, r.ID, c)
		}
		ids := make([]string, c)
		for k := range ids {
			ids[k] = strconv.FormatUint(binary.LittleEndian.Uint64(b[off:]), 10)
			off += 8
		}
		row = append(row, strings.Join(ids, " "))
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: annotation %s: %d bytes after the record", ErrCorrupt, id, len(b)-off)
	}
	return row, nil
}

// CSV writes a header and rows as CSV.
func CSV(header []string, rows [][]string) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(header)
	_ = w.WriteAll(rows) // a bytes.Buffer does not fail
	return buf.Bytes()
}
