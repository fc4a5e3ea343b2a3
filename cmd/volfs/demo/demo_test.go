package demo

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// testObjects computes Objects once for all tests, which only read it: a call takes a few
// hundred milliseconds under -race.
var testObjects = sync.OnceValue(Objects)

func TestObjectsDeterministic(t *testing.T) {
	objects, again := testObjects(), Objects()
	if got, want := len(again), len(objects); got != want {
		t.Fatalf("len(Objects()) = %d on the second call, want %d", got, want)
	}
	for k, v := range objects {
		if !bytes.Equal(again[k], v) {
			t.Errorf("Objects()[%q] differs between calls", k)
		}
	}
	// The volumes are cached, so also regenerate them from scratch.
	if a, b := generate(), generate(); !equalVolumes(a, b) {
		t.Errorf("generate() differs between calls")
	}
}

func equalVolumes(a, b [2][2][]byte) bool {
	for l := range a {
		for s := range a[l] {
			if !bytes.Equal(a[l][s], b[l][s]) {
				return false
			}
		}
	}
	return true
}

func TestInfo(t *testing.T) {
	for _, layer := range []string{Image, Segmentation} {
		var info struct {
			Type        string `json:"@type"`
			DataType    string `json:"data_type"`
			NumChannels int    `json:"num_channels"`
			Kind        string `json:"type"`
			Scales      []struct {
				Key         string
				Size        [3]int
				Resolution  [3]int
				VoxelOffset [3]int   `json:"voxel_offset"`
				ChunkSizes  [][3]int `json:"chunk_sizes"`
				Encoding    string
			}
		}
		if err := json.Unmarshal(testObjects()[layer+"/info"], &info); err != nil {
			t.Fatalf("%s/info: %v", layer, err)
		}
		got := fmt.Sprintf("%s %s %d %s %+v", info.Type, info.DataType, info.NumChannels, info.Kind, info.Scales)
		dtype := map[string]string{Image: "uint8", Segmentation: "uint32"}[layer]
		want := "neuroglancer_multiscale_volume " + dtype + " 1 " + layer +
			" [{Key:8_8_8 Size:[300 256 96] Resolution:[8 8 8] VoxelOffset:[0 0 0] ChunkSizes:[[64 64 32]] Encoding:raw}" +
			" {Key:16_16_16 Size:[150 128 48] Resolution:[16 16 16] VoxelOffset:[0 0 0] ChunkSizes:[[64 64 32]] Encoding:raw}]"
		if got != want {
			t.Errorf("%s/info:\ngot  %v\nwant %v", layer, got, want)
		}
	}
}

// TestChunksTileVolume checks that every chunk gunzips to its clipped extent and equals Volume
// at its place, voxel by voxel, and that together the chunks cover each volume exactly once.
func TestChunksTileVolume(t *testing.T) {
	objects := testObjects()
	tests := []struct {
		layer, key string
		scale      int
		size       [3]int
		bs, chunks int
	}{
		{Image, "8_8_8", 0, [3]int{300, 256, 96}, 1, 5 * 4 * 3},
		{Image, "16_16_16", 1, [3]int{150, 128, 48}, 1, 3 * 2 * 2},
		{Segmentation, "8_8_8", 0, [3]int{300, 256, 96}, 4, 5 * 4 * 3},
		{Segmentation, "16_16_16", 1, [3]int{150, 128, 48}, 4, 3 * 2 * 2},
	}
	chunk := [3]int{64, 64, 32}
	seen := map[string]bool{Image + "/info": true, Segmentation + "/info": true}
	for _, tt := range tests {
		vol, size, bs := Volume(tt.layer, tt.scale)
		if size != tt.size || bs != tt.bs || len(vol) != size[0]*size[1]*size[2]*bs {
			t.Fatalf("Volume(%s, %d) = %d bytes, %v, %d; want %v, %d", tt.layer, tt.scale, len(vol), size, bs, tt.size, tt.bs)
		}
		cover := make([]byte, size[0]*size[1]*size[2])
		chunks := 0
		for key, stored := range objects {
			name, ok := strings.CutPrefix(key, tt.layer+"/"+tt.key+"/")
			if !ok {
				continue
			}
			seen[key] = true
			chunks++
			var lo, hi [3]int
			if _, err := fmt.Sscanf(name, "%d-%d_%d-%d_%d-%d", &lo[0], &hi[0], &lo[1], &hi[1], &lo[2], &hi[2]); err != nil {
				t.Fatalf("chunk key %q: %v", key, err)
			}
			for d := range 3 {
				if lo[d]%chunk[d] != 0 || hi[d] != min(lo[d]+chunk[d], size[d]) {
					t.Fatalf("chunk key %q: axis %d bounds [%d, %d) off the grid", key, d, lo[d], hi[d])
				}
			}
			raw, err := gunzip(stored)
			if err != nil {
				t.Fatalf("gunzip %q: %v", key, err)
			}
			if got, want := len(raw), (hi[0]-lo[0])*(hi[1]-lo[1])*(hi[2]-lo[2])*bs; got != want {
				t.Fatalf("len(gunzip(%q)) = %d, want %d", key, got, want)
			}
			k := 0 // raw layout: x fastest, so k follows the loop order
			for z := lo[2]; z < hi[2]; z++ {
				for y := lo[1]; y < hi[1]; y++ {
					for x := lo[0]; x < hi[0]; x++ {
						i := (z*size[1]+y)*size[0] + x
						if got, want := raw[k:k+bs], vol[i*bs:i*bs+bs]; !bytes.Equal(got, want) {
							t.Fatalf("chunk %q at (%d,%d,%d) = %v, want %v", key, x, y, z, got, want)
						}
						cover[i]++
						k += bs
					}
				}
			}
		}
		if chunks != tt.chunks {
			t.Errorf("%s/%s: %d chunks, want %d", tt.layer, tt.key, chunks, tt.chunks)
		}
		for i, n := range cover {
			if n != 1 {
				t.Fatalf("%s/%s: voxel %d covered by %d chunks, want 1", tt.layer, tt.key, i, n)
			}
		}
	}
	for k := range objects {
		if !seen[k] {
			t.Errorf("unexpected object %q", k)
		}
	}
}

