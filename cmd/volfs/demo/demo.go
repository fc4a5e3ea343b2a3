// Package demo holds the sample data behind `volfs demo`: a small Neuroglancer precomputed
// dataset with an image layer and a segmentation layer, generated in memory, and an HTTP
// server that serves it the way a static bucket front-end would.
//
// The voxels are a pure function of the code, the same on every run and platform (integer
// arithmetic only), and every chunk is cut from the arrays that Volume returns, so tests can
// compare what a mount shows against Volume.
package demo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// Layer names: the top-level directories of Objects and the layers' precomputed "type".
const (
	Image        = "image"
	Segmentation = "segmentation"
)

// The x extent is not a multiple of the chunk size, so the last chunks along x are clipped (44
// and 22 voxels wide): that is where precomputed readers most often go wrong.
var (
	scales = [2]struct {
		key        string
		size       [3]int
		resolution int
	}{{"8_8_8", [3]int{300, 256, 96}, 8}, {"16_16_16", [3]int{150, 128, 48}, 16}}
	chunkSize = [3]int{64, 64, 32}
	layers    = [2]struct {
		name, dataType string
		bytes          int
	}{{Image, "uint8", 1}, {Segmentation, "uint32", 4}}
)

// volumes is indexed [layer][scale] in the order of layers and scales.
var volumes = sync.OnceValue(generate)

// Volume returns a copy of one whole scale of a layer in the precomputed raw layout
// (little-endian, x fastest, then y, then z), its size in voxels and the bytes per voxel.
// It returns nil data for an unknown layer or scale.
func Volume(layer string, scale int) (data []byte, size [3]int, dtypeSize int) {
	for i, l := range layers {
		if l.name == layer && scale >= 0 && scale < len(scales) {
			return bytes.Clone(volumes()[i][scale]), scales[scale].size, l.bytes
		}
	}
	return nil, [3]int{}, 0
}

// Objects returns the dataset as object key -> stored bytes: `<layer>/info` as plain JSON and
// every chunk `<layer>/<scale>/<x0>-<x1>_<y0>-<y1>_<z0>-<z1>` (upper bounds clipped to the
// volume) as a gzip stream of its raw bytes. Each call returns a new map with the same bytes.
func Objects() map[string][]byte {
	objects := make(map[string][]byte)
	// BestSpeed keeps `volfs demo` start-up quick; the ratio hardly matters for sample data.
	// The gzip header carries no name and a zero ModTime, so every stream is deterministic.
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level cannot fail
	var raw []byte
	for li, l := range layers {
		objects[l.name+"/info"] = info(l.name, l.dataType)
		for si, sc := range scales {
			forEachChunk(sc.size, func(lo, hi [3]int) {
				raw = extract(raw[:0], volumes()[li][si], sc.size, l.bytes, lo, hi)
				var buf bytes.Buffer
				zw.Reset(&buf)
				zw.Write(raw) //nolint:errcheck // a bytes.Buffer cannot fail
				zw.Close()    //nolint:errcheck // as above
				key := fmt.Sprintf("%s/%s/%d-%d_%d-%d_%d-%d", l.name, sc.key, lo[0], hi[0], lo[1], hi[1], lo[2], hi[2])
				objects[key] = buf.Bytes()
			})
		}
	}
	return objects
}

func info(kind, dataType string) []byte {
	var ss []map[string]any
	for _, sc := range scales {
		r := sc.resolution
		ss = append(ss, map[string]any{"key": sc.key, "size": sc.size, "resolution": [3]int{r, r, r},
			"voxel_offset": [3]int{}, "chunk_sizes": [][3]int{chunkSize}, "encoding": "raw"})
	}
	b, err := json.MarshalIndent(map[string]any{"@type": "neuroglancer_multiscale_volume",
		"data_type": dataType, "num_channels": 1, "type": kind, "scales": ss}, "", "  ")
	if err != nil {
		panic(err) // plain values cannot fail to marshal
	}
	return append(b, '\n')
}

// forEachChunk calls fn with the bounds [lo, hi) of every chunk of a volume, clipped to it.
func forEachChunk(size [3]int, fn func(lo, hi [3]int)) {
	for z := 0; z < size[2]; z += chunkSize[2] {
		for y := 0; y < size[1]; y += chunkSize[1] {
			for x := 0; x < size[0]; x += chunkSize[0] {
				fn([3]int{x, y, z}, [3]int{min(x+chunkSize[0], size[0]), min(y+chunkSize[1], size[1]), min(z+chunkSize[2], size[2])})
			}
		}
	}
}

// extract appends the box [lo, hi) of a volume of the given size to out.
func extract(out, vol []byte, size [3]int, bs int, lo, hi [3]int) []byte {
	row := (hi[0] - lo[0]) * bs
	for z := lo[2]; z < hi[2]; z++ {
		for y := lo[1]; y < hi[1]; y++ {
			off := ((z*size[1]+y)*size[0] + lo[0]) * bs
			out = append(out, vol[off:off+row]...)
		}
	}
	return out
}

