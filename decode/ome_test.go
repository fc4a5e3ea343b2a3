package decode

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestOMETransforms reduces the coordinate transformations of NGFF 0.4,
// 0.5 and 0.6 images to a voxel size and origin per level (the level's
// then the image's, composed), and leaves the image without one, but
// with its axes, when they do not reduce.
func TestOMETransforms(t *testing.T) {
	zyx := `[{"name": "z", "type": "space", "unit": "micrometer"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}]`
	near := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
				return false
			}
		}
		return true
	}
	for _, c := range []struct {
		name, file, meta string
		level            int
		res, origin      []float64 // nm, or unitless; nil: no voxel size
		unitless         bool
		noScale          string // part of OMEImage.NoScale, "" for none
	}{
		{name: "0.4 level and image", file: ".zattrs", meta: `{"multiscales": [{"version": "0.4", "axes": ` + zyx + `,
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5, 0.5]}, {"type": "translation", "translation": [10, 20, 30]}]},
			             {"path": "1", "coordinateTransformations": [{"type": "scale", "scale": [2, 1, 1]}, {"type": "translation", "translation": [10.5, 20.25, 30.25]}]}],
			"coordinateTransformations": [{"type": "scale", "scale": [4, 1, 1]}, {"type": "translation", "translation": [-1, 0, 0]}]}]}`,
			level: 1, res: []float64{8000, 1000, 1000}, origin: []float64{41000, 20250, 30250}},
		{name: "0.5 in zarr.json", file: "zarr.json", meta: `{"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"version": "0.5", "multiscales": [{
			"axes": [{"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "nanometer"}, {"name": "x", "type": "space", "unit": "nanometer"}],
			"datasets": [{"path": "s0", "coordinateTransformations": [{"type": "scale", "scale": [1, 4, 4]}, {"type": "translation", "translation": [0, 100, -8]}]}]}]}}}`,
			res: []float64{1, 4, 4}, origin: []float64{0, 100, -8}},
		{name: "no units", file: ".zattrs", meta: `{"multiscales": [{"version": "0.4", "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [3, 2]}, {"type": "translation", "translation": [1, 1]}]}]}]}`,
			res: []float64{3, 2}, origin: []float64{1, 1}, unitless: true},
		{name: "0.6 sequence", file: "zarr.json", meta: `{"attributes": {"ome": {"version": "0.6", "multiscales": [{
			"coordinateSystems": [{"name": "physical", "axes": ` + zyx + `}, {"name": "world", "axes": ` + zyx + `}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "sequence", "input": "0", "output": "physical",
				"transformations": [{"type": "scale", "scale": [2, 0.5, 0.5]}, {"type": "translation", "translation": [1, 2, 3]}]}]}],
			"coordinateTransformations": [{"type": "rotation", "rotation": [[0, 1, 0], [1, 0, 0], [0, 0, 1]], "input": "physical", "output": "world"}]}]}}}`,
			res: []float64{2000, 500, 500}, origin: []float64{1000, 2000, 3000}},
		{name: "0.6 diagonal affine", file: "zarr.json", meta: `{"attributes": {"ome": {"version": "0.6", "multiscales": [{
			"coordinateSystems": [{"name": "physical", "axes": ` + zyx + `}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "affine", "input": "0", "output": "physical",
				"affine": [[2, 0, 0, 5], [0, 3, 0, 6], [0, 0, 4, 7]]}]}]}]}}}`,
			res: []float64{2000, 3000, 4000}, origin: []float64{5000, 6000, 7000}},
		{name: "affine with rotation", file: "zarr.json", meta: `{"attributes": {"ome": {"version": "0.6", "multiscales": [{
			"coordinateSystems": [{"name": "physical", "axes": ` + zyx + `}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "affine", "input": "0", "output": "physical",
				"affine": [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]]}]}]}]}}}`,
			noScale: "rotation"},
		{name: "0.4 affine", file: ".zattrs", meta: `{"multiscales": [{"axes": ` + zyx + `, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1, 1]}]}],
			"coordinateTransformations": [{"type": "affine", "affine": [[1, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]}]}]}`,
			noScale: "multiscales[0].coordinateTransformations"},
		{name: "flip", file: ".zattrs", meta: `{"multiscales": [{"axes": ` + zyx + `, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, -1, 1]}]}]}]}`,
			noScale: "positive"},
		{name: "scale in an array", file: ".zattrs", meta: `{"multiscales": [{"axes": ` + zyx + `, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "path": "s.bin"}]}]}]}`,
			noScale: "s.bin"},
		{name: "wrong length", file: ".zattrs", meta: `{"multiscales": [{"axes": ` + zyx + `, "datasets": [{"path": "0", "coordinateTransformations": [{"type": "translation", "translation": [1, 2]}]}]}]}`,
			noScale: "datasets[0].coordinateTransformations"},
		{name: "mixed units", file: ".zattrs", meta: `{"multiscales": [{"axes": [{"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space"}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}]}]}`},
		{name: "overflow", file: ".zattrs", meta: `{"multiscales": [{"axes": [{"name": "y", "type": "space", "unit": "parsec"}, {"name": "x", "type": "space", "unit": "parsec"}],
			"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1e300, 1]}]}]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, err := ParseOME("img", c.file, []byte(c.meta))
			if err != nil || img == nil {
				t.Fatalf("ParseOME: %+v, %v", img, err)
			}
			a := &Array{Shape: make([]int64, len(img.Axes))}
			if !img.Apply(a, c.level) || len(a.Axes) != len(img.Axes) {
				t.Fatalf("Apply: axes %v", a.Axes)
			}
			if c.noScale != "" {
				if img.NoScale == nil || !strings.Contains(img.NoScale.Error(), c.noScale) || a.Resolution != nil || a.Origin != nil {
					t.Errorf("NoScale %v (want one naming %q), resolution %v, origin %v", img.NoScale, c.noScale, a.Resolution, a.Origin)
				}
				if strings.Contains(c.name, "rotation") && !errors.Is(img.NoScale, ErrUnsupported) {
					t.Errorf("NoScale %v is not ErrUnsupported", img.NoScale)
				}
				return
			}
			if img.NoScale != nil || !near(a.Resolution, c.res) || !near(a.Origin, c.origin) || a.Unitless != c.unitless {
				t.Errorf("NoScale %v, resolution %v, origin %v, unitless %v; want %v, %v, %v", img.NoScale, a.Resolution, a.Origin, a.Unitless, c.res, c.origin, c.unitless)
			}
		})
	}
}

// FuzzParseOME: any group metadata is no image, an image, or a
// *MetadataError; an image's levels applied to an array of its axis count
// give a voxel size that is positive and finite and an origin that is
// finite, or none.
func FuzzParseOME(f *testing.F) {
	f.Add(".zattrs", []byte(`{"multiscales": [{"version": "0.4", "axes": [{"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
		"datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [2, 3]}, {"type": "translation", "translation": [1, -1]}]}],
		"coordinateTransformations": [{"type": "affine", "affine": [[1, 0, 0], [0, 1, 5]]}]}]}`))
	f.Add("zarr.json", []byte(`{"attributes": {"ome": {"version": "0.6", "multiscales": [{"coordinateSystems": [{"name": "p", "axes": [{"name": "x", "type": "space", "unit": "parsec"}]}],
		"datasets": [{"path": "0", "coordinateTransformations": [{"type": "sequence", "output": {"name": "p"}, "transformations": [{"type": "scale", "scale": [1e300]}, {"type": "sequence", "transformations": []}]}]}]}]}}}`))
	f.Fuzz(func(t *testing.T, name string, meta []byte) {
		img, err := ParseOME("g", name, meta)
		if err != nil {
			var me *MetadataError
			if !errors.As(err, &me) || img != nil {
				t.Fatalf("error %T %v with image %v", err, err, img)
			}
			return
		}
		if img == nil {
			return
		}
		for i := range img.Levels {
			a := &Array{Shape: make([]int64, len(img.Axes))}
			if !img.Apply(a, i) {
				t.Fatalf("level %d not applied", i)
			}
			for k := range a.Resolution {
				r, o := a.Resolution[k], a.Origin[k]
				if !(r > 0) || math.IsInf(r, 0) || math.IsNaN(o) || math.IsInf(o, 0) {
					t.Fatalf("level %d: resolution %v, origin %v", i, a.Resolution, a.Origin)
				}
			}
		}
	})
}
