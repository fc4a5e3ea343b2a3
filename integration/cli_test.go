package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/volfs/volfs/internal/mem"

	"github.com/volfs/volfs/cmd/volfs/demo"
	"github.com/volfs/volfs/fs"
)

// volfsBin is the volfs binary built for these tests.
var volfsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "volfs-bin-")
	if err != nil {
		panic(err)
	}
	volfsBin = filepath.Join(dir, "volfs")
	args := []string{"build", "-o", volfsBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "../cmd/volfs")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	// Every volfs process the tests start poisons its pools
	// (testenv.Main: a buffer read after it was given back for reuse
	// reads as bytes no codec makes).
	os.Setenv("VOLFS_MEM_POISON", "1")
	mem.Poison(true) // and the trees the tests mount in this process
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serving is a volfs process serving a mount.
type serving struct {
	cmd    *exec.Cmd
	mnt    string
	stdout *bytes.Buffer // read only after wait
	done   chan error
	stderr logBuffer // every line volfs has logged so far
}

// startVolfs runs `volfs args... MOUNTPOINT` and returns once it reports
// the mount is up. The process is killed, and the mount removed, at the end
// of the test if it is still there.
func startVolfs(t *testing.T, args ...string) *serving {
	t.Helper()
	requireFUSE(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	s, _ := startCmd(t, exec.Command(volfsBin, append(args, mnt)...), mnt)
	return s
}

// wait returns the exit error of the process, failing after a minute.
func (s *serving) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("volfs did not exit within a minute")
		return nil
	}
}

func TestSIGTERMUnmounts(t *testing.T) {
	vol, truth := writeVolume(t)
	s := startVolfs(t, "mount", vol)
	check(t, truth, s.mnt, vol)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("volfs exited with %v after SIGTERM, want 0", err)
	}
	if isMounted(t, s.mnt) {
		t.Errorf("%s still mounted after SIGTERM", s.mnt)
	}
}

func TestExternalUmountStopsServer(t *testing.T) {
	vol, _ := writeVolume(t)
	s := startVolfs(t, "mount", vol)
	run(t, "umount", s.mnt)
	if err := s.wait(t); err != nil {
		t.Errorf("volfs exited with %v after umount, want 0", err)
	}
}

func TestMountpointRefusals(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	mounted := mountSource(t, t.TempDir(), fs.Options{})
	for _, tc := range []struct {
		mountpoint, want string
	}{
		{filepath.Join(dir, "absent"), "does not exist"},
		{file, "not a directory"},
		{mounted, "already mounted"},
	} {
		// The source is an unreachable URL: the mountpoint must be refused
		// before any network work.
		out, err := runErr(volfsBin, "mount", "http://127.0.0.1:1/never", tc.mountpoint)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("mount at %s: got %v %q, want a refusal saying %q", tc.mountpoint, err, out, tc.want)
		}
	}
	// Serving a local source at a mountpoint inside it would deadlock.
	inside := filepath.Join(dir, "sub")
	os.Mkdir(inside, 0o755)
	if out, err := runErr(volfsBin, "mount", dir, inside); err == nil || !strings.Contains(out, "inside the source") {
		t.Errorf("mount inside the source: got %v %q, want a refusal", err, out)
	}
}

