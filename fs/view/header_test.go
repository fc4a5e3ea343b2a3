package view

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// noChunks fails every read of chunks: headers never need one.
type noChunks struct{}

func (noChunks) Get(context.Context, [][]int64) ([]Chunk, error) {
	return nil, errors.New("headers read a chunk")
}
func (noChunks) Fill() []byte { return []byte{0} }

// readText reads all of f, or the first n bytes when n > 0.
func readText(t *testing.T, f File, n int64) string {
	t.Helper()
	if n <= 0 || n > f.Size() {
		n = f.Size()
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(context.Background(), p, 0); err != nil {
		t.Fatalf("%s: %v", f.Name(), err)
	}
	return string(p)
}

// TestHeadersSpacingOrigin checks that the voxel size and origin of a Grid
// reach the NRRD and MetaImage headers of volume.raw and of each slab
// (the slab's origin moved by its first z) and the ImageJ description of
// volume.tif, in nm, or with no unit when the Grid is Unitless.
func TestHeadersSpacingOrigin(t *testing.T) {
	for _, c := range []struct {
		name                string
		g                   Grid
		want, wantSlab, not []string
	}{
		{name: "nm", g: Grid{Resolution: []float64{4, 4, 40}, Origin: []float64{400, -8, 1200}},
			want: []string{"space directions: (4,0,0) (0,4,0) (0,0,40)", `space units: "nm" "nm" "nm"`, "space origin: (400,-8,1200)",
				"ElementSpacing = 4 4 40", "Offset = 400 -8 1200",
				"unit=um", "spacing=0.04", "xorigin=-100", "yorigin=2", "zorigin=-30"},
			wantSlab: []string{"space origin: (400,-8,1520)", "Offset = 400 -8 1520"}},
		{name: "unitless", g: Grid{Resolution: []float64{2, 3, 5}, Origin: []float64{1, 0, 10}, Unitless: true},
			want:     []string{"space directions: (2,0,0) (0,3,0) (0,0,5)", "space origin: (1,0,10)", "Offset = 1 0 10", "spacing=5", "xorigin=-0.5", "zorigin=-2"},
			not:      []string{"space units", "unit=um", "yorigin"},
			wantSlab: []string{"space origin: (1,0,50)"}},
		{name: "none", g: Grid{},
			want:     []string{"space directions: (1,0,0) (0,1,0) (0,0,1)", "space origin: (0,0,0)", "Offset = 0 0 0"},
			not:      []string{"space units", "unit=", "spacing=", "origin="},
			wantSlab: []string{"space origin: (0,0,8)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := c.g
			g.Shape, g.Chunk, g.Type = []int64{10, 10, 20}, []int64{5, 5, 8}, Uint8
			v, err := New(g, noChunks{})
			if err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			for _, name := range []string{VolumeNRRD, VolumeMHD, VolumeTIFF} {
				f, ok := v.Lookup(name)
				if !ok {
					t.Fatalf("no %s", name)
				}
				all.WriteString(readText(t, f, 1024))
			}
			for _, w := range c.want {
				if !strings.Contains(all.String(), w) {
					t.Errorf("headers lack %q:\n%s", w, all.String())
				}
			}
			for _, w := range c.not {
				if strings.Contains(all.String(), w) {
					t.Errorf("headers have %q:\n%s", w, all.String())
				}
			}
			var slab strings.Builder
			for _, name := range []string{"z08-15.nhdr", "z08-15.mhd"} {
				f, ok := v.Slabs.Lookup(name)
				if !ok {
					t.Fatalf("no slab %s", name)
				}
				slab.WriteString(readText(t, f, 0))
			}
			for _, w := range c.wantSlab {
				if !strings.Contains(slab.String(), w) {
					t.Errorf("slab headers lack %q:\n%s", w, slab.String())
				}
			}
		})
	}
}

// TestRational: a TIFF resolution keeps its value to a millionth for the
// pixels per unit a unitless OME-Zarr scale gives (its inverse: a scale
// of 3000 is 1/3000 per unit), and is never 0, which readers cannot
// invert into a pixel size.
func TestRational(t *testing.T) {
	for _, v := range []float64{1e7 / 4, 1e7 / 3, 1, 1.0 / 3, 1.0 / 7, 1.0 / 3000, 1.0 / 30000, 1.0 / 3e6} {
		r := rational(v)
		got := float64(r[0]) / float64(r[1])
		if r[0] == 0 || r[1] == 0 || got/v-1 > 1e-6 || 1-got/v > 1e-6 {
			t.Errorf("rational(%g) = %d/%d = %g", v, r[0], r[1], got)
		}
	}
}
