package integration

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Passthrough of the disk cache's entries (issue 31 item 1): each through
// a volfs process mounted for real, as root (the kernel passes files
// through only for CAP_SYS_ADMIN), read by cat and python3.

// mountMetrics starts volfs mount args... on a free loopback port of its
// own for --metrics-addr, and returns it with that address.
func mountMetrics(t *testing.T, args ...string) (*serving, string) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	s := startVolfs(t, append([]string{"mount", "--metrics-addr", addr}, args...)...)
	return s, addr
}

// metric returns the value of series in the metrics at addr, failing the
// test when there is none.
func metric(t *testing.T, addr, series string) float64 {
	t.Helper()
	body := scrapeMetrics(t, addr)
	v, ok := metricValue(body, series)
	if !ok {
		t.Fatalf("/metrics lacks %s:\n%s", series, body)
	}
	return v
}

// dataPath is the path of the data file of the plain entry of dkey in the
// cache's own directory own (cache/disk, "Plain entries").
func dataPath(own, dkey string) string {
	return strings.TrimSuffix(entryPath(own, dkey), ".vdc") + ".dat"
}

// waitFor polls cond every 20 ms for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 250 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within 5 s: %s", what)
}

const (
	readsSeries    = "volfs_file_reads_total"
	diskPassSeries = `volfs_passthrough_backing_total{from="disk"}`
)

// holdOpen runs python3 that opens p, reads its first 1000 bytes, says so
// on stdout, waits for a line on stdin, reads the rest and writes the
// whole read's hex. It returns the function that sends the line and
// returns what was read.
func holdOpen(t *testing.T, p string) func() []byte {
	t.Helper()
	cmd := exec.Command(python, "-c", `
import sys
f = open(sys.argv[1], "rb", buffering=0)
a = f.read(1000)
print("open", flush=True)
sys.stdin.readline()
b = f.read()
print((a + b).hex(), flush=True)`, p)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	out := bufio.NewReader(outp)
	if line, err := out.ReadString('\n'); err != nil || line != "open\n" {
		t.Fatalf("python: %q %v", line, err)
	}
	return func() []byte {
		in.Write([]byte("\n"))
		in.Close()
		line, _ := out.ReadString('\n')
		if err := cmd.Wait(); err != nil {
			t.Fatalf("python: %v", err)
		}
		b, err := hex.DecodeString(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("python printed %q", line)
		}
		return b
	}
}

