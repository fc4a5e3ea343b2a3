// Package ngobj turns Neuroglancer precomputed objects other than voxels
// into the files legacy tools read: skeletons into SWC, legacy meshes into
// Wavefront OBJ and binary PLY, annotations into CSV. Its functions are
// pure functions of bytes: no I/O, no FUSE.
//
// Every decoder checks the counts an object declares against its stored
// size before it allocates, so that an object whose counts lie is refused
// with an error, never a crash, and the memory a conversion takes is a
// small multiple of the object's stored size.
package ngobj

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrCorrupt wraps every refusal of an object's bytes.
var ErrCorrupt = errors.New("ngobj: corrupt object")

// SkeletonInfo is the part of a neuroglancer_skeletons directory's info
// file a conversion needs.
type SkeletonInfo struct {
	Type string `json:"@type"`
	// Transform is the 3×4 row-major matrix from stored coordinates to
	// nanometres; the identity when absent.
	Transform []float64 `json:"transform"`
	// VertexAttributes are stored after the edges, in this order.
	VertexAttributes []VertexAttribute `json:"vertex_attributes"`
	// Sharding is the "sharding" member: a sharded directory when
	// decode.ShardingGiven.
	Sharding json.RawMessage `json:"sharding"`
}

// VertexAttribute is one per-vertex attribute of a skeleton.
type VertexAttribute struct {
	ID            string `json:"id"`
	DataType      string `json:"data_type"`
	NumComponents int    `json:"num_components"`
}

// ParseSkeletonInfo parses and checks a skeleton info file.
func ParseSkeletonInfo(b []byte) (*SkeletonInfo, error) {
	var si SkeletonInfo
	if err := json.Unmarshal(b, &si); err != nil {
		return nil, fmt.Errorf("ngobj: skeleton info: %w", err)
	}
	if si.Type != "" && si.Type != "neuroglancer_skeletons" {
		return nil, fmt.Errorf("ngobj: skeleton info: @type %q, want neuroglancer_skeletons", si.Type)
	}
	if si.Transform == nil {
		si.Transform = []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}
	}
	if len(si.Transform) != 12 {
		return nil, fmt.Errorf("ngobj: skeleton info: transform has %d numbers, want 12", len(si.Transform))
	}
	for _, a := range si.VertexAttributes {
		if dtypeSize(a.DataType) == 0 {
			return nil, fmt.Errorf("ngobj: skeleton info: attribute %q: data_type %q not supported", a.ID, a.DataType)
		}
		if a.NumComponents < 1 || a.NumComponents > 1<<16 {
			return nil, fmt.Errorf("ngobj: skeleton info: attribute %q: num_components %d", a.ID, a.NumComponents)
		}
	}
	return &si, nil
}

func dtypeSize(t string) int {
	switch t {
	case "int8", "uint8":
		return 1
	case "int16", "uint16":
		return 2
	case "int32", "uint32", "float32":
		return 4
	}
	return 0
}

