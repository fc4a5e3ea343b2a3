package decode

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strings"
)

// OMEImage is an OME-Zarr multiscale image (NGFF 0.4 in a Zarr v2 group's
// ".zattrs", NGFF 0.5 and 0.6 under "ome" in a Zarr v3 group's
// "zarr.json"): what its first "multiscales" entry says of its axes and
// levels. volfs leaves the attributes as they are (the levels are served
// at the paths they name) and uses them to give each level's views their
// voxel size, origin and axis roles.
type OMEImage struct {
	Dir     string // the group's key, "" for the root
	Version string // "0.4", "0.5", "0.6", or "" when the metadata does not say
	Name    string
	Axes    []OMEAxis
	Levels  []OMELevel
	// NoScale says why the coordinate transformations give no voxel
	// size (a rotation, a scale stored in an array, a malformed
	// scale), and the Levels then have nil Scale and Translation; nil
	// when every level's transforms reduce to a scale and a
	// translation per axis.
	NoScale error
}

// OMEAxis is one axis of an OME-Zarr image, slowest first as in the arrays.
type OMEAxis struct {
	Name string
	Type string // "space", "time", "channel", or another the writer chose, "" when unset
	Unit string // e.g. "micrometer"; "" when unset
}

// OMELevel is one resolution level: the array at Path (relative to the
// group), and the scale and translation per axis, in the axes' units,
// that map its voxel indices to the image's coordinates (level and image
// transforms composed): voxel i of an axis is centred at
// Translation + i*Scale.
type OMELevel struct {
	Path        string
	Scale       []float64
	Translation []float64
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

// omeMultiscale is one "multiscales" entry of NGFF 0.4 to 0.6.
type omeMultiscale struct {
	Version  string
	Name     string
	Axes     []json.RawMessage
	Datasets []struct {
		Path                      string
		CoordinateTransformations []omeTransform `json:"coordinateTransformations"`
	}
	CoordinateTransformations []omeTransform `json:"coordinateTransformations"`
	// CoordinateSystems (NGFF 0.6) name the axes of each coordinate
	// system; the levels' transforms lead into one of them.
	CoordinateSystems []struct {
		Name string
		Axes []json.RawMessage
	} `json:"coordinateSystems"`
}

// ParseOME reads the OME-Zarr image that the group metadata meta of the
// directory dir describes: a Zarr v2 ".zattrs" or a Zarr v3 group's
// "zarr.json". Metadata without "multiscales" is no image (nil, nil); a
// "multiscales" whose axes or paths are not what NGFF 0.4 to 0.6 specify
// is an error naming the field. Transformations that do not reduce to a
// scale and a translation per axis leave the image without a voxel size
// (OMEImage.NoScale) rather than refuse it.
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
	if raw, ok := attrs["ome"]; ok { // NGFF 0.5 and later
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
	var ms []omeMultiscale
	if err := json.Unmarshal(raw, &ms); err != nil || len(ms) == 0 {
		return nil, fail(prefix+"multiscales", fmt.Errorf("want a list of at least one multiscale, got %.100s", raw))
	}
	m := ms[0]
	img := &OMEImage{Dir: dir, Version: version, Name: m.Name}
	if img.Version == "" {
		img.Version = m.Version
	}
	field := prefix + "multiscales[0]"
	axes, axesField, global := m.Axes, field+".axes", m.CoordinateTransformations
	if len(m.CoordinateSystems) > 0 && len(axes) == 0 {
		// NGFF 0.6: the axes are those of the coordinate system the
		// levels lead into (the first, the image's default, unless the
		// level's transform names another); the multiscale's own
		// transforms lead from there into other systems, which the
		// views do not describe.
		cs := 0
		if len(m.Datasets) > 0 && len(m.Datasets[0].CoordinateTransformations) > 0 {
			out := m.Datasets[0].CoordinateTransformations[0].outputName()
			for i, c := range m.CoordinateSystems {
				if c.Name == out {
					cs = i
				}
			}
		}
		axes, axesField, global = m.CoordinateSystems[cs].Axes, fmt.Sprintf("%s.coordinateSystems[%d].axes", field, cs), nil
	}
	for i, a := range axes {
		var ax OMEAxis
		if json.Unmarshal(a, &ax.Name) != nil { // NGFF 0.3 named axes by strings
			var obj struct{ Name, Type, Unit string }
			if err := json.Unmarshal(a, &obj); err != nil || obj.Name == "" {
				return nil, fail(fmt.Sprintf("%s[%d]", axesField, i), fmt.Errorf("want an axis with a name, got %s", a))
			}
			ax = OMEAxis(obj)
		}
		img.Axes = append(img.Axes, ax)
	}
	if len(img.Axes) == 0 {
		return nil, fail(axesField, fmt.Errorf("missing"))
	}
	for i, d := range m.Datasets {
		where := fmt.Sprintf("%s.datasets[%d]", field, i)
		if d.Path == "" || strings.Contains(d.Path, "..") || path.IsAbs(d.Path) {
			return nil, fail(where+".path", fmt.Errorf("%q is not a path below the group", d.Path))
		}
		img.Levels = append(img.Levels, OMELevel{Path: path.Clean(d.Path)})
	}
	// Voxel sizes: each level's transforms, then the image's (0.4, 0.5).
	for i, d := range m.Datasets {
		where := fmt.Sprintf("%s.datasets[%d].coordinateTransformations", field, i)
		st := newAxisMap(len(img.Axes))
		err := st.apply(d.CoordinateTransformations)
		if err == nil {
			where = field + ".coordinateTransformations"
			err = st.apply(global)
		}
		if err != nil {
			img.NoScale = fail(where, err)
			for k := range img.Levels {
				img.Levels[k].Scale, img.Levels[k].Translation = nil, nil
			}
			break
		}
		img.Levels[i].Scale, img.Levels[i].Translation = st.scale, st.shift
	}
	return img, nil
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

// Apply describes a, level i of img, with the image's axes, voxel size
// and origin: a.Axes names each axis with its type and unit; a.Resolution
// holds the voxel size along the space axes (1 along the others) and
// a.Origin the position of voxel 0 along them (0 along the others), in
// nanometres when every space axis has a length unit, as given when no
// space axis has a unit (a.Unitless), and neither when the units are
// mixed or not lengths or the transforms do not reduce (img.NoScale). An
// array whose axis count differs from the image's is left as it is, and
// false is returned.
func (img *OMEImage) Apply(a *Array, i int) bool {
	if len(a.Shape) != len(img.Axes) || i < 0 || i >= len(img.Levels) {
		return false
	}
	a.OME, a.OMELevel = img, i
	a.Axes = make([]Axis, len(img.Axes))
	for k, ax := range img.Axes {
		a.Axes[k] = Axis(ax)
	}
	l := img.Levels[i]
	if l.Scale == nil {
		return true
	}
	res := make([]float64, len(img.Axes))
	origin := make([]float64, len(img.Axes))
	lengths, unitless := 0, 0
	for k, ax := range img.Axes {
		res[k] = 1
		if ax.Type != "space" {
			continue
		}
		nm, ok := lengthUnits[ax.Unit]
		switch {
		case ok:
			lengths++
		case ax.Unit == "":
			unitless, nm = unitless+1, 1
		}
		res[k], origin[k] = l.Scale[k]*nm, l.Translation[k]*nm
	}
	if lengths+unitless == 0 || lengths > 0 && unitless > 0 {
		return true
	}
	for k := range res { // a unit of parsecs can overflow, one of yoctometres underflow
		if !(res[k] > 0) || math.IsInf(res[k], 0) || math.IsNaN(origin[k]) || math.IsInf(origin[k], 0) {
			return true
		}
	}
	a.Resolution, a.Origin, a.Unitless = res, origin, unitless > 0
	return true
}

// Axis is what the metadata says of one axis of an array (OME-Zarr axes,
// Zarr v3 dimension names).
type Axis struct {
	Name string
	Type string // "space", "time", "channel", other, or "" when unknown
	Unit string
}