// TestDiskPassthrough: chunks kept in the disk cache by one mount are read
// by the next through FUSE passthrough: exact bytes, and no read request
// reaches volfs. An entry replaced by another mount (its source rewritten)
// while a passthrough handle holds it reads whole from the old version
// through that handle, and as the new version through a new open; an
// entry evicted while a handle holds it reads whole. With
// --no-disk-passthrough or --direct-io, the log says why not and every
// read is served by volfs, exactly; the entries a mount with
// --no-disk-passthrough kept compressed pass through once a mount without
// it has read them.
func TestDiskPassthrough(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("FUSE passthrough needs root")
	}
	t.Run("remount", func(t *testing.T) {
		src := t.TempDir()
		keys, chunks := writeLayer(t, src, 4, map[int]bool{3: true})
		cacheDir := t.TempDir()
		own := filepath.Join(cacheDir, "volfs-0")
		args := []string{"--passthrough-min-size", "0", "--cache-dir", cacheDir, "--cache-size", "16MiB", src}
		s, _ := mountMetrics(t, args...)
		if !strings.Contains(s.stderr.String(), "passthrough: on: the kernel reads chunks kept in the disk cache") {
			t.Errorf("log does not say that disk passthrough is on:\n%s", s.stderr.String())
		}
		readAll(t, s.mnt, keys, chunks)
		stopVolfs(t, s)
		for _, k := range keys {
			if _, err := os.Stat(dataPath(own, diskKeyOf(t, src, k))); err != nil {
				t.Errorf("%s: no data file after the first mount: %v", k, err)
			}
		}

		s, addr := mountMetrics(t, args...)
		readAll(t, s.mnt, keys, chunks)
		if n := metric(t, addr, readsSeries); n != 0 {
			t.Errorf("%s after a cat of every chunk kept on disk: %v, want 0 (passthrough)", readsSeries, n)
		}
		if n := metric(t, addr, diskPassSeries); n != float64(len(keys)) {
			t.Errorf("%s: %v, want %d", diskPassSeries, n, len(keys))
		}

		// Another mount of the source, rewritten, replaces chunk 0's
		// entry while s holds it open.
		read := holdOpen(t, filepath.Join(s.mnt, keys[0]))
		fresh := bytes.Repeat([]byte{0xee}, len(chunks[0]))
		writeFile(t, filepath.Join(src, keys[0]), fresh)
		old, err := os.Stat(dataPath(own, diskKeyOf(t, src, keys[0])))
		if err != nil {
			t.Fatal(err)
		}
		s2, addr2 := mountMetrics(t, args...)
		readAll(t, s2.mnt, keys[:1], [][]byte{fresh})
		waitFor(t, "the new version's data file", func() bool {
			fi, err := os.Stat(dataPath(own, diskKeyOf(t, src, keys[0])))
			return err == nil && !os.SameFile(fi, old)
		})
		if got := read(); !bytes.Equal(got, chunks[0]) {
			t.Errorf("a handle open across the replacement read %d bytes, not the old version whole", len(got))
		}
		before := metric(t, addr2, readsSeries)
		readAll(t, s2.mnt, keys[:1], [][]byte{fresh})
		if n := metric(t, addr2, readsSeries); n != before {
			t.Errorf("a new open of the replaced entry was read through volfs (%v reads, %v before), want passthrough", n, before)
		}
		stopVolfs(t, s2)
		stopVolfs(t, s)
	})

	// The kernel refuses an open with passthrough while a handle of the
	// inode is open without (ETXTBSY): a chunk whose entry is written
	// behind its first read is opened as that read's handle was until it
	// closes.
	t.Run("mixed", func(t *testing.T) {
		src := t.TempDir()
		keys, chunks := writeLayer(t, src, 1, nil)
		cacheDir := t.TempDir()
		own := filepath.Join(cacheDir, "volfs-0")
		s, addr := mountMetrics(t, "--passthrough-min-size", "0", "--cache-dir", cacheDir, src)
		read := holdOpen(t, filepath.Join(s.mnt, keys[0]))
		waitFor(t, "the data file written behind the first read", func() bool {
			_, err := os.Stat(dataPath(own, diskKeyOf(t, src, keys[0])))
			return err == nil
		})
		readAll(t, s.mnt, keys, chunks)
		if got := read(); !bytes.Equal(got, chunks[0]) {
			t.Errorf("the first handle read %d bytes, not the chunk whole", len(got))
		}
		if n := metric(t, addr, diskPassSeries); n != 0 {
			t.Errorf("%s while a handle without passthrough was open: %v, want 0", diskPassSeries, n)
		}
		// Once the first handles are released (asynchronously), an open
		// passes through.
		waitFor(t, "an open with passthrough", func() bool {
			readAll(t, s.mnt, keys, chunks)
			return metric(t, addr, diskPassSeries) > 0
		})
		stopVolfs(t, s)
	})

	t.Run("evicted", func(t *testing.T) {
		src := t.TempDir()
		keys, chunks := writeLayer(t, src, 2, nil)
		cacheDir := t.TempDir()
		own := filepath.Join(cacheDir, "volfs-0")
		// Room for one entry.
		args := []string{"--passthrough-min-size", "0", "--cache-dir", cacheDir, "--disk-cache-size", "200KiB", src}
		s, _ := mountMetrics(t, args...)
		readAll(t, s.mnt, keys[:1], chunks[:1])
		stopVolfs(t, s)
		s, addr := mountMetrics(t, args...)
		read := holdOpen(t, filepath.Join(s.mnt, keys[0]))
		if n := metric(t, addr, diskPassSeries); n != 1 {
			t.Fatalf("%s: %v, want 1", diskPassSeries, n)
		}
		readAll(t, s.mnt, keys[1:], chunks[1:])
		waitFor(t, "chunk 0's eviction", func() bool {
			_, err := os.Stat(dataPath(own, diskKeyOf(t, src, keys[0])))
			return os.IsNotExist(err)
		})
		if got := read(); !bytes.Equal(got, chunks[0]) {
			t.Errorf("a handle open across the eviction read %d bytes, not the chunk whole", len(got))
		}
		stopVolfs(t, s)
	})

	// The size floor: chunks smaller than --passthrough-min-size (1 MiB
	// by default; these are 128 KiB) are served by volfs from the disk
	// cache, exactly, and pass through from a floor at their size.
	t.Run("floor", func(t *testing.T) {
		src := t.TempDir()
		keys, chunks := writeLayer(t, src, 3, nil)
		cacheDir := t.TempDir()
		s, _ := mountMetrics(t, "--cache-dir", cacheDir, src)
		readAll(t, s.mnt, keys, chunks)
		stopVolfs(t, s)
		for _, tc := range []struct {
			floor []string
			pass  bool
		}{
			{nil, false},
			{[]string{"--passthrough-min-size", "128KiB"}, true},
			{[]string{"--passthrough-min-size", "131073"}, false},
		} {
			s, addr := mountMetrics(t, append(tc.floor, "--cache-dir", cacheDir, src)...)
			if log := s.stderr.String(); !strings.Contains(log, "passthrough: on: the kernel reads chunks kept in the disk cache") ||
				tc.floor == nil && !strings.Contains(log, "those of at least 1048576 bytes (--passthrough-min-size") {
				t.Errorf("%v: log does not say that disk passthrough is on for files of at least the floor:\n%s", tc.floor, log)
			}
			readAll(t, s.mnt, keys, chunks)
			passed, reads := metric(t, addr, diskPassSeries), metric(t, addr, readsSeries)
			if tc.pass && (passed != float64(len(keys)) || reads != 0) {
				t.Errorf("%v: %s %v, %s %v; want %d and 0", tc.floor, diskPassSeries, passed, readsSeries, reads, len(keys))
			}
			if !tc.pass && (passed != 0 || reads < float64(len(keys))) {
				t.Errorf("%v: %s %v, %s %v; want 0 and a read per chunk", tc.floor, diskPassSeries, passed, readsSeries, reads)
			}
			stopVolfs(t, s)
		}
	})

	for _, tc := range []struct{ flag, log string }{
		{"--no-disk-passthrough", "passthrough: off: --no-disk-passthrough"},
		{"--direct-io", "passthrough: off: --direct-io"},
	} {
		t.Run(strings.TrimPrefix(tc.flag, "--"), func(t *testing.T) {
			src := t.TempDir()
			keys, chunks := writeLayer(t, src, 3, nil)
			cacheDir := t.TempDir()
			args := []string{tc.flag, "--passthrough-min-size", "0", "--cache-dir", cacheDir, "--cache-size", "16MiB", src}
			for round := range 2 {
				s, addr := mountMetrics(t, args...)
				if !strings.Contains(s.stderr.String(), tc.log) {
					t.Errorf("log does not say %q:\n%s", tc.log, s.stderr.String())
				}
				readAll(t, s.mnt, keys, chunks)
				if n := metric(t, addr, readsSeries); n < float64(len(keys)) {
					t.Errorf("round %d: %s %v, want at least one read per chunk", round, readsSeries, n)
				}
				if n := metric(t, addr, diskPassSeries); n != 0 {
					t.Errorf("round %d: %s %v, want 0", round, diskPassSeries, n)
				}
				stopVolfs(t, s)
			}
			if tc.flag != "--no-disk-passthrough" {
				return
			}
			// The entries kept compressed are rewritten plain behind the
			// first read of a mount that passes them through; the next
			// open passes through.
			s, addr := mountMetrics(t, args[1:]...)
			waitFor(t, "an open with passthrough of an entry kept compressed", func() bool {
				readAll(t, s.mnt, keys, chunks)
				return metric(t, addr, diskPassSeries) > 0
			})
			stopVolfs(t, s)
		})
	}
}
