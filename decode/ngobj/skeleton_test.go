package ngobj

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func skel(verts [][3]float32, edges [][2]uint32, extra []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(verts)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(edges)))
	for _, v := range verts {
		for _, c := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(c))
		}
	}
	for _, e := range edges {
		b = binary.LittleEndian.AppendUint32(b, e[0])
		b = binary.LittleEndian.AppendUint32(b, e[1])
	}
	return append(b, extra...)
}

// TestSkeletonSWCOrder checks that a parent stored after its child is
// written first, that a cycle's closing edge is kept as a comment, and
// the identity transform's micrometres.
func TestSkeletonSWCOrder(t *testing.T) {
	si, err := ParseSkeletonInfo([]byte(`{"@type":"neuroglancer_skeletons"}`))
	if err != nil {
		t.Fatal(err)
	}
	b := skel([][3]float32{{1000, 0, 0}, {2000, 0, 0}, {3000, 0, 0}}, [][2]uint32{{1, 2}, {0, 1}, {2, 0}}, nil)
	out, err := SkeletonSWC(si, "x/1", b)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"1 0 1.00000 0.00000 0.00000 0.00000 -1\n", "2 0 2.00000 0.00000 0.00000 0.00000 1\n",
		"3 0 3.00000 0.00000 0.00000 0.00000 1\n", "# edge 2 3\n", "x/1"} {
		if !strings.Contains(s, want) {
			t.Errorf("SWC lacks %q:\n%s", want, s)
		}
	}
}

// TestSkeletonSWCHostile checks that counts that lie are refused before
// anything of their size is allocated.
func TestSkeletonSWCHostile(t *testing.T) {
	si, _ := ParseSkeletonInfo([]byte(`{"vertex_attributes":[{"id":"radius","data_type":"float32","num_components":1}]}`))
	huge := binary.LittleEndian.AppendUint32(nil, 1<<31)
	huge = binary.LittleEndian.AppendUint32(huge, 1<<31)
	for name, b := range map[string][]byte{
		"empty":      nil,
		"huge":       huge,
		"edge past":  skel([][3]float32{{0, 0, 0}}, [][2]uint32{{0, 7}}, make([]byte, 4)),
		"self edge":  skel([][3]float32{{0, 0, 0}}, [][2]uint32{{0, 0}}, make([]byte, 4)),
		"short attr": skel([][3]float32{{0, 0, 0}}, nil, make([]byte, 3)),
		"long":       skel([][3]float32{{0, 0, 0}}, nil, make([]byte, 5)),
	} {
		if _, err := SkeletonSWC(si, name, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := ParseSkeletonInfo([]byte(`{"transform":[1,2,3]}`)); err == nil {
		t.Error("a transform of 3 numbers was accepted")
	}
}

// TestLegacyMeshHostile checks that fragments whose counts lie are refused
// and leave the mesh as it was, and that indices are offset per fragment.
func TestLegacyMeshHostile(t *testing.T) {
	frag := func(nv uint32, pos int, tris ...uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, nv)
		b = append(b, make([]byte, 12*pos)...)
		for _, v := range tris {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	var m Mesh
	if err := m.AddLegacyFragment("a", frag(3, 3, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"short":      {1, 0},
		"huge":       frag(1<<31, 1),
		"index past": frag(3, 3, 0, 1, 3),
		"partial":    frag(3, 3, 0, 1)[:4+36+6],
	} {
		if err := m.AddLegacyFragment(name, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
	if err := m.AddLegacyFragment("b", frag(3, 3, 2, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if got := m.Triangles; len(got) != 6 || got[3] != 5 || got[5] != 3 || len(m.Positions) != 18 {
		t.Errorf("merged mesh: %d positions, triangles %v", len(m.Positions), got)
	}
	big := `{"fragments":[` + strings.Repeat(`"x",`, MaxFragments) + `"x"]}`
	if _, err := ParseManifest("m", []byte(big)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("manifest of %d fragments: err %v", MaxFragments+1, err)
	}
}

// TestAnnotationRowHostile checks that records shorter or longer than
// their type, and relationship counts past the record, are refused.
func TestAnnotationRowHostile(t *testing.T) {
	ai, err := ParseAnnotationInfo([]byte(`{"@type":"neuroglancer_annotations_v1","dimensions":{"x":[1,"nm"],"y":[1,"nm"]},
		"annotation_type":"POINT","properties":[{"id":"a","type":"uint8"},{"id":"b","type":"uint32"}],
		"relationships":[{"id":"r","key":"r"}],"by_id":{"key":"by_id"}}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 8+4+1+3) // x, y; b; a; padding
	rec[8], rec[12] = 7, 9
	ok := binary.LittleEndian.AppendUint32(append([]byte{}, rec...), 1)
	ok = binary.LittleEndian.AppendUint64(ok, 42)
	row, err := ai.Row("1", ok)
	if err != nil || strings.Join(row, ",") != "1,0,0,9,7,42" {
		t.Fatalf("row %q, err %v", row, err)
	}
	lying := binary.LittleEndian.AppendUint32(append([]byte{}, rec...), 1<<31)
	for name, b := range map[string][]byte{"short": rec[:10], "no count": rec, "count past": lying, "long": append(ok, 0)} {
		if _, err := ai.Row("1", b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", name, err)
		}
	}
}

// TestParseManifest checks the token parser against what encoding/json's
// Unmarshal makes of the same manifests.
func TestParseManifest(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`{"fragments":["7:0:1","7:0:2"]}`, []string{"7:0:1", "7:0:2"}, true},
		{`{"other":{"fragments":[1,{"a":[]}]},"fragments":["a"],"more":[1,2]}`, []string{"a"}, true},
		{`{"fragments":null}`, nil, true},
		{`{}`, nil, true},
		{`{"fragments":[]}`, []string{}, true},
		{`{"fragments":[1]}`, nil, false},
		{`{"fragments":"a"}`, nil, false},
		{`["a"]`, nil, false},
		{`{"fragments":["a"]} x`, nil, false},
		{`{"fragments":["a"`, nil, false},
		{``, nil, false},
	} {
		got, err := ParseManifest("m", []byte(tc.in))
		if tc.ok != (err == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("ParseManifest(%s) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseManifest(%s): %v, want an error wrapping ErrCorrupt", tc.in, err)
		}
	}
}

// TestSkeletonSWCWrappingCounts holds a skeleton whose info declares
// 32768 vertex attributes of 2^33-12 bytes a vertex in all (2^33 with
// its position): 2^31
// vertices of it take 2^64 bytes, which wrapped to 0 made an object of
// 8 bytes look whole and panicked slicing its positions. It is refused,
// naming the vertices and the object's size.
func TestSkeletonSWCWrappingCounts(t *testing.T) {
	var attrs []string
	for left := 1<<33 - 12; left > 0; {
		n := min(left/4, 1<<16)
		attrs = append(attrs, fmt.Sprintf(`{"id":"a%d","data_type":"float32","num_components":%d}`, len(attrs), n))
		left -= 4 * n
	}
	si, err := ParseSkeletonInfo([]byte(`{"vertex_attributes":[` + strings.Join(attrs, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint32(nil, 1<<31)
	b = binary.LittleEndian.AppendUint32(b, 0)
	_, err = SkeletonSWC(si, "wrap", b)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "2147483648 vertices") {
		t.Errorf("err %v, want ErrCorrupt naming 2147483648 vertices", err)
	}
}