// TestDemo runs `volfs demo` and compares chunks read through the mount by
// python with the sample volume.
func TestDemo(t *testing.T) {
	requirePython(t)
	s := startVolfs(t, "demo")
	for _, tc := range []struct {
		layer string
		scale int
		key   string
		dtype string
	}{
		{"image", 0, "8_8_8", "u1"},
		{"image", 1, "16_16_16", "u1"},
		{"segmentation", 0, "8_8_8", "<u4"},
		{"segmentation", 1, "16_16_16", "<u4"},
	} {
		data, size, bs := demo.Volume(tc.layer, tc.scale)
		truth := filepath.Join(t.TempDir(), "truth.raw")
		if err := os.WriteFile(truth, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// Reassemble the whole scale from its chunk files, in python, and
		// compare with the volume.
		script := `
import os, sys, numpy as np
d, truth, dt, sx, sy, sz = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
want = np.fromfile(truth, dt).reshape(sz, sy, sx)
got = np.zeros_like(want)
names = [n for n in os.listdir(d) if "_" in n]  # the chunks, not the views
for n in names:
    (x0, x1), (y0, y1), (z0, z1) = [map(int, r.split("-")) for r in n.split("_")]
    got[z0:z1, y0:y1, x0:x1] = np.fromfile(os.path.join(d, n), dt).reshape(z1-z0, y1-y0, x1-x0)
assert (got == want).all(), "mismatch"
print(len(names), "chunks match")
`
		out := run(t, python, "-c", script, filepath.Join(s.mnt, tc.layer, tc.key), truth, tc.dtype,
			fmt.Sprint(size[0]), fmt.Sprint(size[1]), fmt.Sprint(size[2]))
		t.Logf("%s/%s: %s (%d-byte voxels)", tc.layer, tc.key, strings.TrimSpace(out), bs)
	}
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(t); err != nil {
		t.Errorf("demo exited with %v after SIGINT, want 0", err)
	}
	// Read only after exit: until then the process may still be writing.
	if !strings.Contains(s.stdout.String(), "python3") {
		t.Errorf("demo did not print what to try:\n%s", s.stdout)
	}
}

func TestInfoAndCat(t *testing.T) {
	vol, truth := writeVolume(t)
	out := run(t, volfsBin, "info", vol)
	for _, want := range []string{"s0", "s1", "uint16", "70x45x9", "-13x5x-3", "32x16x4", "27", "raw"} {
		if !strings.Contains(out, want) {
			t.Errorf("info output lacks %q:\n%s", want, out)
		}
	}
	// cat of a chunk equals numpy's bytes for it.
	const name = "-13-19_5-21_-3-1"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := exec.CommandContext(ctx, volfsBin, "cat", vol, "s0/"+name).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, python, "-c", `
import sys, numpy as np
a = np.load(sys.argv[1] + "/s0.npy")
sys.stdout.write(a[:, 0:4, 0:16, 0:32].astype("<u2").tobytes().hex())`, truth)
	if fmt.Sprintf("%x", got) != want {
		t.Errorf("cat %s: %d bytes differ from numpy's", name, len(got))
	}
	if out, err := runErr(volfsBin, "cat", vol, "s0/nope"); err == nil {
		t.Errorf("cat of a missing path succeeded: %s", out)
	}

	// cat of several chunks writes them in the order given, as cat(1) does:
	// numpy's bytes of each, one after another. The first is stored plain,
	// the others gzip.
	names := []string{"51-57_5-21_-3-1", name, "-13-19_21-37_1-5"}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = "s0/" + n
	}
	got, err = exec.CommandContext(ctx, volfsBin, append([]string{"cat", vol}, paths...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	want = run(t, python, "-c", `
import sys, numpy as np
a = np.load(sys.argv[1] + "/s0.npy")
parts = [a[:, 0:4, 0:16, 64:70], a[:, 0:4, 0:16, 0:32], a[:, 4:8, 16:32, 0:32]]
sys.stdout.write(b"".join(p.astype("<u2").tobytes() for p in parts).hex())`, truth)
	if fmt.Sprintf("%x", got) != want {
		t.Errorf("cat %v: %d bytes differ from numpy's", names, len(got))
	}
	// A missing path among good ones fails before anything is written.
	cmd := exec.CommandContext(ctx, volfsBin, "cat", vol, paths[0], "s0/nope", paths[1])
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err == nil || stdout.Len() != 0 {
		t.Errorf("cat with a missing second path: got error %v and %d bytes out, want an error and none", err, stdout.Len())
	}
}

// TestDirectIO mounts with and without --direct-io, checks every chunk
// against numpy's bytes, and asks the kernel (fincore) whether a chunk
// read through the mount sits in the page cache: it must with the default
// (FOPEN_KEEP_CACHE) and must not with --direct-io. A shared mmap of a
// chunk (as numpy.memmap makes) must read the same bytes either way.
func TestDirectIO(t *testing.T) {
	vol, truth := writeVolume(t)
	const chunk = "s0/-13-19_5-21_-3-1"
	for _, dio := range []bool{false, true} {
		t.Run(fmt.Sprint("direct-io=", dio), func(t *testing.T) {
			args := []string{"mount", vol}
			if dio {
				args = []string{"mount", "--direct-io", vol}
			}
			s := startVolfs(t, args...)
			defer run(t, "umount", s.mnt)
			check(t, truth, s.mnt, vol)
			p := filepath.Join(s.mnt, chunk)
			out := run(t, python, "-c", `
import mmap, sys
f = open(sys.argv[1], "rb")
data = f.read()
m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
assert m[:] == data, "a shared mmap reads other bytes than read()"
print(len(data))`, p)
			if strings.TrimSpace(out) != "8192" {
				t.Fatalf("read %s bytes of %s, want 8192", out, chunk)
			}
			// The mmap above faulted pages in; read the file again from a
			// fresh open so residency reflects reads alone.
			run(t, "sh", "-c", "echo 1 > /proc/sys/vm/drop_caches")
			run(t, "cat", p)
			res := strings.Fields(run(t, "fincore", "--noheadings", "--raw", "--output", "PAGES", p))
			if len(res) != 1 {
				t.Fatalf("fincore printed %q", res)
			}
			cached := res[0] != "0"
			if cached == dio {
				t.Errorf("with --direct-io=%v, %s has %s pages in the page cache after a read", dio, chunk, res[0])
			}
		})
	}
}

// loggedVolfs is a volfs process whose log (stderr) is a pipe that the test
// reads line by line and may close.
type loggedVolfs struct {
	cmd   *exec.Cmd
	mnt   string
	log   *os.File    // the read end of the log pipe
	lines chan string // the log, line by line, until log is closed
	done  chan error  // the exit of the process
}

// startLogged runs `volfs args... MOUNTPOINT` with its log on a pipe and
// returns once the log says the mount is up.
func startLogged(t *testing.T, args ...string) *loggedVolfs {
	t.Helper()
	requireFUSE(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	v := &loggedVolfs{cmd: exec.Command(volfsBin, append(args, mnt)...), mnt: mnt, log: r, lines: make(chan string, 1000), done: make(chan error, 1)}
	v.cmd.Stderr = w
	if err := v.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() { v.done <- v.cmd.Wait() }()
	go func() {
		defer close(v.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "volfs:", sc.Text())
			v.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		v.cmd.Process.Kill()
		r.Close()
		forceUnmount(t, mnt)
	})
	v.waitLog(t, "msg=mounted")
	return v
}

// waitLog returns once a line of the log holds want.
func (v *loggedVolfs) waitLog(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-v.lines:
			if !ok {
				t.Fatalf("the log ended without a line saying %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no log line said %q within a minute", want)
		}
	}
}

