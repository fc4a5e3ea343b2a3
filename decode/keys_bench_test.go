package decode

import "testing"

// BenchmarkKeyEntry: the name of one entry of a zarr array's grid
// directory, what a listing of 100 million chunks pays per entry.
func BenchmarkKeyEntry(b *testing.B) {
	v, err := ParseZarr2("a", []byte(`{"zarr_format": 2, "shape": [10000, 10000], "chunks": [1, 1], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`))
	if err != nil {
		b.Fatal(err)
	}
	a := v.Arrays[0]
	d := a.KeyRoot()
	n := a.KeyLen(d)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if name, _ := a.KeyEntry(d, int64(i)%n); name == "" {
			b.Fatal("empty name")
		}
	}
}
