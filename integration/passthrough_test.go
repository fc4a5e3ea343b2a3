package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeRawZarr writes a Zarr v2 array of uint8 without compressor or
// filters, 4x4 chunks of 64 KiB each, one of them (0.3) stored short: a
// corrupt chunk that must read as EIO, never as a short file. It returns
// the directory and each good chunk's bytes by name.
func writeRawZarr(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "raw.zarr")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(map[string]any{"zarr_format": 2, "shape": []int{1024, 256}, "chunks": []int{256, 256},
		"dtype": "|u1", "compressor": nil, "filters": nil, "fill_value": 0, "order": "C"})
	if err := os.WriteFile(filepath.Join(dir, ".zarray"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	truth := map[string][]byte{}
	for i := range 4 {
		name := fmt.Sprintf("%d.0", i)
		b := make([]byte, 256*256)
		rand.Read(b)
		if i == 3 {
			b = b[:1000]
		} else {
			truth[name] = b
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, truth
}

// pagesCached is the number of pages of the file at p in the page cache.
func pagesCached(t *testing.T, p string) string {
	t.Helper()
	res := strings.Fields(run(t, "fincore", "--noheadings", "--raw", "--output", "PAGES", p))
	if len(res) != 1 {
		t.Fatalf("fincore printed %q", res)
	}
	return res[0]
}

// TestPassthrough mounts a raw local Zarr with FUSE passthrough
// (--passthrough, as root on this kernel), without it (the default) and
// with --direct-io: each logs whether it passes files through, reads every
// chunk exactly, refuses the short chunk with EIO and shows st_blksize
// 128 KiB. With passthrough the kernel reads (and maps) the source file
// itself, so the source's resident pages show through the mount; and a
// chunk whose
// source file is replaced by a rename while a handle is open reads whole
// from the old file through that handle, whole from the new one once the
// kernel has released it (asynchronously, within 2 s).
func TestPassthrough(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("FUSE passthrough needs root")
	}
	for _, tc := range []struct {
		flag, log string
		pass      bool
	}{
		{"--passthrough", "passthrough: on", true},
		{"", "passthrough: off: not asked for (--passthrough)", false},
		{"--direct-io", "passthrough: off: not asked for (--passthrough)", false},
		{"--passthrough --direct-io", "passthrough: off: --direct-io", false},
	} {
		name := strings.ReplaceAll(strings.TrimPrefix(tc.flag, "--"), " --", "+")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			vol, truth := writeRawZarr(t)
			// 64 KiB chunks: below the default --passthrough-min-size.
			args := []string{"mount", "--passthrough-min-size", "0", vol}
			if tc.flag != "" {
				args = append(append([]string{"mount", "--passthrough-min-size", "0"}, strings.Fields(tc.flag)...), vol)
			}
			s := startVolfs(t, args...)
			defer run(t, "umount", s.mnt)
			if !strings.Contains(s.stderr.String(), tc.log) {
				t.Errorf("log does not say %q:\n%s", tc.log, s.stderr.String())
			}
			for name, want := range truth {
				p := filepath.Join(s.mnt, name)
				got, err := exec.Command("cat", p).Output()
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("cat %s: %d bytes, error %v; want the source's %d bytes", name, len(got), err, len(want))
				}
				var st syscall.Stat_t
				if err := syscall.Stat(p, &st); err != nil || st.Blksize != 128<<10 {
					t.Errorf("stat %s: st_blksize %d (%v), want 131072", name, st.Blksize, err)
				}
			}
			if out, err := exec.Command("cat", filepath.Join(s.mnt, "3.0")).CombinedOutput(); err == nil || !strings.Contains(string(out), "Input/output error") {
				t.Errorf("cat of the short chunk: %v, %q; want EIO", err, out)
			}
			// fincore maps the file and asks which pages are resident: a
			// passthrough file maps its backing file, so after the source
			// alone was read its pages show through the mount; the
			// fallback's own page cache holds nothing until read through
			// the mount.
			run(t, "sh", "-c", "echo 1 > /proc/sys/vm/drop_caches")
			run(t, "cat", filepath.Join(vol, "1.0"))
			if cached := pagesCached(t, filepath.Join(s.mnt, "1.0")) != "0"; cached != tc.pass {
				t.Errorf("the source's 1.0 read, the mount's 1.0 not: resident through the mount %v, want %v (passthrough)", cached, tc.pass)
			}
			if !tc.pass {
				return
			}
			// Replace 0.0 by a rename while a reader holds it open halfway.
			fresh := make([]byte, 256*256)
			rand.Read(fresh)
			out := run(t, python, "-c", `
import os, sys
p, src, tmp = sys.argv[1:4]
f = open(p, "rb", buffering=0)
a = f.read(1000)
open(tmp, "wb").write(open(sys.argv[4], "rb").read())
os.rename(tmp, src)
b = f.read()
f.close()
# The kernel sends the release of f after close returns: an open before
# volfs has it still shares f's backing file. Allow it a moment.
import time
want = open(sys.argv[4], "rb").read()
for _ in range(100):
    g = open(p, "rb").read()
    if g == want:
        break
    time.sleep(0.02)
sys.stdout.buffer.write((a + b).hex().encode() + b" " + g.hex().encode())`,
				filepath.Join(s.mnt, "0.0"), filepath.Join(vol, "0.0"), filepath.Join(vol, ".0.0.tmp"), writeTemp(t, fresh))
			parts := strings.Fields(out)
			if len(parts) != 2 {
				t.Fatalf("python printed %d fields", len(parts))
			}
			if parts[0] != fmt.Sprintf("%x", truth["0.0"]) {
				t.Errorf("the handle open across the rename read a mix or the new file, want the old file whole")
			}
			if parts[1] != fmt.Sprintf("%x", fresh) {
				t.Errorf("an open after the rename did not read the new file whole")
			}
		})
	}
}

// writeTemp writes b to a file of its own and returns its path.
func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "bytes")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