// value reads the i-th element of type t in b as a float64.
func value(t string, b []byte, i int) float64 {
	switch t {
	case "int8":
		return float64(int8(b[i]))
	case "uint8":
		return float64(b[i])
	case "int16":
		return float64(int16(binary.LittleEndian.Uint16(b[2*i:])))
	case "uint16":
		return float64(binary.LittleEndian.Uint16(b[2*i:]))
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case "uint32":
		return float64(binary.LittleEndian.Uint32(b[4*i:]))
	default: // float32
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
}

// SkeletonSWC converts one encoded skeleton (the unsharded object, or the
// bytes a shard holds for it) to an SWC file. name names the source object
// in the header.
//
// The SWC file has:
//   - '#' header lines naming the source object, the unit (micrometres)
//     and the columns;
//   - one line per vertex "index type x y z radius parent": indices 1, 2,
//     3… in the order written, type 0 (undefined), positions transformed
//     by the info's transform into nanometres and written in micrometres
//     with 5 decimals (0.01 nm). Vertices are written breadth first from
//     each root, roots being taken in stored vertex order, so every parent
//     comes before its children; parent -1 marks a root, and a skeleton
//     with several components is a forest;
//   - radius: the vertex attribute "radius" (its first component), scaled
//     by the cube root of the transform's |determinant| (the transform's
//     isotropic scale) and written in micrometres; 0 when the skeleton has
//     no radius attribute;
//   - the other vertex attributes, and the radius's other components, as
//     comment lines "# attribute <index> <id> <values…>" after the
//     vertex lines, one per vertex;
//   - the edges that close a cycle (the SWC tree cannot hold them) as
//     comment lines "# edge <index> <index>".
//
// Counts that do not match the stored size, edges that name a vertex past
// the last, and an edge of a vertex to itself are refused (ErrCorrupt).
func SkeletonSWC(si *SkeletonInfo, name string, b []byte) ([]byte, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: skeleton %s: %d bytes, shorter than its header", ErrCorrupt, name, len(b))
	}
	nv := uint64(binary.LittleEndian.Uint32(b))
	ne := uint64(binary.LittleEndian.Uint32(b[4:]))
	// The bytes of one vertex, its attributes included: a sum of at most
	// 2^18 a attribute, which cannot wrap, unlike its product with nv
	// (2^31 vertices of 2^33 bytes each would sum to 2^64, wrapped to 0).
	stride := uint64(12)
	for _, a := range si.VertexAttributes {
		stride += uint64(a.NumComponents) * uint64(dtypeSize(a.DataType))
	}
	if nv > uint64(len(b))/stride {
		return nil, fmt.Errorf("%w: skeleton %s: %d vertices of %d bytes each (%d attributes) take more than the object's %d bytes",
			ErrCorrupt, name, nv, stride, len(si.VertexAttributes), len(b))
	}
	if want := 8 + stride*nv + 8*ne; want != uint64(len(b)) {
		return nil, fmt.Errorf("%w: skeleton %s: %d vertices, %d edges and %d attributes take %d bytes, object has %d",
			ErrCorrupt, name, nv, ne, len(si.VertexAttributes), want, len(b))
	}
	pos := b[8 : 8+12*nv]
	eb := b[8+12*nv : 8+12*nv+8*ne]
	attrs := make([][]byte, len(si.VertexAttributes))
	off := 8 + 12*nv + 8*ne
	for i, a := range si.VertexAttributes {
		n := nv * uint64(a.NumComponents) * uint64(dtypeSize(a.DataType))
		attrs[i] = b[off : off+n]
		off += n
	}

	// Adjacency in compressed form: deg counts, then neighbours.
	start := make([]uint32, nv+1)
	for e := range ne {
		u := uint64(binary.LittleEndian.Uint32(eb[8*e:]))
		v := uint64(binary.LittleEndian.Uint32(eb[8*e+4:]))
		if u >= nv || v >= nv || u == v {
			return nil, fmt.Errorf("%w: skeleton %s: edge %d (%d, %d) with %d vertices", ErrCorrupt, name, e, u, v, nv)
		}
		start[u+1]++
		start[v+1]++
	}
	for i := range nv {
		start[i+1] += start[i]
	}
	adj := make([]uint32, 2*ne) // neighbour, by adjacency slot
	via := make([]uint32, 2*ne) // edge number, by adjacency slot
	fill := make([]uint32, nv)
	for e := range uint32(ne) {
		u := binary.LittleEndian.Uint32(eb[8*e:])
		v := binary.LittleEndian.Uint32(eb[8*e+4:])
		adj[start[u]+fill[u]], via[start[u]+fill[u]] = v, e
		fill[u]++
		adj[start[v]+fill[v]], via[start[v]+fill[v]] = u, e
		fill[v]++
	}

	// Breadth first from each unvisited vertex in stored order.
	const none = math.MaxUint32
	order := make([]uint32, 0, nv) // stored index by SWC index-1
	swc := make([]uint32, nv)      // SWC index by stored index; 0 unvisited
	parent := make([]uint32, nv)   // stored index of the parent, none for a root
	tree := make([]bool, ne)       // edges walked from parent to child
	for r := range uint32(nv) {
		if swc[r] != 0 {
			continue
		}
		parent[r] = none
		order = append(order, r)
		swc[r] = uint32(len(order))
		for q := len(order) - 1; q < len(order); q++ {
			u := order[q]
			for k := start[u]; k < start[u+1]; k++ {
				if v := adj[k]; swc[v] == 0 {
					parent[v] = u
					order = append(order, v)
					swc[v] = uint32(len(order))
					tree[via[k]] = true
				}
			}
		}
	}

	m := si.Transform
	det := m[0]*(m[5]*m[10]-m[6]*m[9]) - m[1]*(m[4]*m[10]-m[6]*m[8]) + m[2]*(m[4]*m[9]-m[5]*m[8])
	rscale := math.Cbrt(math.Abs(det))
	radius := -1
	for i, a := range si.VertexAttributes {
		if a.ID == "radius" {
			radius = i
			break
		}
	}

	out := make([]byte, 0, 64+nv*72)
	out = fmt.Appendf(out, "# volfs: SWC of Neuroglancer precomputed skeleton %q\n", name)
	out = append(out, "# unit: micrometres (positions transformed to nanometres by the skeleton info's transform, divided by 1000)\n"...)
	if radius < 0 {
		out = append(out, "# radius: none stored, written as 0\n"...)
	}
	out = fmt.Appendf(out, "# vertices: %d, edges: %d\n", nv, ne)
	out = append(out, "# index type x y z radius parent\n"...)
	for i, v := range order {
		p := pos[12*uint64(v):]
		x := float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
		y := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4:])))
		z := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[8:])))
		r := 0.0
		if radius >= 0 {
			a := si.VertexAttributes[radius]
			r = value(a.DataType, attrs[radius], int(v)*a.NumComponents) * rscale
		}
		par := int64(-1)
		if parent[v] != none {
			par = int64(swc[parent[v]])
		}
		out = strconv.AppendInt(out, int64(i+1), 10)
		out = append(out, " 0 "...)
		for k := range 3 {
			c := (m[4*k]*x + m[4*k+1]*y + m[4*k+2]*z + m[4*k+3]) / 1000
			out = strconv.AppendFloat(out, c, 'f', 5, 64)
			out = append(out, ' ')
		}
		out = strconv.AppendFloat(out, r/1000, 'f', 5, 64)
		out = append(out, ' ')
		out = strconv.AppendInt(out, par, 10)
		out = append(out, '\n')
	}
	for ai, a := range si.VertexAttributes {
		if ai == radius && a.NumComponents == 1 {
			continue
		}
		for i, v := range order {
			out = fmt.Appendf(out, "# attribute %d %s", i+1, a.ID)
			for c := range a.NumComponents {
				out = append(out, ' ')
				out = strconv.AppendFloat(out, value(a.DataType, attrs[ai], int(v)*a.NumComponents+c), 'g', -1, 64)
			}
			out = append(out, '\n')
		}
	}
	for e := range ne {
		if !tree[e] {
			u := binary.LittleEndian.Uint32(eb[8*e:])
			v := binary.LittleEndian.Uint32(eb[8*e+4:])
			out = fmt.Appendf(out, "# edge %d %d\n", swc[u], swc[v])
		}
	}
	return out, nil
}