// stopsCleanly sends sig and checks that volfs exits 0 with its mount gone
// (not left as "transport endpoint is not connected").
func (v *loggedVolfs) stopsCleanly(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := v.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-v.done:
		if err != nil {
			t.Errorf("volfs exited with %v after %v, want exit status 0", err, sig)
		}
	case <-time.After(time.Minute):
		t.Fatalf("volfs did not exit within a minute of %v", sig)
	}
	if isMounted(t, v.mnt) {
		t.Errorf("%s still mounted after %v", v.mnt, sig)
	}
	if _, err := os.ReadDir(v.mnt); err != nil {
		t.Errorf("the mountpoint after %v: %v", sig, err)
	}
}

// TestSignals: SIGHUP (a closed terminal) leaves the mount serving, as
// rclone's; SIGINT and SIGTERM unmount and exit 0 even when the log goes to
// a pipe whose reader has gone, where the "unmounting" line would raise
// SIGPIPE.
func TestSignals(t *testing.T) {
	vol, truth := writeVolume(t)
	t.Run("SIGHUP", func(t *testing.T) {
		v := startLogged(t, "mount", vol)
		if err := v.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		v.waitLog(t, "SIGHUP")
		check(t, truth, v.mnt, vol)
		v.stopsCleanly(t, syscall.SIGTERM)
	})
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String()+" with the log's reader gone", func(t *testing.T) {
			v := startLogged(t, "mount", vol)
			v.log.Close()
			v.stopsCleanly(t, sig)
		})
	}
	t.Run("SIGHUP with the log's reader gone", func(t *testing.T) {
		v := startLogged(t, "mount", vol)
		v.log.Close()
		if err := v.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// No log to wait on: the read below is served only if volfs
		// lives, and SIGTERM then reaches a process that handled SIGHUP.
		check(t, truth, v.mnt, vol)
		v.stopsCleanly(t, syscall.SIGTERM)
	})
}