func TestDownsample(t *testing.T) {
	img0, s0, _ := Volume(Image, 0)
	img1, s1, _ := Volume(Image, 1)
	seg0, _, _ := Volume(Segmentation, 0)
	seg1, _, _ := Volume(Segmentation, 1)
	if got, want := s1, [3]int{s0[0] / 2, s0[1] / 2, s0[2] / 2}; got != want {
		t.Fatalf("scale 1 size = %v, want %v", got, want)
	}
	at := func(s [3]int, x, y, z int) int { return (z*s[1]+y)*s[0] + x }
	for z := range s1[2] {
		for y := range s1[1] {
			for x := range s1[0] {
				sum := 0
				for o := range 8 {
					sum += int(img0[at(s0, 2*x+o&1, 2*y+o>>1&1, 2*z+o>>2)])
				}
				if got, want := img1[at(s1, x, y, z)], byte((sum+4)/8); got != want {
					t.Fatalf("image scale 1 at (%d,%d,%d) = %d, want %d", x, y, z, got, want)
				}
				i, j := 4*at(s1, x, y, z), 4*at(s0, 2*x, 2*y, 2*z)
				if got, want := seg1[i:i+4], seg0[j:j+4]; !bytes.Equal(got, want) {
					t.Fatalf("segmentation scale 1 at (%d,%d,%d) = %v, want %v", x, y, z, got, want)
				}
			}
		}
	}
}

// TestSegmentation compares sampled voxels with a brute-force nearest-seed scan over all seeds,
// which the per-row search in segmentation must reproduce exactly, and checks that the data is
// worth looking at.
func TestSegmentation(t *testing.T) {
	seg, s, _ := Volume(Segmentation, 0)
	pts := seeds()
	labels := map[uint32]bool{}
	for i := 0; i < len(seg)/4; i += 97 {
		x, y, z := i%s[0], i/s[0]%s[1], i/s[0]/s[1]
		best, bestD := 0, -1
		for k, p := range pts {
			if d := (x-p[0])*(x-p[0]) + (y-p[1])*(y-p[1]) + (z-p[2])*(z-p[2]); bestD < 0 || d < bestD {
				best, bestD = k, d
			}
		}
		want := uint32(0)
		if bestD <= maxDist*maxDist {
			want = label(best)
		}
		got := binary.LittleEndian.Uint32(seg[4*i:])
		if got != want {
			t.Fatalf("label at (%d,%d,%d) = %d, want %d", x, y, z, got, want)
		}
		labels[got] = true
	}
	if got, want := len(labels), 20; got < want {
		t.Errorf("distinct labels sampled = %d, want at least %d", got, want)
	}
	if !labels[0] {
		t.Errorf("no background label 0 sampled")
	}
}

func TestVolumeUnknown(t *testing.T) {
	tests := []struct {
		layer string
		scale int
	}{{"mesh", 0}, {Image, 2}, {Segmentation, -1}}
	for _, tt := range tests {
		if data, size, bs := Volume(tt.layer, tt.scale); data != nil || size != [3]int{} || bs != 0 {
			t.Errorf("Volume(%q, %d) = %d bytes, %v, %d; want nil, zero, 0", tt.layer, tt.scale, len(data), size, bs)
		}
	}
}

func BenchmarkObjects(b *testing.B) {
	volumes() // exclude the one-time generation
	b.ReportAllocs()
	for b.Loop() {
		Objects()
	}
}

func BenchmarkGenerate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		generate()
	}
}
