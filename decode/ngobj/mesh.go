package ngobj

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// MaxFragments bounds the fragments of one legacy mesh a conversion reads:
// a manifest that lists more is refused rather than fetched.
const MaxFragments = 4096

// ParseManifest returns the fragment names of a legacy mesh manifest
// ("<id>:0": {"fragments": [...]}), refusing more than MaxFragments. It
// reads the manifest as a stream of tokens and stops at the fragment past
// MaxFragments, so that a manifest listing millions costs what its first
// MaxFragments names take, not a string per name.
func ParseManifest(name string, b []byte) ([]string, error) {
	bad := func(err error) error { return fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, name, err) }
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad(fmt.Errorf("not a JSON object"))
	}
	var frags []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(err)
		}
		if tok != "fragments" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, bad(err)
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			if tok == nil && err == nil { // "fragments": null
				frags = nil
				continue
			}
			return nil, bad(fmt.Errorf("fragments is not an array"))
		}
		frags = frags[:0]
		for dec.More() {
			if len(frags) == MaxFragments {
				return nil, fmt.Errorf("%w: manifest %s lists more than %d fragments", ErrCorrupt, name, MaxFragments)
			}
			tok, err := dec.Token()
			if err != nil {
				return nil, bad(err)
			}
			f, ok := tok.(string)
			if !ok {
				return nil, bad(fmt.Errorf("fragment %v is not a string", tok))
			}
			frags = append(frags, f)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, bad(err)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad(fmt.Errorf("data after the manifest"))
	}
	return frags, nil
}

// Mesh is a triangle mesh: positions (x, y, z per vertex, nanometres) and
// triangles as 0-based vertex indices.
type Mesh struct {
	Positions []float32
	Triangles []uint32
}

// AddLegacyFragment appends one legacy mesh fragment (uint32 vertex count,
// float32 positions, uint32 triangle indices to the end) to m, offsetting
// its indices by the vertices already there. A count that does not fit
// the stored size, a tail that is not whole triangles and an index past
// the fragment's vertices are refused (ErrCorrupt), m unchanged.
func (m *Mesh) AddLegacyFragment(name string, b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("%w: fragment %s: %d bytes, shorter than its header", ErrCorrupt, name, len(b))
	}
	nv := uint64(binary.LittleEndian.Uint32(b))
	if 4+12*nv > uint64(len(b)) {
		return fmt.Errorf("%w: fragment %s: %d vertices need %d bytes, it has %d", ErrCorrupt, name, nv, 4+12*nv, len(b))
	}
	rest := b[4+12*nv:]
	if len(rest)%12 != 0 {
		return fmt.Errorf("%w: fragment %s: %d bytes of triangles, not whole triangles", ErrCorrupt, name, len(rest))
	}
	base := uint64(len(m.Positions) / 3)
	if base+nv > math.MaxUint32 {
		return fmt.Errorf("%w: fragment %s: more than 2^32 vertices in the mesh", ErrCorrupt, name)
	}
	for i := 0; i < len(rest); i += 4 {
		if v := uint64(binary.LittleEndian.Uint32(rest[i:])); v >= nv {
			return fmt.Errorf("%w: fragment %s: triangle index %d with %d vertices", ErrCorrupt, name, v, nv)
		}
	}
	for i := uint64(0); i < 3*nv; i++ {
		m.Positions = append(m.Positions, math.Float32frombits(binary.LittleEndian.Uint32(b[4+4*i:])))
	}
	for i := 0; i < len(rest); i += 4 {
		m.Triangles = append(m.Triangles, uint32(base)+binary.LittleEndian.Uint32(rest[i:]))
	}
	return nil
}

// OBJ writes m as Wavefront OBJ: '#' lines naming the source and the unit
// (nanometres, as stored), "v x y z" per vertex (shortest float32 text) and
// "f a b c" per triangle with 1-based indices.
func (m *Mesh) OBJ(name string) []byte {
	out := make([]byte, 0, 16+len(m.Positions)*12+len(m.Triangles)*8)
	out = fmt.Appendf(out, "# volfs: OBJ of Neuroglancer precomputed legacy mesh %q\n# unit: nanometres\n", name)
	out = fmt.Appendf(out, "# vertices: %d, faces: %d\n", len(m.Positions)/3, len(m.Triangles)/3)
	for i := 0; i < len(m.Positions); i += 3 {
		out = append(out, 'v')
		for _, c := range m.Positions[i : i+3] {
			out = append(out, ' ')
			out = strconv.AppendFloat(out, float64(c), 'g', -1, 32)
		}
		out = append(out, '\n')
	}
	for i := 0; i < len(m.Triangles); i += 3 {
		out = append(out, 'f')
		for _, v := range m.Triangles[i : i+3] {
			out = append(out, ' ')
			out = strconv.AppendUint(out, uint64(v)+1, 10)
		}
		out = append(out, '\n')
	}
	return out
}

// PLY writes m as binary little-endian PLY: float x, y, z per vertex
// (nanometres) and a uchar-counted list of uint indices per face.
func (m *Mesh) PLY(name string) []byte {
	out := fmt.Appendf(nil, "ply\nformat binary_little_endian 1.0\ncomment volfs: PLY of Neuroglancer precomputed legacy mesh %q\ncomment unit: nanometres\n"+
		"element vertex %d\nproperty float x\nproperty float y\nproperty float z\nelement face %d\nproperty list uchar uint vertex_indices\nend_header\n",
		name, len(m.Positions)/3, len(m.Triangles)/3)
	out = append(make([]byte, 0, len(out)+4*len(m.Positions)+13*len(m.Triangles)/3), out...)
	for _, c := range m.Positions {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(c))
	}
	for i := 0; i < len(m.Triangles); i += 3 {
		out = append(out, 3)
		for _, v := range m.Triangles[i : i+3] {
			out = binary.LittleEndian.AppendUint32(out, v)
		}
	}
	return out
}