// TestEmptySource: a source that does not exist or shows nothing (a typo
// in a URL, a bucket prefix or a path) is refused with the reason on the
// terminal and a non-zero exit, in the foreground and under --daemon;
// --allow-empty-source mounts it.
func TestEmptySource(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(empty)))
	t.Cleanup(web.Close)
	gcs := startGCSEmulator(t)
	gcs.Store.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "lab"})
	gcs.Put("lab", "brain/info", []byte(`{}`), "")
	for _, tc := range []struct {
		name, source, want string
	}{
		{"http typo", web.URL + "/brian", "no directory index"},
		{"local empty", empty, "nothing to serve"},
		{"local missing", filepath.Join(dir, "brian"), "no such file"},
		{"gs prefix without objects", "gs://lab/brian", "no object under it"},
	} {
		for _, daemon := range []bool{false, true} {
			name := tc.name
			args := []string{"mount", "--anonymous", "--log-file", filepath.Join(dir, "log")}
			if daemon {
				name += " --daemon"
				args = append(args, "--daemon")
			}
			t.Run(name, func(t *testing.T) {
				mnt := newMountpoint(t, dir, 0, 0)
				out, err := runErr(volfsBin, append(args, tc.source, mnt)...)
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("got %v, want exit status 1\n%s", err, out)
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("the refusal does not say %q:\n%s", tc.want, out)
				}
				if tc.want == "nothing to serve" || tc.want == "no directory index" {
					if !strings.Contains(out, "--allow-empty-source") {
						t.Errorf("the refusal does not name --allow-empty-source:\n%s", out)
					}
				}
				if isMounted(t, mnt) {
					t.Errorf("%s mounted", mnt)
				}
			})
		}
	}
	t.Run("--allow-empty-source", func(t *testing.T) {
		for _, src := range []string{empty, web.URL + "/brian"} {
			s := startVolfs(t, "mount", "--allow-empty-source", src)
			if ents, err := os.ReadDir(s.mnt); err != nil || len(ents) != 0 {
				t.Errorf("the mount of %s lists %v, %v; want nothing", src, ents, err)
			}
			run(t, "umount", s.mnt)
			if err := s.wait(t); err != nil {
				t.Errorf("volfs exited with %v after umount, want 0", err)
			}
		}
	})
}

