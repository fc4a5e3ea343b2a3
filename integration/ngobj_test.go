package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/volfs/volfs/fs"
)

// TestObjectViews writes a precomputed segmentation with unsharded
// skeletons (an anisotropic transform with translation, a radius and a
// uint8 attribute, edges stored child first, a forest) and objects whose
// counts lie, mounts it, and reads skeletons.swc with an SWC parser of
// its own: the listing names exactly the objects, every parent comes
// before its children, positions and radii are the transformed ones in
// micrometres to 0.01 nm, the edges as sets are those written, the
// attribute survives in comments, the pass-through directory is
// unchanged. Its legacy meshes (two fragments merged) read through
// meshio as the positions and offset triangles written, and assimp counts
// their faces and converts them to STL with the same positions. Each
// lying object (counts past the stored size, fragment names outside the
// mesh directory, a manifest of 10^6 fragments) reads as EIO within
// seconds. A LINE annotation directory shows annotations.csv, read with
// Python's csv module: the header, coordinates, enum labels, rgb, the
// int16 and float32 stored before the uint8 and the relationship ids; a
// record shorter than its type reads as EIO.
func TestObjectViews(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write", src)
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/ngobjcheck.py", "verify", src, mnt)
}

// TestShardedObjectViews writes a segmentation whose skeletons are
// sharded (murmurhash3, preshift, gzip minishard indexes and data, up to four
// shard files, ids up to 2^64-1) and annotation layers whose by_id index
// is sharded, with the project's shard writer built from sharded.md, and
// reads the views through a mount: skeletons.swc lists exactly the ids
// the shards hold (not the README beside them), each SWC parses to what
// was written, an id no shard holds is ENOENT, the lying objects read as
// EIO within seconds; annotations.csv has one row per annotation as
// written, and a short record in a shard reads as EIO. A multi-resolution
// (Draco) mesh directory beside them passes through, its views empty, and
// `volfs info` lists each object directory with its type, whether it is
// sharded and what converts it.
func TestShardedObjectViews(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write-sharded", src)
	info := run(t, volfsBin, "info", src)
	for _, want := range []string{
		`(?m)^segsh/skel +neuroglancer_skeletons +sharded\(preshift=1,hash=murmurhash3_x86_128,minishard_bits=2,shard_bits=2,index=gzip,data=gzip\) +skeletons\.swc$`,
		`(?m)^segsh/mesh +neuroglancer_multilod_draco +sharded\(preshift=0,hash=identity,minishard_bits=1,shard_bits=1,index=raw,data=gzip\) +not converted \(multi-resolution Draco meshes\), passed through$`,
	} {
		if !regexp.MustCompile(want).MatchString(info) {
			t.Errorf("volfs info has no line matching %s:\n%s", want, info)
		}
	}
	mnt := mountSource(t, src, fs.Options{})
	run(t, python, "testdata/ngobjcheck.py", "verify-sharded", src, mnt)
}

