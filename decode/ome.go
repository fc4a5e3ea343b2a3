package decode

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// OMEImage is an OME-Zarr multiscale image (NGFF 0.4 in a Zarr v2 group's
// ".zattrs", NGFF 0.5 under "ome" in a Zarr v3 group's "zarr.json"): what
// its first "multiscales" entry says of its axes and levels. volfs leaves
// the attributes as they are (the levels are served at the paths they
// name) and uses them to give each level's views their voxel size and
// axis roles.
type OMEImage struct {
	Dir     string // the group's key, "" for the root
	Version string // "0.4", "0.5", or "" when the metadata does not say
	Name    string
	Axes    []OMEAxis
	Levels  []OMELevel
}

// OMEAxis is one axis of an OME-Zarr image, slowest first as in the arrays.
type OMEAxis struct {
	Name string
	Type string // "space", "time", "channel", or another the writer chose, "" when unset
	Unit string // e.g. "micrometer"; "" when unset
}

// OMELevel is one resolution level: the array at Path (relative to the
// group) and its scale per axis, in the axes' units, with the image's own
// transforms applied.
type OMELevel struct {
	Path  string
	Scale []float64
}

// nanometres per unit of the NGFF length units (UDUNITS-2 names).
var lengthUnits = map[string]float64{
	"angstrom": 0.1, "attometer": 1e-9, "centimeter": 1e7, "decimeter": 1e8, "exameter": 1e27,
	"femtometer": 1e-6, "foot": 3.048e8, "gigameter": 1e18, "hectometer": 1e11, "inch": 2.54e7,
	"kilometer": 1e12, "megameter": 1e15, "meter": 1e9, "micrometer": 1e3, "mile": 1.609344e12,
	"millimeter": 1e6, "nanometer": 1, "parsec": 3.0856775814913673e25, "petameter": 1e24,
	"picometer": 1e-3, "terameter": 1e21, "yard": 9.144e8, "yoctometer": 1e-15, "yottameter": 1e33,
	"zeptometer": 1e-12, "zettameter": 1e30,
}

// ParseOME reads the OME-Zarr image that the group metadata meta of the
// directory dir describes: a Zarr v2 ".zattrs" or a Zarr v3 group's
// "zarr.json". Metadata without "multiscales" is no image (nil, nil); a
// "multiscales" that is not what NGFF 0.4 or 0.5 specifies is an error
// naming the field.
func ParseOME(dir, name string, meta []byte) (*OMEImage, error) {
	file := path.Join(dir, name)
	fail := func(field string, err error) error { return &MetadataError{File: file, Field: field, Err: err} }
	var top map[string]json.RawMessage
	if err := json.Unmarshal(meta, &top); err != nil {
		return nil, nil // not an object: not ours to judge
	}
	attrs, prefix := top, ""
	if raw, ok := top["attributes"]; ok && name == "zarr.json" {
		if json.Unmarshal(raw, &attrs) != nil {
			return nil, nil
		}
		prefix = "attributes."
	}
	version := ""
	if raw, ok := attrs["ome"]; ok { // NGFF 0.5
		var ome map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ome); err != nil {
			return nil, fail(prefix+"ome", err)
		}
		json.Unmarshal(ome["version"], &version)
		attrs, prefix = ome, prefix+"ome."
	}
	raw, ok := attrs["multiscales"]
	if !ok {
		return nil, nil
	}
	var ms []struct {
		Version  string
		Name     string
		Axes     []json.RawMessage
		Datasets []struct {
			Path                      string
			CoordinateTransformations []omeTransform `json:"coordinateTransformations"`
		}
		CoordinateTransformations []omeTransform `json:"coordinateTransformations"`
	}
	if err := json.Unmarshal(raw, &ms); err != nil || len(ms) == 0 {
		return nil, fail(prefix+"multiscales", fmt.Errorf("want a list of at least one multiscale, got %.100s", raw))
	}
	m := ms[0]
	img := &OMEImage{Dir: dir, Version: version, Name: m.Name}
	if img.Version == "" {
		img.Version = m.Version
	}
	field := prefix + "multiscales[0]"
	for i, a := range m.Axes {
		var ax OMEAxis
		if json.Unmarshal(a, &ax.Name) != nil { // NGFF 0.3 named axes by strings
			var obj struct{ Name, Type, Unit string }
			if err := json.Unmarshal(a, &obj); err != nil || obj.Name == "" {
				return nil, fail(fmt.Sprintf("%s.axes[%d]", field, i), fmt.Errorf("want an axis with a name, got %s", a))
			}
			ax = OMEAxis(obj)
		}
		img.Axes = append(img.Axes, ax)
	}
	if len(img.Axes) == 0 {
		return nil, fail(field+".axes", fmt.Errorf("missing"))
	}
	global, err := applyTransforms(m.CoordinateTransformations, len(img.Axes))
	if err != nil {
		return nil, fail(field+".coordinateTransformations", err)
	}
	for i, d := range m.Datasets {
		where := fmt.Sprintf("%s.datasets[%d]", field, i)
		if d.Path == "" || strings.Contains(d.Path, "..") || path.IsAbs(d.Path) {
			return nil, fail(where+".path", fmt.Errorf("%q is not a path below the group", d.Path))
		}
		scale, err := applyTransforms(d.CoordinateTransformations, len(img.Axes))
		if err != nil {
			return nil, fail(where+".coordinateTransformations", err)
		}
		for k := range scale {
			scale[k] *= global[k]
		}
		img.Levels = append(img.Levels, OMELevel{Path: path.Clean(d.Path), Scale: scale})
	}
	return img, nil
}