// TestSizeRefused: a size flag that is not a size is refused with the
// flag's name, before the source is opened (here a path that does not
// exist, which would be refused too), so a typo never turns a feature off.
func TestSizeRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	cacheDir := t.TempDir()
	for _, tc := range [][]string{
		{"--cache-size", "NaN"},
		{"--cache-size", "1,000MiB"},
		{"--read-ahead", "-1MiB"},
		{"--read-ahead", "1e9"},
		{"--min-rate", "Inf"},
		{"--min-rate", "0"},
		{"--cache-dir", cacheDir, "--disk-cache-size", "2 GiBs"},
		{"--cache-dir", cacheDir, "--disk-cache-size", "0"},
	} {
		flag := tc[len(tc)-2]
		out, err := runErr(volfsBin, append(append([]string{"info"}, tc...), missing)...)
		if err == nil || !strings.Contains(out, flag+":") || strings.Contains(out, missing) {
			t.Errorf("volfs info %s: got %v:\n%s\nwant a refusal naming %s and not the source", strings.Join(tc, " "), err, out, flag)
		}
	}
}

// stallingOrigin serves dir over loopback HTTP, but holds every request
// for a chunk (any object below a scale directory) until the test ends or
// the client goes away. Its channel receives the path of each chunk
// request as it starts to hold it.
func stallingOrigin(t *testing.T, dir string) (url string, held <-chan string) {
	t.Helper()
	ch := make(chan string, 64)
	release := make(chan struct{})
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.Trim(r.URL.Path, "/")
		if strings.Contains(p, "/") && !strings.HasSuffix(r.URL.Path, "/") {
			select {
			case ch <- p:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL, ch
}

// TestSIGINTDuringRead: Ctrl-C while a program is reading a chunk that
// the origin holds back. The first SIGINT cannot unmount (the file is
// open): volfs keeps serving and logs one line that names the reader's
// pid and the command for this user. The second SIGINT detaches the
// mount and volfs exits at once, leaving no mount behind and the reader
// with an error rather than data.
func TestSIGINTDuringRead(t *testing.T) {
	vol, _ := writeVolume(t)
	url, held := stallingOrigin(t, vol)
	v := startLogged(t, "mount", "--read-timeout", "0", "--stall-timeout", "5m", url)
	scales, err := os.ReadDir(v.mnt)
	if err != nil {
		t.Fatal(err)
	}
	var chunk string
	for _, e := range scales {
		if e.IsDir() {
			names, err := os.ReadDir(filepath.Join(v.mnt, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			chunk = filepath.Join(v.mnt, e.Name(), names[0].Name())
			break
		}
	}
	if chunk == "" {
		t.Fatalf("no scale directory in %v", scales)
	}
	reader := exec.Command("cat", chunk)
	reader.Stdout = io.Discard
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	readerDone := make(chan error, 1)
	go func() { readerDone <- reader.Wait() }()
	t.Cleanup(func() { reader.Process.Kill() })
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the origin was not asked for a chunk within a minute")
	}

	if err := v.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	var line string
	for line == "" {
		select {
		case l, ok := <-v.lines:
			if !ok {
				t.Fatal("the log ended after the first SIGINT; want volfs serving on")
			}
			if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
				line = l
			}
		case <-timeout:
			t.Fatal("no log line within a minute of the first SIGINT")
		}
	}
	want := []string{v.mnt + " is busy", fmt.Sprintf("%d (cat)", reader.Process.Pid), "Ctrl-C again"}
	if os.Geteuid() == 0 {
		want = append(want, "umount -l "+v.mnt)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("the first SIGINT's log line does not say %q:\n%s", w, line)
		}
	}
	if strings.Contains(line, `\n`) {
		t.Errorf("the first SIGINT's log line holds a literal \\n:\n%s", line)
	}
	if os.Geteuid() == 0 && strings.Contains(line, "fusermount") {
		t.Errorf("the first SIGINT's log line gives fusermount3 advice to root:\n%s", line)
	}
	if !isMounted(t, v.mnt) {
		t.Fatalf("%s not mounted after the first SIGINT found it busy", v.mnt)
	}

	if err := v.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-v.done:
		if err != nil {
			t.Errorf("volfs exited with %v after the second SIGINT, want exit status 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("volfs did not exit within 15 s of the second SIGINT")
	}
	if isMounted(t, v.mnt) {
		t.Errorf("%s still mounted after the second SIGINT", v.mnt)
	}
	select {
	case err := <-readerDone:
		if err == nil {
			t.Error("the reader of the detached mount exited 0, want an error")
		}
	case <-time.After(15 * time.Second):
		t.Error("the reader of the detached mount still waits 15 s after volfs exited")
	}
}

// TestHelpTeaches: --help of volfs and of each command says what a
// SOURCE may be and shows examples; mount's flags come in groups, and
// --follow-symlinks shows one default.
func TestHelpTeaches(t *testing.T) {
	top := run(t, volfsBin, "--help")
	for _, want := range []string{"s3://BUCKET[/PREFIX]", "gs://BUCKET[/PREFIX]", "EXAMPLES:", "volfs mount "} {
		if !strings.Contains(top, want) {
			t.Errorf("volfs --help lacks %q:\n%s", want, top)
		}
	}
	for _, cmd := range []string{"mount", "demo", "info", "cat", "warm", "serve"} {
		help := run(t, volfsBin, cmd, "--help")
		_, examples, _ := strings.Cut(help, "EXAMPLES:")
		if n := len(regexp.MustCompile(`\n\s+volfs `+cmd+`\b`).FindAllString(examples, -1)); n < 2 {
			t.Errorf("volfs %s --help shows %d examples of volfs %s, want 2 or more:\n%s", cmd, n, cmd, help)
		}
		if cmd != "demo" && !strings.Contains(help, "SOURCE is where the volumes are") {
			t.Errorf("volfs %s --help does not say what SOURCE may be:\n%s", cmd, help)
		}
	}
	mount := run(t, volfsBin, "mount", "--help")
	for _, want := range []string{"file:///", "http://", "https://", "gs://", "s3://", "Source and network:", "Caches:", "S3 (s3:// sources):", "FUSE (mount, demo):", "Logging and metrics:"} {
		if !strings.Contains(mount, want) {
			t.Errorf("volfs mount --help lacks %q", want)
		}
	}
	for _, l := range strings.Split(mount, "\n") {
		if strings.Contains(l, "--follow-symlinks") && strings.Count(l, "default") != 1 {
			t.Errorf("--follow-symlinks shows %d defaults, want 1:\n%s", strings.Count(l, "default"), l)
		}
	}
}

// TestMessages: what a newcomer's first mistakes answer, through the
// binary: no internal package named, the supported schemes listed, what a
// SOURCE may be, a refused connection's host and what to check (once),
// a non-zero exit for a directory with no volume; the rewritten .zarray
// keeps "<u2" unescaped, and info labels the order of its SIZE column.
func TestMessages(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	os.WriteFile(file, []byte("hello"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	zarr := filepath.Join(dir, "zarr")
	os.MkdirAll(filepath.Join(zarr, "a"), 0o755)
	os.WriteFile(filepath.Join(zarr, "a", ".zarray"), []byte(`{"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<u2", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`), 0o644)
	// A loopback port that refuses: one that was just listened on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unsupported scheme", []string{"info", "ftp://example.org/brain"}, []string{`unsupported scheme "ftp"`, "file://", "http(s)://", "gs://", "s3://"}},
		{"a file as SOURCE", []string{"info", file}, []string{file + " is a file, not a directory", "a SOURCE is", "s3://"}},
		{"refused connection", []string{"info", "--retries", "0", "http://" + refused + "/brain"}, []string{"cannot connect to " + refused, "connection refused", "check that the server is running"}},
		{"no volume", []string{"info", empty}, []string{"no volume found under"}},
		{"missing path", []string{"cat", zarr, "a/nothere"}, []string{"a/nothere: not found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runErr(volfsBin, tc.args...)
			if err == nil {
				t.Errorf("volfs %s exited 0, want an error:\n%s", strings.Join(tc.args, " "), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("volfs %s does not say %q:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
			if m := regexp.MustCompile(`(^|\s)(fetcher|fs|decode|cache): |object does not exist`).FindString(out); m != "" {
				t.Errorf("volfs %s says %q:\n%s", strings.Join(tc.args, " "), m, out)
			}
			if n := strings.Count(out, "connection refused"); n > 1 {
				t.Errorf("volfs %s says connection refused %d times, want once:\n%s", strings.Join(tc.args, " "), n, out)
			}
		})
	}

	t.Run("zarray unescaped", func(t *testing.T) {
		out := run(t, volfsBin, "cat", zarr, "a/.zarray")
		if !strings.Contains(out, `"<u2"`) || strings.Contains(out, `\u003c`) {
			t.Errorf("the rewritten .zarray: want \"<u2\" unescaped:\n%s", out)
		}
	})
	t.Run("info order", func(t *testing.T) {
		vol, _ := writeVolume(t)
		for src, want := range map[string]string{vol: "x-first", zarr: "x-last"} {
			out := run(t, volfsBin, "info", src)
			if !strings.Contains(out, "ORDER") || !strings.Contains(out, want) {
				t.Errorf("volfs info %s: want an ORDER column saying %s:\n%s", src, want, out)
			}
		}
	})
}

// noIndexServer serves dir over loopback HTTP as a server without
// directory indexes does: a directory is 404.
func noIndexServer(t *testing.T, dir string) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(r.URL.Path))); err != nil || fi.IsDir() {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestConsolidatedGroupOverHTTP: a Zarr v2 group consolidated in
// .zmetadata, served without directory indexes. volfs info lists its
// arrays, nested ones too; the mount's root lists .zgroup and the arrays
// that the consolidated metadata names, and zarr-python opens the group
// from the mount's root and reads every array. A URL with nothing there
// is an error, not an empty table.
func TestConsolidatedGroupOverHTTP(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	run(t, python, "-c", `
import sys, numpy as np, zarr
g = zarr.open_group(sys.argv[1], mode="w")
g.create_dataset("raw", data=np.arange(64, dtype="<u2").reshape(8, 8), chunks=(4, 4))
g.create_group("labels").create_dataset("cells", data=np.arange(16, dtype="u1").reshape(4, 4), chunks=(2, 2))
zarr.consolidate_metadata(sys.argv[1])
`, filepath.Join(dir, "g.zarr"))
	url := noIndexServer(t, dir) + "/g.zarr"

	out, err := runErr(volfsBin, "info", url)
	if err != nil {
		t.Fatalf("volfs info %s: %v\n%s", url, err, out)
	}
	for _, want := range []string{"raw ", "labels/cells ", "8x8", "4x4"} {
		if !strings.Contains(out, want) {
			t.Errorf("volfs info of the group lacks %q:\n%s", want, out)
		}
	}
	if out, err := runErr(volfsBin, "info", url+"/nothing"); err == nil {
		t.Errorf("volfs info of a URL with nothing there exited 0:\n%s", out)
	}

	s := startVolfs(t, "mount", url)
	names := run(t, "ls", "-a", s.mnt)
	for _, want := range []string{".zgroup", ".zmetadata", "raw", "labels"} {
		if !slices.Contains(strings.Fields(names), want) {
			t.Errorf("ls -a of the mount root lacks %s:\n%s", want, names)
		}
	}
	run(t, python, "-c", `
import sys, numpy as np, zarr
g = zarr.open_group(sys.argv[1], mode="r")
assert (g["raw"][:] == np.arange(64, dtype="<u2").reshape(8, 8)).all(), g["raw"][:]
assert (g["labels/cells"][:] == np.arange(16, dtype="u1").reshape(4, 4)).all()
g = zarr.open_consolidated(sys.argv[1], mode="r")
assert sorted(g.array_keys()) == ["raw"], list(g.array_keys())
`, s.mnt)
}