// TestHostileObjectsMemory mounts the hostile objects of TestObjectViews
// and TestShardedObjectViews (a skeleton of 2^31 vertices in 8 bytes, one
// of 2^31-1 edges, edges past the vertices, a short one, unsharded and in
// shards; manifests of 10^6 fragments, of "../", absolute and URL
// fragment names, fragments whose counts lie; annotation records shorter
// than their type, unsharded and in a shard) with the volfs binary in a
// process of its own, reads each with cat: EIO within seconds and a log
// line naming it, and the process's peak resident memory (VmHWM) grows by
// at most twice the objects' stored size plus a fixed margin.
func TestHostileObjectsMemory(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write", src)
	run(t, python, "testdata/ngobjcheck.py", "write-sharded", src)
	var paths []string
	for _, v := range []string{"seg", "segsh"} {
		for _, id := range []int{100, 101, 102, 103} {
			paths = append(paths, fmt.Sprintf("%s/skeletons.swc/%d.swc", v, id))
		}
	}
	for id := 200; id <= 206; id++ {
		paths = append(paths, fmt.Sprintf("seg/mesh.obj/%d.obj", id), fmt.Sprintf("seg/mesh.ply/%d.ply", id))
	}
	paths = append(paths, "ann_bad/annotations.csv", "annsh_bad/annotations.csv")
	// What the hostile objects store: the objects, manifests and
	// fragments themselves, and the whole shard files that hold some.
	var stored int64
	for _, glob := range []string{"seg/skel/10?", "seg/mesh/20?:*", "ann_bad/by_id/*", "segsh/skel/*.shard", "annsh_bad/by_id/*"} {
		files, _ := filepath.Glob(filepath.Join(src, glob))
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			stored += fi.Size()
		}
	}
	s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
	// The listings first, so that the baseline holds what a mount that
	// has been looked at holds.
	for _, d := range []string{"seg/skeletons.swc", "segsh/skeletons.swc", "seg/mesh.obj", "seg/mesh.ply", "ann_bad", "annsh_bad"} {
		if _, err := os.ReadDir(filepath.Join(s.mnt, d)); err != nil {
			t.Fatal(err)
		}
	}
	base := peakRSS(t, s.cmd.Process.Pid)
	for _, p := range paths {
		start := time.Now()
		out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, p))
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cat %s: took %v, want under 5 s", p, took)
		}
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("cat %s: got %v, %d bytes %.80q, want EIO", p, err, len(out), out)
		}
		// The line reaches the log through a pipe: allow it a moment.
		for deadline := time.Now().Add(2 * time.Second); !strings.Contains(s.stderr.String(), p); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("log: no line naming %s:\n%s", p, s.stderr.String())
				break
			}
		}
	}
	for _, p := range []string{"seg/skeletons.swc/7.swc", "segsh/skeletons.swc/7.swc"} {
		if out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, p)); err != nil || !strings.HasPrefix(out, "# volfs: SWC") {
			t.Errorf("the mount no longer serves %s: %v, %.80q", p, err, out)
		}
	}
	peak := peakRSS(t, s.cmd.Process.Pid)
	margin := int64(map[bool]int{false: 48, true: 128}[raceEnabled]) << 20
	t.Logf("hostile objects: %.1f MiB stored; VmHWM %.1f MiB after the listings, %.1f MiB after the reads",
		float64(stored)/(1<<20), float64(base)/(1<<20), float64(peak)/(1<<20))
	if peak > base+2*stored+margin {
		t.Errorf("VmHWM grew from %d to %d MiB reading %d MiB of hostile objects, want at most twice that plus %d MiB",
			base>>20, peak>>20, stored>>20, margin>>20)
	}
}

// TestShardedObjectViewsHTTP reads the sharded views of
// TestShardedObjectViews from a loopback HTTP origin (ranged reads, the
// directory listings as HTML index pages): the same checks pass; listing
// skeletons.swc moves the shards' indexes, not their objects; and
// annotations.csv costs each by_id shard a few requests (its index, its
// minishard indexes, one run of objects per minishard), not one per
// annotation.
func TestShardedObjectViewsHTTP(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	run(t, python, "testdata/ngobjcheck.py", "write-sharded", src)
	srv, origin := serveCounted(t, src)

	mnt := mountSource(t, srv.URL+"/", fs.Options{})
	if _, err := os.ReadDir(filepath.Join(mnt, "segsh", "skeletons.swc")); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(src, "segsh", "skel", "*.shard"))
	var stored, served int64
	for _, f := range shards {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		stored += fi.Size()
		n, _ := origin.snapshot("/segsh/skel/" + filepath.Base(f))
		served += n
	}
	t.Logf("listing skeletons.swc: %d of the shards' %d bytes served", served, stored)
	if served == 0 || served > stored/4 {
		t.Errorf("listing skeletons.swc served %d of the shards' %d bytes, want their indexes only", served, stored)
	}
	// A second listing costs the shards nothing: the ids are memoised
	// per shard version.
	requests := func() (n int) {
		for _, f := range shards {
			_, ranges := origin.snapshot("/segsh/skel/" + filepath.Base(f))
			n += len(ranges)
		}
		return n
	}
	before := requests()
	if _, err := os.ReadDir(filepath.Join(mnt, "segsh", "skeletons.swc")); err != nil {
		t.Fatal(err)
	}
	if n := requests() - before; n != 0 {
		t.Errorf("listing skeletons.swc again: %d requests to the shards, want none", n)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "annsh", "annotations.csv")); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(src, "annsh", "by_id", "*.shard"))
	for _, f := range files {
		// Minishard bits 1: the shard index, 2 minishard indexes, 2 runs.
		if _, ranges := origin.snapshot("/annsh/by_id/" + filepath.Base(f)); len(ranges) > 5 {
			t.Errorf("annotations.csv: %d requests for %s, want at most 5", len(ranges), filepath.Base(f))
		}
	}
	run(t, python, "testdata/ngobjcheck.py", "verify-sharded", src, mnt)
}

