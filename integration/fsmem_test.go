package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Integrity and memory of the tree itself (issue 15, items 2-4; issue 16,
// item 11): inode numbers, symbolic links, what the mount holds in memory
// under scans and stat storms. Each through a real mount read by
// subprocesses, with the volfs process's peak resident memory asserted.

// TestInodeRangesWrap: five scales of 2^62 one-voxel chunks, whose inode
// ranges, reserved with unchecked arithmetic, wrapped past 2^64 so that
// the first chunk of s4 shared its number with the first chunk of s0 (and
// go-fuse served one's bytes for the other). Each reads its own bytes, and
// every chunk file stats with its own number.
func TestInodeRangesWrap(t *testing.T) {
	src := t.TempDir()
	var scales []string
	for i := range 5 {
		scales = append(scales, fmt.Sprintf(`{"key": "s%d", "size": [4611686018427387904, 1, 1], "resolution": [1, 1, 1], "chunk_sizes": [[1, 1, 1]], "encoding": "raw"}`, i))
	}
	writeFile(t, filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1, "scales": [`+strings.Join(scales, ",")+`]}`))
	// The first eight chunks of each scale and its last: whatever the
	// order of lookups, s4's first chunks landed on s0's first numbers.
	keys := []string{"4611686018427387903-4611686018427387904_0-1_0-1"}
	for x := range 8 {
		keys = append(keys, fmt.Sprintf("%d-%d_0-1_0-1", x, x+1))
	}
	want := map[string]byte{}
	for i := range 5 {
		os.Mkdir(filepath.Join(src, fmt.Sprintf("s%d", i)), 0o755)
		for j, k := range keys {
			p := fmt.Sprintf("s%d/%s", i, k)
			want[p] = byte(16*i + j + 1)
			writeFile(t, filepath.Join(src, p), []byte{want[p]})
		}
	}
	s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
	var paths []string
	for p := range want {
		paths = append(paths, filepath.Join(s.mnt, p))
	}
	// One process reads every file, in an order that looks up s0's first
	// so that a colliding s4 file would find its inode live.
	const readAll = `
import os, sys
for p in sorted(sys.argv[1:]):
    with open(p, "rb") as f:
        print(p, os.fstat(f.fileno()).st_ino, f.read().hex())
`
	out, err := runBounded(t, time.Minute, python, append([]string{"-c", readAll}, paths...)...)
	if err != nil {
		t.Fatalf("reading the chunks: %v\n%s", err, out)
	}
	inos := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var p, ino, hex string
		if _, err := fmt.Sscan(line, &p, &ino, &hex); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		rel, _ := filepath.Rel(s.mnt, p)
		if w := fmt.Sprintf("%02x", want[rel]); hex != w {
			t.Errorf("%s: got bytes %s, want %s", rel, hex, w)
		}
		if prev, ok := inos[ino]; ok {
			t.Errorf("%s and %s share inode number %s", prev, rel, ino)
		}
		inos[ino] = rel
	}
	if len(inos) != len(want) {
		t.Errorf("read %d files, want %d:\n%s", len(inos), len(want), out)
	}
	checkAlive(t, s.mnt, "s0/0-1_0-1_0-1", []byte{want["s0/0-1_0-1_0-1"]})
	checkPeak(t, s)
}

// statStorm stats the first n entries of a directory, as ls -l does, and
// prints how many it stat'ed.
const statStorm = `
import itertools, os, sys
n = 0
with os.scandir(sys.argv[1]) as it:
    for e in itertools.islice(it, int(sys.argv[2])):
        e.stat(follow_symlinks=False)
        n += 1
print(n)
`

// stormPeak bounds the peak resident memory of TestStatStorm: measured
// 83 MiB with 8192 files kept (about 150 MiB when every file was kept).
const stormPeak = 112 << 20

// TestStatStorm: stat'ing 150 000 files of a directory of 2^26 chunk files
// (ls -la grew volfs past 1.9 GB, and kept it after ls was killed) keeps
// volfs's memory bounded: the kernel is asked to drop the entries of files
// beyond the most recent, so go-fuse lets their inodes go.
//
// It runs in .ci/run's second pass, without the race detector: under it
// the 150 000 stats took two minutes on an idle machine.
func TestStatStorm(t *testing.T) {
	if raceEnabled {
		t.Skip("memory is measured without the race detector")
	}
	src := t.TempDir()
	writeScale(t, src, "image", "[8192, 8192, 1]", "[1, 1, 1]", map[string][]byte{"0-1_0-1_0-1": {7}})
	s := startVolfs(t, "mount", "--cache-size", "16MiB", src)
	const n = 150000
	start := time.Now()
	out, err := runBounded(t, 2*time.Minute, python, "-c", statStorm, filepath.Join(s.mnt, "s0"), fmt.Sprint(n))
	t.Logf("stat of %d files: %v", n, time.Since(start).Round(time.Millisecond))
	if err != nil || strings.TrimSpace(out) != fmt.Sprint(n) {
		t.Fatalf("stat storm: %v %q, want %d files stat'ed", err, out, n)
	}
	checkAlive(t, s.mnt, "s0/0-1_0-1_0-1", []byte{7})
	checkPeakBelow(t, s, stormPeak)
}

// TestSymlinkedScale: a scale directory that is a symbolic link to
// another disk (here another directory) reads as it does on disk by
// default, exact bytes and the fill for a chunk it lacks; under
// --allow-other links stay inside the source, and both chunks read as
// EACCES, never as zeros, with one log line saying how to allow them;
// --allow-other --follow-symlinks follows them.
func TestSymlinkedScale(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: --allow-other without user_allow_other")
	}
	disk := t.TempDir()
	src := t.TempDir()
	keys, chunks := writeLayer(t, disk, 2, nil)
	os.Remove(filepath.Join(disk, keys[1])) // missing in the linked directory
	writeFile(t, filepath.Join(src, "info"), readFile(t, filepath.Join(disk, "info")))
	if err := os.Symlink(filepath.Join(disk, "s0"), filepath.Join(src, "s0")); err != nil {
		t.Fatal(err)
	}
	zeros := string(make([]byte, hostileChunk))
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string // what keys[0] and keys[1] read as
	}{
		{"default", nil, []string{string(chunks[0]), zeros}},
		{"allow-other", []string{"--allow-other"}, []string{"Permission denied", "Permission denied"}},
		{"allow-other follow-symlinks", []string{"--allow-other", "--follow-symlinks"}, []string{string(chunks[0]), zeros}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startVolfs(t, append(append([]string{"mount", "--cache-size", "16MiB"}, tc.flags...), src)...)
			for i, key := range keys {
				out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, key))
				if tc.want[i] == "Permission denied" {
					if err == nil || !strings.Contains(out, "Permission denied") {
						t.Errorf("cat %s: got %v, %d bytes %.60q, want EACCES", key, err, len(out), out)
					}
				} else if err != nil || out != tc.want[i] {
					t.Errorf("cat %s: got %v, %d bytes, want %d bytes of the source", key, err, len(out), len(tc.want[i]))
				}
			}
			// ls shows the scale in every case.
			if out, err := runBounded(t, time.Minute, "ls", s.mnt); err != nil || !strings.Contains(out, "s0") {
				t.Errorf("ls: got %v %q, want s0 listed", err, out)
			}
			refused := strings.Count(s.stderr.String(), filepath.Join(disk, "s0"))
			if want := map[bool]int{true: 1, false: 0}[tc.want[0] == "Permission denied"]; refused != want {
				t.Errorf("log lines about the link: got %d, want %d:\n%s", refused, want, s.stderr.String())
			} else if want == 1 && !strings.Contains(s.stderr.String(), "--follow-symlinks") {
				t.Errorf("the log line does not say how to allow the link:\n%s", s.stderr.String())
			}
			checkPeak(t, s)
		})
	}
}

// writeScale writes into src a precomputed layer of type typ with one
// uint8 scale, s0, of the given size and chunk size (JSON arrays), and
// the chunks given by key.
func writeScale(t *testing.T, src, typ, size, chunk string, chunks map[string][]byte) {
	t.Helper()
	writeFile(t, filepath.Join(src, "info"), []byte(`{"@type": "neuroglancer_multiscale_volume", "type": "`+typ+`", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": `+size+`, "resolution": [1, 1, 1], "chunk_sizes": [`+chunk+`], "encoding": "raw"}]}`))
	if err := os.Mkdir(filepath.Join(src, "s0"), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, b := range chunks {
		writeFile(t, filepath.Join(src, "s0", k), b)
	}
}

// checkPeakBelow fails unless the peak resident memory of volfs, served
// as s, is at most bound bytes.
func checkPeakBelow(t *testing.T, s *serving, bound int64) {
	t.Helper()
	peak := peakRSS(t, s.cmd.Process.Pid)
	t.Logf("volfs peak resident memory: %.1f MiB", float64(peak)/(1<<20))
	if peak > bound {
		t.Errorf("volfs peak resident memory: got %d MiB, want at most %d MiB", peak>>20, bound>>20)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sparseScanPeak bounds the peak resident memory of TestSparseScan less
// the binary's own pages (peakAnon): measured 78 MiB in all at 40 000 and
// 50 000 files, 95 MiB for both before the fix (a kept miss held 338
// bytes and was charged 128, and every file looked up kept its inode).
// The bound was on the whole peak until 2026-12-05, when the same code
// (a56a594) peaked at 92-101 MiB, of which 34 MiB were pages of the
// volfs binary itself (RssFile), which grows with the program and says
// nothing of the tree: 58-66 MiB without them.
var sparseScanPeak = int64(map[bool]int{false: 72, true: 264}[raceEnabled]) << 20

// TestSparseScan: a scan that reads 50 000 chunk files of a sparse scale
// of 4 million chunks, nearly all missing, with a 16 MiB cache, reads the
// fill for the missing and the bytes of the few present, with volfs's
// memory bounded: each remembered miss is charged what it holds, and the
// inodes of the files read are let go.
func TestSparseScan(t *testing.T) {
	src := t.TempDir()
	present := map[string][]byte{}
	for k, v := range map[string]byte{"0-8_0-8_0-1": 1, "800-808_8-16_0-1": 2, "16376-16384_16-24_0-1": 3} {
		present[k] = bytes.Repeat([]byte{v}, 64)
	}
	writeScale(t, src, "segmentation", "[16384, 16384, 1]", "[8, 8, 1]", present)
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--read-ahead", "0", src)
	const n = 50000
	// Rows of chunks, x fastest; prints what each present chunk held and
	// how many read as zeros.
	const scan = `
import sys
d, n = sys.argv[1], int(sys.argv[2])
zeros = 0
for i in range(n):
    x, y = i % 2048, i // 2048
    name = "%d-%d_%d-%d_0-1" % (8*x, 8*x+8, 8*y, 8*y+8)
    with open(d + "/" + name, "rb") as f:
        b = f.read()
    if b == bytes(64):
        zeros += 1
    else:
        print(name, b.hex())
print("zeros", zeros)
`
	start := time.Now()
	// A bound against a hung scan, not a speed target: 18-25 s without
	// -race here, and once more than 3 minutes under it in CI.
	bound := map[bool]time.Duration{false: 3 * time.Minute, true: 8 * time.Minute}[raceEnabled]
	out, err := runBounded(t, bound, python, "-c", scan, filepath.Join(s.mnt, "s0"), fmt.Sprint(n))
	t.Logf("read %d chunk files: %v", n, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("scan: %v\n%s", err, out)
	}
	want := fmt.Sprintf("0-8_0-8_0-1 %x\n800-808_8-16_0-1 %x\n16376-16384_16-24_0-1 %x\nzeros %d",
		bytes.Repeat([]byte{1}, 64), bytes.Repeat([]byte{2}, 64), bytes.Repeat([]byte{3}, 64), n-3)
	if got := strings.TrimSpace(out); got != want {
		t.Errorf("scan: got\n%s\nwant\n%s", got, want)
	}
	peak, file := peakRSS(t, s.cmd.Process.Pid), rssFile(t, s.cmd.Process.Pid)
	t.Logf("volfs peak resident memory: %.1f MiB, of which the binary's own pages %.1f MiB", float64(peak)/(1<<20), float64(file)/(1<<20))
	if peak-file > sparseScanPeak {
		t.Errorf("volfs peak resident memory less its binary's pages: got %d MiB, want at most %d MiB", (peak-file)>>20, sparseScanPeak>>20)
	}
}

// rssFile returns the resident file-backed memory of process pid now
// (RssFile: the pages of its binary it has touched, which only grow while
// it runs, so that a peak less it is at most the anonymous memory at the
// peak).
func rssFile(t *testing.T, pid int) int64 { return procStatus(t, pid, "RssFile") }