// omeTransform is one coordinate transformation of NGFF 0.4/0.5.
type omeTransform struct {
	Type        string
	Scale       []float64
	Translation []float64
	Path        string
}

// applyTransforms returns the scale per axis that the transformations
// give (1 where none), refusing a scale of the wrong length or stored in
// a file.
func applyTransforms(ts []omeTransform, n int) ([]float64, error) {
	scale := make([]float64, n)
	for k := range scale {
		scale[k] = 1
	}
	for i, t := range ts {
		switch t.Type {
		case "scale":
			if t.Path != "" {
				return nil, fmt.Errorf("[%d]: a scale stored at %q: %w", i, t.Path, ErrUnsupported)
			}
			if len(t.Scale) != n {
				return nil, fmt.Errorf("[%d]: scale %v has %d values, want %d", i, t.Scale, len(t.Scale), n)
			}
			for k, s := range t.Scale {
				if !(s > 0) {
					return nil, fmt.Errorf("[%d]: scale %v: want positive values", i, t.Scale)
				}
				scale[k] *= s
			}
		case "translation", "identity":
		default:
			return nil, fmt.Errorf("[%d]: type %q: %w", i, t.Type, ErrUnsupported)
		}
	}
	return scale, nil
}

// Level returns the index of the level whose path is rel (the array's key
// relative to the image's group), or false.
func (img *OMEImage) Level(rel string) (int, bool) {
	for i, l := range img.Levels {
		if l.Path == rel {
			return i, true
		}
	}
	return 0, false
}

// Apply describes a, level i of img, with the image's axes and voxel size:
// a.Axes names each axis with its type and unit, and a.Resolution holds the
// voxel size in nanometres along the space axes (1 along the others) when
// every space axis has a length unit. An array whose axis count differs
// from the image's is left as it is, and false is returned.
func (img *OMEImage) Apply(a *Array, i int) bool {
	if len(a.Shape) != len(img.Axes) || i < 0 || i >= len(img.Levels) {
		return false
	}
	a.OME, a.OMELevel = img, i
	a.Axes = make([]Axis, len(img.Axes))
	res := make([]float64, len(img.Axes))
	known := true
	for k, ax := range img.Axes {
		a.Axes[k] = Axis(ax)
		res[k] = 1
		if ax.Type == "space" {
			nm, ok := lengthUnits[ax.Unit]
			known = known && ok
			res[k] = img.Levels[i].Scale[k] * nm
		}
	}
	if known {
		a.Resolution = res
	}
	return true
}

// Axis is what the metadata says of one axis of an array (OME-Zarr axes,
// Zarr v3 dimension names).
type Axis struct {
	Name string
	Type string // "space", "time", "channel", other, or "" when unknown
	Unit string
}