// TestShardingFalse: a "sharding" of false in a skeleton directory's info
// or an annotation's by_id is neither a sharding specification nor its
// absence (neuroglancer's skeletons.md and annotations.md: if specified,
// it must be a specification), and every reader refuses it alike: `volfs
// info` says the skeleton directory does not convert and why, its view
// lists as EIO, and the annotation directory shows no annotations.csv
// (before, info said the skeletons convert and the annotations were read
// as unsharded).
func TestShardingFalse(t *testing.T) {
	src := t.TempDir()
	put := func(name, data string) {
		t.Helper()
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("seg/info", `{"type": "segmentation", "data_type": "uint64", "num_channels": 1, "skeletons": "skel",
		"scales": [{"key": "s0", "size": [8, 8, 8], "resolution": [8, 8, 40], "voxel_offset": [0, 0, 0],
		"chunk_sizes": [[8, 8, 8]], "encoding": "raw"}]}`)
	put("seg/skel/info", `{"@type": "neuroglancer_skeletons", "sharding": false}`)
	put("seg/skel/1", "\x00\x00\x00\x00\x00\x00\x00\x00")
	put("ann/info", `{"@type": "neuroglancer_annotations_v1",
		"dimensions": {"x": [4e-9, "m"], "y": [4e-9, "m"], "z": [4e-8, "m"]},
		"lower_bound": [0, 0, 0], "upper_bound": [10, 10, 10], "annotation_type": "POINT",
		"properties": [], "relationships": [], "by_id": {"key": "by_id", "sharding": false}, "spatial": []}`)
	put("ann/by_id/1", "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40")

	info := run(t, volfsBin, "info", src)
	want := `(?m)^seg/skel +neuroglancer_skeletons +.*not converted: .*sharding: want an object, got false$`
	if !regexp.MustCompile(want).MatchString(info) {
		t.Errorf("volfs info has no line matching %s:\n%s", want, info)
	}
	mnt := mountSource(t, src, fs.Options{})
	if _, err := os.ReadDir(filepath.Join(mnt, "seg", "skeletons.swc")); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("ls seg/skeletons.swc: %v, want EIO", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "ann", "annotations.csv")); !os.IsNotExist(err) {
		t.Errorf("stat ann/annotations.csv: %v, want ENOENT (the by_id index is refused)", err)
	}
}

// TestSkeletonWrappingCounts mounts a segmentation whose skeleton info
// declares vertex attributes of 2^33-12 bytes a vertex in all and whose
// skeleton of 8 bytes says 2^31 vertices: their size, 2^64 bytes, wrapped
// to 0 and the conversion panicked slicing the positions (on 0d63a2d:
// "panic in a FUSE handler: slice bounds out of range", no object named).
// Now it is a refusal: cat reads EIO, one log line names the object, and
// the mount serves on.
func TestSkeletonWrappingCounts(t *testing.T) {
	src := t.TempDir()
	var attrs []string
	for left := 1<<33 - 12; left > 0; {
		n := min(left/4, 1<<16)
		attrs = append(attrs, fmt.Sprintf(`{"id": "a%d", "data_type": "float32", "num_components": %d}`, len(attrs), n))
		left -= 4 * n
	}
	writeSkeletons(t, src, `{"@type": "neuroglancer_skeletons", "vertex_attributes": [`+strings.Join(attrs, ", ")+`]}`, map[string]string{
		"1": "\x00\x00\x00\x80\x00\x00\x00\x00",
		"2": "\x00\x00\x00\x00\x00\x00\x00\x00",
	})

	s := startVolfs(t, "mount", src)
	p := "seg/skeletons.swc/1.swc"
	out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, p))
	if err == nil || !strings.Contains(out, "Input/output error") {
		t.Errorf("cat %s: got %v, %.80q, want EIO", p, err, out)
	}
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(s.stderr.String(), "/seg/skel/1"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("log: no line naming /seg/skel/1:\n%s", s.stderr.String())
			break
		}
	}
	if out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "seg/skeletons.swc/2.swc")); err != nil || !strings.HasPrefix(out, "# volfs: SWC") {
		t.Errorf("the mount no longer serves seg/skeletons.swc/2.swc: %v, %.80q", err, out)
	}
}