// hash is a fixed integer mixer, so that the texture and the seeds depend on no library's
// random number sequence.
func hash(a, b, c int) uint32 {
	h := uint32(a)*0x9E3779B1 ^ uint32(b)*0x85EBCA77 ^ uint32(c)*0xC2B2AE3D
	h = (h ^ h>>15) * 0x2C1B3C6D
	h = (h ^ h>>12) * 0x297A2D39
	return h ^ h>>15
}

// generate builds both layers at scale 0 and derives scale 1: the image as the 2x2x2 mean
// (rounded half up), the segmentation as the label at the even voxel, since a mean of labels
// is meaningless.
func generate() [2][2][]byte {
	s0, s1 := scales[0].size, scales[1].size
	img, seg := image(), segmentation()
	img1, seg1 := make([]byte, s1[0]*s1[1]*s1[2]), make([]byte, 4*s1[0]*s1[1]*s1[2])
	row, plane := s0[0], s0[0]*s0[1]
	i := 0
	for z := range s1[2] {
		for y := range s1[1] {
			for x := range s1[0] {
				j := (2*z*s0[1]+2*y)*s0[0] + 2*x
				sum := 4 + int(img[j]) + int(img[j+1]) + int(img[j+row]) + int(img[j+row+1]) +
					int(img[j+plane]) + int(img[j+plane+1]) + int(img[j+plane+row]) + int(img[j+plane+row+1])
				img1[i] = byte(sum / 8)
				copy(seg1[4*i:4*i+4], seg[4*j:4*j+4])
				i++
			}
		}
	}
	return [2][2][]byte{{img, img1}, {seg, seg1}}
}

// image is a gentle gradient with a fixed texture and a few smooth blobs, one of them in the
// clipped edge chunks and several straddling chunk boundaries.
func image() []byte {
	s := scales[0].size
	vol, ramp := make([]byte, s[0]*s[1]*s[2]), make([]int, s[0])
	for x := range ramp {
		ramp[x] = 24 + 48*x/s[0]
	}
	i := 0
	for z := range s[2] {
		for y := range s[1] {
			for x, r := range ramp {
				vol[i] = byte(r + 16*z/s[2] + int(hash(x, y, z)&15))
				i++
			}
		}
	}
	for _, b := range [...]struct{ x, y, z, r, gain int }{
		{70, 80, 40, 30, 140}, {160, 140, 50, 40, 90}, {280, 60, 30, 25, 160}, {200, 220, 70, 22, 120}, {100, 200, 64, 18, 60},
	} {
		r2 := b.r * b.r
		for z := max(b.z-b.r, 0); z < min(b.z+b.r+1, s[2]); z++ {
			for y := max(b.y-b.r, 0); y < min(b.y+b.r+1, s[1]); y++ {
				for x := max(b.x-b.r, 0); x < min(b.x+b.r+1, s[0]); x++ {
					if d2 := (x-b.x)*(x-b.x) + (y-b.y)*(y-b.y) + (z-b.z)*(z-b.z); d2 < r2 {
						p := &vol[(z*s[1]+y)*s[0]+x]
						*p = byte(min(int(*p)+b.gain*(r2-d2)/r2, 255))
					}
				}
			}
		}
	}
	return vol
}

const numSeeds = 40

// label is the segment id of Voronoi cell i. Ids use all four bytes, so that a reader that
// gets the byte order or the voxel size wrong cannot show the right labels by accident.
func label(i int) uint32 { return uint32(i+1) * 100_000_007 }

func seeds() (p [numSeeds][3]int) {
	for i := range p {
		for d := range 3 {
			p[i][d] = int(hash(i, d, 7) % uint32(scales[0].size[d]))
		}
	}
	return p
}

// maxDist is the distance from its seed beyond which a voxel is background (label 0), so the
// cells are Voronoi cells cut by spheres and background shows inside the volume too.
const maxDist = 40

// segmentation labels each voxel with its nearest seed's cell, ties to the lower seed index,
// or 0 beyond maxDist. Each seed visits only the voxels within maxDist along x of each row it
// reaches, and seeds go in index order, so a strictly nearer later seed alone overwrites.
func segmentation() []byte {
	s, pts := scales[0].size, seeds()
	vol, bestD := make([]byte, 4*s[0]*s[1]*s[2]), make([]int, s[0])
	for z := range s[2] {
		for y := range s[1] {
			row := vol[4*(z*s[1]+y)*s[0]:]
			for x := range bestD {
				bestD[x] = maxDist*maxDist + 1
			}
			for i, p := range pts {
				dyz := (y-p[1])*(y-p[1]) + (z-p[2])*(z-p[2])
				if dyz > maxDist*maxDist {
					continue
				}
				for x := max(p[0]-maxDist, 0); x < min(p[0]+maxDist+1, s[0]); x++ {
					if d := (x-p[0])*(x-p[0]) + dyz; d < bestD[x] {
						bestD[x] = d
						binary.LittleEndian.PutUint32(row[4*x:], label(i))
					}
				}
			}
		}
	}
	return vol
}