// writeSkeletons writes under src a segmentation "seg" whose skeletons
// are in "seg/skel", with the skeleton info and the objects by name.
func writeSkeletons(t *testing.T, src, info string, objects map[string]string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(src, "seg", "skel"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "seg", "info"), []byte(`{"type": "segmentation", "data_type": "uint64", "num_channels": 1, "skeletons": "skel",
		"scales": [{"key": "s0", "size": [8, 8, 8], "resolution": [8, 8, 40], "voxel_offset": [0, 0, 0],
		"chunk_sizes": [[8, 8, 8]], "encoding": "raw"}]}`))
	writeFile(t, filepath.Join(src, "seg", "skel", "info"), []byte(info))
	for name, b := range objects {
		writeFile(t, filepath.Join(src, "seg", "skel", name), []byte(b))
	}
}

// TestObjectInfoSkeletonRefused: a skeleton info whose vertex attribute
// volfs does not read (float64) or whose transform is not 12 numbers
// makes the view list as EIO; `volfs info` said the directory converts
// to skeletons.swc. It now says it is not converted and why, naming the
// field, as the view's log line does.
func TestObjectInfoSkeletonRefused(t *testing.T) {
	for name, c := range map[string]struct{ info, want string }{
		"float64":   {`{"@type": "neuroglancer_skeletons", "vertex_attributes": [{"id": "radius", "data_type": "float64", "num_components": 1}]}`, `attribute "radius": data_type "float64" not supported`},
		"transform": {`{"@type": "neuroglancer_skeletons", "transform": [1, 0, 0]}`, `transform has 3 numbers, want 12`},
	} {
		t.Run(name, func(t *testing.T) {
			src := t.TempDir()
			writeSkeletons(t, src, c.info, map[string]string{"1": "\x00\x00\x00\x00\x00\x00\x00\x00"})
			info := run(t, volfsBin, "info", src)
			want := `(?m)^seg/skel +neuroglancer_skeletons +unsharded +not converted: seg/skel/info: .*` + regexp.QuoteMeta(c.want) + `$`
			if !regexp.MustCompile(want).MatchString(info) {
				t.Errorf("volfs info has no line matching %s:\n%s", want, info)
			}
			mnt := mountSource(t, src, fs.Options{})
			if _, err := os.ReadDir(filepath.Join(mnt, "seg", "skeletons.swc")); err == nil || !strings.Contains(err.Error(), "input/output error") {
				t.Errorf("ls seg/skeletons.swc: %v, want EIO", err)
			}
		})
	}
}

// TestObjectDirOfWrongType: a segmentation info whose "mesh" is 5, not a
// directory name, still shows its skeletons: the info was read as one
// struct, so the bad member hid skeletons.swc too, and `volfs info`
// listed no object directory, with no word of why. Now skeletons.swc
// lists and converts its object, and `volfs info` names the bad member.
func TestObjectDirOfWrongType(t *testing.T) {
	src := t.TempDir()
	writeSkeletons(t, src, `{"@type": "neuroglancer_skeletons"}`, map[string]string{"1": "\x00\x00\x00\x00\x00\x00\x00\x00"})
	info, err := os.ReadFile(filepath.Join(src, "seg", "info"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "seg", "info"), []byte(strings.Replace(string(info), `"skeletons": "skel",`, `"skeletons": "skel", "mesh": 5,`, 1)))
	out := run(t, volfsBin, "info", src)
	for _, want := range []string{
		`(?m)^seg/skel +neuroglancer_skeletons +unsharded +skeletons\.swc$`,
		`(?m)^seg/info +- +- +not converted: "mesh": want a directory name, got 5$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("volfs info has no line matching %s:\n%s", want, out)
		}
	}
	mnt := mountSource(t, src, fs.Options{})
	if got := run(t, "ls", filepath.Join(mnt, "seg", "skeletons.swc")); got != "1.swc\n" {
		t.Errorf("ls seg/skeletons.swc: %q, want 1.swc", got)
	}
	if got := run(t, "cat", filepath.Join(mnt, "seg", "skeletons.swc", "1.swc")); !strings.HasPrefix(got, "# volfs: SWC") {
		t.Errorf("seg/skeletons.swc/1.swc reads %.80q", got)
	}
}
