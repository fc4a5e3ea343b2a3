package integration

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"github.com/volfs/volfs/fs"
)

// served is a `volfs serve` process.
type served struct {
	cmd   *exec.Cmd
	url   string // http://127.0.0.1:PORT/
	log   *logBuffer
	lines chan string // every log line, until the process's stderr closes
	done  chan error
}

// startServe runs `volfs serve --addr 127.0.0.1:0 args...` and returns once
// its log names the URL it serves. The process is killed at the end of the
// test if it is still running.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(volfsBin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	s := &served{cmd: cmd, log: &logBuffer{}, lines: make(chan string, 10000), done: make(chan error, 1)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	urlRe := regexp.MustCompile(`msg=serving .*url=(\S+)`)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		up := false
		for sc.Scan() {
			fmt.Fprintln(s.log, sc.Text())
			select {
			case s.lines <- sc.Text():
			default:
			}
			if m := urlRe.FindStringSubmatch(sc.Text()); !up && m != nil {
				up = true
				ready <- m[1]
			}
		}
		close(s.lines)
		if !up {
			close(ready)
		}
		s.done <- cmd.Wait()
	}()
	select {
	case u, ok := <-ready:
		if !ok {
			t.Fatalf("volfs serve exited before serving:\n%s", s.log)
		}
		s.url = u
	case <-time.After(time.Minute):
		t.Fatal("volfs serve did not serve within a minute")
	}
	return s
}

// waitLog returns once a log line matches re.
func (s *served) waitLog(t *testing.T, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the log ended without a line matching %q", re)
			}
			if r.MatchString(l) {
				return
			}
		case <-timeout:
			t.Fatalf("no log line matched %q within a minute", re)
		}
	}
}

// curlResult is what curl got: status, headers (lower-case names) and body.
type curlResult struct {
	code   int
	header http.Header
	body   []byte
}

// curl runs curl with args (the URL among them) and returns the reply.
func curl(t *testing.T, args ...string) curlResult {
	t.Helper()
	dir := t.TempDir()
	hdr, body := filepath.Join(dir, "h"), filepath.Join(dir, "b")
	out, err := exec.Command("curl", append([]string{"-sS", "--globoff", "-D", hdr, "-o", body}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	h, _ := os.ReadFile(hdr)
	b, _ := os.ReadFile(body)
	r := curlResult{header: http.Header{}, body: b}
	for i, line := range strings.Split(strings.TrimSpace(string(h)), "\n") {
		line = strings.TrimSpace(line)
		if i == 0 {
			f := strings.Fields(line)
			if len(f) < 2 {
				t.Fatalf("curl %s: status line %q", strings.Join(args, " "), line)
			}
			r.code, _ = strconv.Atoi(f[1])
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			r.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return r
}

// treeFile is a file of a mounted tree: its path below the root, its size.
type treeFile struct {
	path string
	size int64
}

// mountedFiles walks mnt with find(1), in a subprocess, and returns every
// regular file and every directory (with a trailing slash), sorted.
func mountedFiles(t *testing.T, mnt string) (files []treeFile, dirs []string) {
	t.Helper()
	out := run(t, "find", mnt, "-mindepth", "1", "-printf", "%y %s %P\n")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, " ", 3)
		size, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "f":
			files = append(files, treeFile{f[2], size})
		case "d":
			dirs = append(dirs, f[2]+"/")
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	sort.Strings(dirs)
	return files, dirs
}

// serveFixture writes the numpy precomputed layer, mounts it with FUSE in
// this process as the reference, and serves it with `volfs serve args...`.
func serveFixture(t *testing.T, args ...string) (vol, mnt string, s *served) {
	t.Helper()
	requireTool(t, "curl")
	vol, _ = writeVolume(t)
	mnt = mountSource(t, vol, fs.Options{})
	s = startServe(t, append(args, vol)...)
	return vol, mnt, s
}

// TestServeCurl reads the served tree with curl: every file whole, ranges
// of a chunk and of the stitched volume, listings as HTML and JSON, the
// caching headers, and compares all of it with the FUSE mount of the same
// source read by cat and find. (CORS: TestServeCORS.)
func TestServeCurl(t *testing.T) {
	metrics := freeAddr(t)
	_, mnt, s := serveFixture(t, "--metrics-addr", metrics)
	files, dirs := mountedFiles(t, mnt)

	// HEAD gives every size from the metadata, with nothing loaded.
	for _, f := range files {
		r := curl(t, "-I", s.url+f.path)
		if r.code != 200 || r.header.Get("Content-Length") != strconv.FormatInt(f.size, 10) {
			t.Errorf("HEAD %s: %d, Content-Length %q; want 200, %d", f.path, r.code, r.header.Get("Content-Length"), f.size)
		}
	}
	if m := scrape(t, metrics, "volfs_cache_misses_total"); m != 0 {
		t.Errorf("HEAD of %d files loaded %v chunks, want 0", len(files), m)
	}

	for _, f := range files {
		want := []byte(run(t, "cat", filepath.Join(mnt, f.path)))
		r := curl(t, s.url+f.path)
		if r.code != 200 || !bytes.Equal(r.body, want) {
			t.Errorf("GET %s: %d, %d bytes, equal %v; want 200 and the mount's %d bytes", f.path, r.code, len(r.body), bytes.Equal(r.body, want), len(want))
		}
	}

	chunk := "s0/" + corruptChunk // an ordinary .gz chunk here
	for _, name := range []string{chunk, "s0/volume.raw", "s0/volume.tif"} {
		whole := []byte(run(t, "cat", filepath.Join(mnt, name)))
		size := int64(len(whole))
		first := curl(t, s.url+name)
		etag, lastMod := first.header.Get("ETag"), first.header.Get("Last-Modified")
		if etag == "" || lastMod == "" || first.header.Get("Access-Control-Allow-Origin") != "" || first.header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("GET %s: headers %v, want ETag, Last-Modified, Accept-Ranges and no CORS", name, first.header)
		}
		for _, tc := range []struct {
			rng      string
			code     int
			off, end int64 // the bytes of whole expected, for 206
		}{
			{"0-99", 206, 0, 100},
			{"100-", 206, 100, size},
			{"-50", 206, size - 50, size},
			{fmt.Sprintf("%d-%d", size-10, size+1000), 206, size - 10, size},
			{fmt.Sprintf("%d-", size), 416, 0, 0},
			{"0-1,5-6", 200, 0, size}, // several ranges: the whole file
			{"bytes-are-not-a-number", 200, 0, size},
		} {
			r := curl(t, "-H", "Range: bytes="+strings.TrimPrefix(tc.rng, "bytes="), s.url+name)
			if tc.rng == "bytes-are-not-a-number" {
				r = curl(t, "-H", "Range: "+tc.rng, s.url+name)
			}
			if r.code != tc.code {
				t.Errorf("%s Range %s: status %d, want %d", name, tc.rng, r.code, tc.code)
				continue
			}
			switch tc.code {
			case 206:
				wantCR := fmt.Sprintf("bytes %d-%d/%d", tc.off, tc.end-1, size)
				if cr := r.header.Get("Content-Range"); cr != wantCR || !bytes.Equal(r.body, whole[tc.off:tc.end]) {
					t.Errorf("%s Range %s: Content-Range %q, %d bytes (equal %v); want %q", name, tc.rng, cr, len(r.body), bytes.Equal(r.body, whole[tc.off:tc.end]), wantCR)
				}
			case 416:
				if cr := r.header.Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", size) {
					t.Errorf("%s Range %s: Content-Range %q", name, tc.rng, cr)
				}
			case 200:
				if !bytes.Equal(r.body, whole) {
					t.Errorf("%s Range %s: %d bytes, want the whole file", name, tc.rng, len(r.body))
				}
			}
			if got := r.header.Get("ETag"); tc.code != 416 && got != etag {
				t.Errorf("%s Range %s: ETag %q, want the first GET's %q", name, tc.rng, got, etag)
			}
		}
		if r := curl(t, "-H", "If-None-Match: "+etag, s.url+name); r.code != 304 || len(r.body) != 0 {
			t.Errorf("%s If-None-Match its ETag: %d with %d bytes, want 304 and none", name, r.code, len(r.body))
		}
		// A chunk file's Last-Modified (the server's start) does not
		// change with its version: only its ETag answers 304
		// (TestServeDateReloaded).
		if r := curl(t, "-H", "If-Modified-Since: "+lastMod, s.url+name); name == chunk && (r.code != 200 || !bytes.Equal(r.body, whole)) {
			t.Errorf("%s If-Modified-Since its Last-Modified: %d, %d bytes; want 200 and the chunk", name, r.code, len(r.body))
		} else if name != chunk && r.code != 304 {
			t.Errorf("%s If-Modified-Since its Last-Modified: %d, want 304", name, r.code)
		}
		if r := curl(t, "-H", `If-Range: "other"`, "-r", "0-9", s.url+name); r.code != 200 || !bytes.Equal(r.body, whole) {
			t.Errorf("%s If-Range of another ETag: %d, %d bytes; want 200 and the whole file", name, r.code, len(r.body))
		}
	}

	// Listings: every directory, as HTML and as JSON, names what find saw.
	children := map[string][]string{"": nil}
	sizes := map[string]int64{}
	for _, d := range dirs {
		children[d] = nil
		parent := filepath.Dir(strings.TrimSuffix(d, "/")) + "/"
		if parent == "./" {
			parent = ""
		}
		children[parent] = append(children[parent], filepath.Base(d)+"/")
	}
	for _, f := range files {
		parent := filepath.Dir(f.path) + "/"
		if parent == "./" {
			parent = ""
		}
		children[parent] = append(children[parent], filepath.Base(f.path))
		sizes[f.path] = f.size
	}
	hrefRe := regexp.MustCompile(`<a href="([^"]*)">`)
	for dir, want := range children {
		sort.Strings(want)
		r := curl(t, s.url+dir)
		var got []string
		for _, m := range hrefRe.FindAllStringSubmatch(string(r.body), -1) {
			got = append(got, strings.TrimPrefix(m[1], "./"))
		}
		sort.Strings(got)
		if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("listing /%s: %d %q, links %v; want 200 text/html %v", dir, r.code, r.header.Get("Content-Type"), got, want)
		}
		r = curl(t, s.url+dir+"?format=json")
		var entries []struct {
			Name string `json:"name"`
			Type string `json:"type"`
			Size *int64 `json:"size"`
		}
		if err := json.Unmarshal(r.body, &entries); err != nil {
			t.Errorf("JSON listing /%s: %v\n%s", dir, err, r.body)
			continue
		}
		got = got[:0]
		for _, e := range entries {
			name := e.Name
			if e.Type == "directory" {
				name += "/"
			} else if e.Size == nil || *e.Size != sizes[dir+e.Name] {
				t.Errorf("JSON listing /%s: %s has size %v, want %d", dir, e.Name, e.Size, sizes[dir+e.Name])
			}
			got = append(got, name)
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("JSON listing /%s: %v, want %v", dir, got, want)
		}
	}
	// A directory named without its slash is redirected, as
	// http.FileServer does; the query goes along.
	if r := curl(t, s.url+"s0?format=json"); r.code != 301 || r.header.Get("Location") != "s0/?format=json" {
		t.Errorf("GET /s0?format=json: %d Location %q, want 301 to s0/?format=json", r.code, r.header.Get("Location"))
	}

	if n := scrape(t, metrics, `volfs_http_requests_total{code="206",method="GET"}`); n < 12 {
		t.Errorf("volfs_http_requests_total 206 GET = %v, want at least 12", n)
	}
	if n := scrape(t, metrics, "volfs_http_served_bytes_total"); n <= 0 {
		t.Errorf("volfs_http_served_bytes_total = %v, want > 0", n)
	}
}

// TestServeRefusals: paths that climb out of the tree are 404, every
// method that would write is refused, a bind beyond loopback without
// credentials is refused at start, and credentials are checked.
func TestServeRefusals(t *testing.T) {
	vol, _ := writeVolume(t)
	requireTool(t, "curl")
	secret := filepath.Join(filepath.Dir(vol), "secret")
	writeFile(t, secret, []byte("not for clients"))
	if err := os.Symlink(secret, filepath.Join(vol, "leak")); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--webdav", vol)
	// A link out of a local source is not followed for clients (as for
	// --allow-other), unless --follow-symlinks says so.
	if r := curl(t, s.url+"leak"); r.code != 403 || bytes.Contains(r.body, []byte("not for clients")) {
		t.Errorf("GET /leak, a link out of the source: %d, want 403", r.code)
	}
	// A loopback server answers to loopback names only: a page cannot
	// reach it through a name of its own pointed at 127.0.0.1.
	for host, want := range map[string]int{"evil.example": 403, "evil.example:80": 403, "localhost:1": 200, "127.0.0.1": 200, "[::1]:8080": 200} {
		if r := curl(t, "-H", "Host: "+host, s.url+"info"); r.code != want {
			t.Errorf("GET /info with Host %s: %d, want %d", host, r.code, want)
		}
	}
	for _, target := range []string{
		"/../secret", "/s0/../../secret", "/..%2fsecret", "/s0%2f..%2f..%2fsecret", "/%2e%2e/secret",
		"/s0/..%5c..%5csecret", "/./info", "//info", "/s0/%00", "/s0/volume.raw/../../secret",
	} {
		r := curl(t, "--path-as-is", s.url+strings.TrimPrefix(target, "/"))
		if r.code != 404 || bytes.Contains(r.body, []byte("not for clients")) {
			t.Errorf("GET %s: %d, want 404", target, r.code)
		}
	}
	// The absolute form of the request-target: only its path counts.
	for _, target := range []string{"http://localhost/../secret", "http://localhost/%2e%2e/secret"} {
		r := curl(t, "--path-as-is", "--request-target", target, s.url)
		if r.code != 404 {
			t.Errorf("GET %s: %d, want 404", target, r.code)
		}
	}
	if r := curl(t, "--request-target", "http://localhost/info", s.url); r.code != 200 {
		t.Errorf("GET http://localhost/info (absolute form): %d, want 200", r.code)
	}
	if r := curl(t, "--request-target", "http://example.com/info", s.url); r.code != 403 {
		t.Errorf("GET http://example.com/info (absolute form, another host): %d, want 403", r.code)
	}
	for _, m := range []string{"PUT", "DELETE", "MKCOL", "PROPPATCH", "MOVE", "COPY", "LOCK", "UNLOCK", "POST", "PATCH"} {
		r := curl(t, "-X", m, "-H", "Destination: "+s.url+"moved", "--data-binary", "x", s.url+"info")
		if r.code != 405 && r.code != 403 {
			t.Errorf("%s /info: %d, want 405 or 403", m, r.code)
		}
	}
	if r := curl(t, s.url+"info"); r.code != 200 || !bytes.Contains(r.body, []byte(`"raw"`)) {
		t.Errorf("info after the refused writes: %d %s", r.code, r.body)
	}
	if r := curl(t, "-X", "PROPFIND", "-H", "Depth: infinity", s.url); r.code != 403 {
		t.Errorf("PROPFIND Depth: infinity of the root: %d, want 403", r.code)
	}

	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		out, err := exec.Command(volfsBin, "serve", "--addr", addr, vol).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "--auth") {
			t.Errorf("serve --addr %s without credentials: %v\n%s; want exit 1 naming --auth", addr, err, out)
		}
	}
	anon := startServe(t, "--addr", "0.0.0.0:0", "--allow-anonymous", vol)
	anon.stopsOn(t, syscall.SIGTERM)

	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, htpasswd, []byte("# users\nann:"+string(hash)+"\n"))
	md5 := filepath.Join(t.TempDir(), "htpasswd-md5")
	writeFile(t, md5, []byte("bob:$apr1$Q8R5eTtA$0ZkWZ8mO1QvDbVvDnqGmM/\n"))
	if out, err := exec.Command(volfsBin, "serve", "--auth-file", md5, vol).CombinedOutput(); err == nil || !strings.Contains(string(out), "bcrypt") {
		t.Errorf("serve --auth-file with an MD5 entry: %v\n%s; want a refusal naming bcrypt", err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		user string
		pass string
	}{
		{"--auth", []string{"--auth", "ann:s3cret"}, "ann", "s3cret"},
		{"--auth-file", []string{"--auth-file", htpasswd}, "ann", "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServe(t, append(append(tc.args, "--addr", "0.0.0.0:0", "--webdav"), vol)...)
			for _, c := range []struct {
				args []string
				code int
			}{
				{nil, 401},
				{[]string{"-u", tc.user + ":wrong"}, 401},
				{[]string{"-u", "eve:" + tc.pass}, 401},
				{[]string{"-u", tc.user + ":" + tc.pass}, 200},
				{[]string{"-u", tc.user + ":" + tc.pass, "-X", "PROPFIND", "-H", "Depth: 0"}, 207},
				{[]string{"-u", tc.user + ":wrong", "-X", "PROPFIND", "-H", "Depth: 0"}, 401},
			} {
				r := curl(t, append(c.args, s.url+"info")...)
				if r.code != c.code {
					t.Errorf("%v: %d, want %d", c.args, r.code, c.code)
				}
				if c.code == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic") {
					t.Errorf("%v: 401 without a Basic challenge: %v", c.args, r.header)
				}
			}
		})
	}
}

// stopsOn sends sig and checks that the server exits 0.
func (s *served) stopsOn(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("volfs serve after %v: %v, want exit 0\n%s", sig, err, s.log)
		}
	case <-time.After(time.Minute):
		t.Fatalf("volfs serve still running a minute after %v", sig)
	}
}

// scrape returns the value of the series named (with its labels, as
// Prometheus writes them) at http://addr/metrics, read with curl; -1 when
// it is not there.
func scrape(t *testing.T, addr, series string) float64 {
	t.Helper()
	out := run(t, "curl", "-sS", "--globoff", "http://"+addr+"/metrics")
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// TestServeClients mounts and copies the served tree with clients written
// by others and with volfs itself, and compares every chunk and view file
// with the FUSE mount of the same source: davfs2 (mount -t davfs) over
// WebDAV, rclone's webdav remote (lsjson, copy, cat), and a volfs mount of
// the served HTTP tree (a volfs chain, credentials in the URL).
func TestServeClients(t *testing.T) {
	_, mnt, s := serveFixture(t, "--webdav", "--auth", "ann:s3cret")
	files, dirs := mountedFiles(t, mnt)
	authURL := strings.Replace(s.url, "http://", "http://ann:s3cret@", 1)

	t.Run("davfs2", func(t *testing.T) {
		requireTool(t, "mount.davfs")
		if os.Geteuid() != 0 {
			t.Skip("mount -t davfs needs root here")
		}
		dir := sharedDir(t)
		dav := filepath.Join(dir, "dav")
		if err := os.Mkdir(dav, 0o755); err != nil {
			t.Fatal(err)
		}
		secrets, conf := filepath.Join(dir, "secrets"), filepath.Join(dir, "davfs2.conf")
		writeFile(t, secrets, []byte(s.url+" ann s3cret\n"))
		os.Chmod(secrets, 0o600)
		// No locks (the share has none), no questions on a terminal. The
		// buffer davfs2 answers the kernel from is 16 KiB by default, and it
		// refuses with EINVAL a READDIR that asks for more; Linux (6.18 here)
		// asks for as much as getdents64 does, and glibc's readdir asks for
		// 32 KiB: 64 KiB lets ls and find list.
		writeFile(t, conf, []byte("secrets "+secrets+"\nuse_locks 0\nask_auth 0\nbuf_size 64\n"))
		cmd := exec.Command("mount", "-t", "davfs", s.url, dav, "-o", "ro,conf="+conf)
		cmd.Stdin = nil
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mount -t davfs: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", dav).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v\n%s", dav, err, out)
			}
		})
		for _, f := range files {
			if out, err := runErr("cmp", filepath.Join(mnt, f.path), filepath.Join(dav, f.path)); err != nil {
				t.Errorf("cmp through davfs2: %v\n%s", err, out)
			}
		}
		// The whole tree as find sees it through davfs2: every directory and
		// every file with its size, but for the lost+found davfs2 adds.
		davFiles, davDirs := mountedFiles(t, dav)
		davDirs = slices.DeleteFunc(davDirs, func(d string) bool { return d == "lost+found/" })
		if fmt.Sprint(davFiles) != fmt.Sprint(files) || fmt.Sprint(davDirs) != fmt.Sprint(dirs) {
			t.Errorf("find through davfs2:\n%v\n%v\nwant the mount's\n%v\n%v", davFiles, davDirs, files, dirs)
		}
	})

	t.Run("rclone", func(t *testing.T) {
		requireTool(t, "rclone")
		pass := strings.TrimSpace(run(t, "rclone", "obscure", "s3cret"))
		remote := []string{"--config", "/dev/null", "--webdav-url", s.url, "--webdav-user", "ann", "--webdav-pass", pass}
		var listed []struct {
			Path  string
			Size  int64
			IsDir bool
		}
		if err := json.Unmarshal([]byte(run(t, "rclone", append([]string{"lsjson", "-R"}, append(remote, ":webdav:")...)...)), &listed); err != nil {
			t.Fatal(err)
		}
		var gotFiles []treeFile
		var gotDirs []string
		for _, e := range listed {
			if e.IsDir {
				gotDirs = append(gotDirs, e.Path+"/")
			} else {
				gotFiles = append(gotFiles, treeFile{e.Path, e.Size})
			}
		}
		sort.Slice(gotFiles, func(i, j int) bool { return gotFiles[i].path < gotFiles[j].path })
		sort.Strings(gotDirs)
		if fmt.Sprint(gotFiles) != fmt.Sprint(files) || fmt.Sprint(gotDirs) != fmt.Sprint(dirs) {
			t.Errorf("rclone lsjson -R:\n%v\n%v\nwant the mount's\n%v\n%v", gotFiles, gotDirs, files, dirs)
		}
		copied := t.TempDir()
		run(t, "rclone", append([]string{"copy"}, append(remote, ":webdav:", copied)...)...)
		if out, err := runErr("diff", "-r", mnt, copied); err != nil {
			t.Errorf("diff -r of the mount and rclone's copy: %v\n%s", err, out)
		}
		got := run(t, "rclone", append([]string{"cat"}, append(remote, ":webdav:s0/volume.raw")...)...)
		if want := run(t, "cat", filepath.Join(mnt, "s0/volume.raw")); got != want {
			t.Errorf("rclone cat s0/volume.raw: %d bytes differ from the mount's %d", len(got), len(want))
		}
	})

	t.Run("volfs chain", func(t *testing.T) {
		chain := startVolfs(t, "mount", authURL)
		chainFiles, chainDirs := mountedFiles(t, chain.mnt)
		if fmt.Sprint(chainDirs) != fmt.Sprint(dirs) {
			t.Errorf("the chain's directories:\n%v\nwant\n%v", chainDirs, dirs)
		}
		if fmt.Sprint(chainFiles) != fmt.Sprint(files) {
			t.Errorf("the chain's files:\n%v\nwant\n%v", chainFiles, files)
		}
		for _, f := range files {
			if strings.HasSuffix(f.path, ".orig") {
				// The chain's .orig is the metadata it read: the served,
				// rewritten one.
				continue
			}
			if out, err := runErr("cmp", filepath.Join(mnt, f.path), filepath.Join(chain.mnt, f.path)); err != nil {
				t.Errorf("cmp through the chain: %v\n%s", err, out)
			}
		}
	})
}

// TestServeSlowClients: clients that ask for a large file and stop reading
// are cut off after --write-timeout (their requests end, counted as 499),
// hold no more than a reply buffer each meanwhile, and do not keep others
// from being served.
func TestServeSlowClients(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	// A volume.raw of 64 MiB, far more than socket buffers take, of raw
	// chunks, so that filling those buffers costs copies, not decodes.
	const nz = 512
	_, chunks := writeLayer(t, src, nz, nil)
	s := startServe(t, "--write-timeout", "1s", "--cache-size", "16MiB", src)
	const stalled = 8
	// A small receive buffer, set before the connection is made so that
	// the window offered stays small.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	for range stalled {
		conn, err := dialer.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /s0/volume.raw HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range stalled {
		s.waitLog(t, `msg=request method=GET path=/s0/volume.raw .*code=499`)
	}
	want := bytes.Join(chunks, nil)
	if r := curl(t, s.url+"s0/volume.raw"); r.code != 200 || !bytes.Equal(r.body, want) {
		t.Errorf("volume.raw after the stalled clients: %d, %d bytes (equal %v), want 200 and %d", r.code, len(r.body), bytes.Equal(r.body, want), len(want))
	}
	checkRSS(t, peakRSS(t, s.cmd.Process.Pid))
}

// TestServeDaemon: `volfs serve --daemon` returns once the server answers,
// keeps serving through SIGHUP and stops on SIGTERM, as mount does.
func TestServeDaemon(t *testing.T) {
	requireTool(t, "curl")
	vol, _ := writeVolume(t)
	addr := freeAddr(t)
	logFile := filepath.Join(t.TempDir(), "log")
	if out, err := exec.Command(volfsBin, "serve", "--daemon", "--addr", addr, "--log-file", logFile, vol).CombinedOutput(); err != nil {
		t.Fatalf("volfs serve --daemon: %v\n%s", err, out)
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg=serving .* pid=(\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no serving line with a pid in the log:\n%s", data)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if r := curl(t, "http://"+addr+"/info"); r.code != 200 {
		t.Fatalf("GET /info of the background server: %d", r.code)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if r := curl(t, "http://"+addr+"/s0/volume.raw"); r.code != 200 {
		t.Errorf("GET after SIGHUP: %d, want 200", r.code)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 60_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("the background server did not exit within a minute of SIGTERM (%v)", err)
		}
		break
	}
	data, _ = os.ReadFile(logFile)
	hup, stop := bytes.Index(data, []byte("SIGHUP: still serving")), bytes.Index(data, []byte("msg=stopped"))
	if hup < 0 || stop < hup {
		t.Errorf("log: want the SIGHUP line, then stopped:\n%s", data)
	}
}

// TestServeCorruptChunk: a chunk that cannot be decoded is 502 with one log
// line, and a read of volume.raw that reaches it after the status was sent
// cuts the connection: curl fails, and what it got is the true prefix,
// never a whole body with wrong bytes.
func TestServeCorruptChunk(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	const nz, bad = 8, 6 // a volume.raw of 1 MiB; the bad chunk starts past the first 256 KiB block
	all := map[int]bool{}
	for i := range nz {
		all[i] = true
	}
	keys, chunks := writeLayer(t, src, nz, all)
	writeFile(t, filepath.Join(src, keys[bad]+".gz"), []byte("\x1f\x8b\x08\x00 not gzip at all"))
	s := startServe(t, src)
	if r := curl(t, s.url+keys[bad]); r.code != 502 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("ETag") != "" {
		t.Errorf("GET the corrupt chunk: %d, Cache-Control %q, ETag %q; want 502, no-store and no ETag", r.code, r.header.Get("Cache-Control"), r.header.Get("ETag"))
	}
	if r := curl(t, "-I", s.url+keys[bad]); r.code != 200 || r.header.Get("Content-Length") != strconv.Itoa(hostileChunk) {
		t.Errorf("HEAD the corrupt chunk: %d, Content-Length %q; want 200, %d from the metadata", r.code, r.header.Get("Content-Length"), hostileChunk)
	}
	if r := curl(t, s.url+keys[bad-1]); r.code != 200 || !bytes.Equal(r.body, chunks[bad-1]) {
		t.Errorf("GET its neighbour: %d, %d bytes", r.code, len(r.body))
	}
	out := filepath.Join(t.TempDir(), "raw")
	msg, err := exec.Command("curl", "-sS", "-o", out, s.url+"s0/volume.raw").CombinedOutput()
	got, _ := os.ReadFile(out)
	want := bytes.Join(chunks, nil)
	if err == nil || len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
		t.Errorf("GET volume.raw over the corrupt chunk: curl %v (%s), %d of %d bytes, a true prefix: %v; want curl to fail with a true prefix",
			err, strings.TrimSpace(string(msg)), len(got), len(want), bytes.Equal(got, want[:min(len(got), len(want))]))
	}
	t.Logf("curl: %v: %s (%d of %d bytes)", err, strings.TrimSpace(string(msg)), len(got), len(want))
	if !strings.Contains(s.log.String(), keys[bad]) {
		t.Errorf("no log line names %s:\n%s", keys[bad], s.log)
	}
}

// TestServeZarr serves a Zarr v2 group written by zarr-python (a blosc
// array and a zlib one) and reads every file of it with curl and through a
// volfs chain, against the FUSE mount; zarr-python then opens the chain's
// mount and reads the values written.
func TestServeZarr(t *testing.T) {
	requireZarr(t)
	requireTool(t, "curl")
	src := filepath.Join(t.TempDir(), "g.zarr")
	run(t, python, "-c", `
import sys, numpy as np, zarr
from numcodecs import Blosc, Zlib
g = zarr.open_group(sys.argv[1], mode="w")
a = np.arange(20 * 30 * 40, dtype="<u2").reshape(20, 30, 40)
g.create_dataset("blosc", data=a, chunks=(8, 16, 16), compressor=Blosc("zstd", 3, Blosc.SHUFFLE))
g.create_dataset("zlib", data=a.astype("<f4") / 7, chunks=(5, 30, 17), compressor=Zlib(5))
`, src)
	mnt := mountSource(t, src, fs.Options{})
	s := startServe(t, src)
	files, _ := mountedFiles(t, mnt)
	for _, f := range files {
		want := []byte(run(t, "cat", filepath.Join(mnt, f.path)))
		if r := curl(t, s.url+f.path); r.code != 200 || !bytes.Equal(r.body, want) {
			t.Errorf("GET %s: %d, %d bytes, want 200 and the mount's %d", f.path, r.code, len(r.body), len(want))
		}
	}
	chain := startVolfs(t, "mount", s.url)
	// A chain's .orig metadata is what it read: the served, rewritten one.
	if out, err := runErr("diff", "-r", "-x", "*.orig", mnt, chain.mnt); err != nil {
		t.Errorf("diff -r of the mount and the chain: %v\n%s", err, out)
	}
	run(t, python, "-c", `
import sys, numpy as np, zarr
a = np.arange(20 * 30 * 40, dtype="<u2").reshape(20, 30, 40)
b = zarr.open_array(sys.argv[1] + "/blosc", mode="r")
z = zarr.open_array(sys.argv[1] + "/zlib", mode="r")
assert b.compressor is None and z.compressor is None
assert (b[:] == a).all() and (z[:] == a.astype("<f4") / 7).all()
`, chain.mnt)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and the certificate's DER.
func selfSigned(t *testing.T) (cert, key string, der []byte) {
	t.Helper()
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, key, der
}

// TestServeTLS: --cert and --key serve HTTPS (checked by curl against the
// certificate), with credentials beyond loopback; a certificate that does
// not load, or --cert without --key, is refused at start.
func TestServeTLS(t *testing.T) {
	requireTool(t, "curl")
	vol, _ := writeVolume(t)
	cert, key, der := selfSigned(t)

	for _, args := range [][]string{{"--cert", cert}, {"--cert", key, "--key", cert}} {
		if out, err := exec.Command(volfsBin, append(append([]string{"serve"}, args...), vol)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "--cert") {
			t.Errorf("serve %v: %v\n%s; want a refusal naming --cert", args, err, out)
		}
	}
	s := startServe(t, "--cert", cert, "--key", key, "--addr", "0.0.0.0:0", "--auth", "ann:s3cret", vol)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serving %s, want https", s.url)
	}
	port := s.url[strings.LastIndex(s.url, ":")+1:]
	u := "https://127.0.0.1:" + port
	if r := curl(t, "--cacert", cert, "-u", "ann:s3cret", u+"info"); r.code != 200 || !bytes.Contains(r.body, []byte(`"raw"`)) {
		t.Errorf("GET https info: %d %s", r.code, r.body)
	}
	if r := curl(t, "--cacert", cert, u+"info"); r.code != 401 {
		t.Errorf("GET https info without credentials: %d, want 401", r.code)
	}
	// Plain HTTP to the TLS port: net/http's 400 "client sent an HTTP
	// request to an HTTPS server", never the bytes.
	if out, _ := exec.Command("curl", "-sS", "-u", "ann:s3cret", "http://127.0.0.1:"+port+"info").CombinedOutput(); bytes.Contains(out, []byte(`"raw"`)) {
		t.Errorf("plain HTTP to the TLS port answered the file: %s", out)
	}
	// net/http sees the TLS connection: HTTP/2 is offered, and a request
	// over HTTP/1.1 knows it came over TLS (r.TLS, logged as tls=true).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	req, _ := http.NewRequest("GET", u+"info", nil)
	req.SetBasicAuth("ann", "s3cret")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !bytes.Contains(body, []byte(`"raw"`)) {
		t.Errorf("GET info with a client that offers HTTP/2: %d over %s, want 200 over HTTP/2.0", resp.StatusCode, resp.Proto)
	}
	if r := curl(t, "--http1.1", "--cacert", cert, "-u", "ann:s3cret", u+"s0/volume.nhdr"); r.code != 200 {
		t.Errorf("GET s0/volume.nhdr over HTTP/1.1: %d", r.code)
	}
	time.Sleep(100 * time.Millisecond)
	for _, want := range []string{`path=/info .*proto=HTTP/2.0 tls=true code=200`, `path=/s0/volume.nhdr .*proto=HTTP/1.1 tls=true code=200`} {
		if !regexp.MustCompile(want).MatchString(s.log.String()) {
			t.Errorf("no log line matches %q:\n%s", want, s.log)
		}
	}
	// --metrics-addr has the same loopback guard as --addr.
	out, err := exec.Command(volfsBin, "serve", "--metrics-addr", "0.0.0.0:0", vol).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--metrics-public") {
		t.Errorf("serve --metrics-addr 0.0.0.0:0: %v\n%s; want a refusal naming --metrics-public", err, out)
	}
}

// TestServeETagVersion: a chunk file's ETag names its version, from the
// identity of its object and its array's recipe: the same from two serve
// processes over an unchanged source (started more than a second apart),
// another once the chunk's object is rewritten, and the PROPFIND of its
// directory gives GET's.
func TestServeETagVersion(t *testing.T) {
	requireTool(t, "curl")
	dir, chunk := etagArray(t)
	etag := func() string {
		t.Helper()
		s := startServe(t, "--webdav", dir)
		r := curl(t, s.url+"a/0.0")
		if r.code != 200 || r.header.Get("ETag") == "" {
			t.Fatalf("GET a/0.0: %d, ETag %q; want 200 and an ETag", r.code, r.header.Get("ETag"))
		}
		dav := curl(t, "-X", "PROPFIND", "-H", "Depth: 1", s.url+"a/")
		if !strings.Contains(string(dav.body), "<D:getetag>"+xmlEscape(r.header.Get("ETag"))+"</D:getetag>") {
			t.Errorf("PROPFIND a/ does not give GET's ETag %s:\n%s", r.header.Get("ETag"), dav.body)
		}
		return r.header.Get("ETag")
	}
	first := etag()
	time.Sleep(1100 * time.Millisecond)
	if second := etag(); second != first {
		t.Errorf("ETag of an unchanged chunk from another server: %s, want %s", second, first)
	}
	os.WriteFile(chunk, []byte("87654321"), 0o644)
	if third := etag(); third == first {
		t.Errorf("ETag of the rewritten chunk: %s, the same as before", third)
	}
}

// etagArray writes a Zarr array "a" of one raw chunk, 0.0, holding
// "12345678", and returns the source directory and the chunk's path.
func etagArray(t *testing.T) (dir, chunk string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := `{"zarr_format": 2, "shape": [4, 4], "chunks": [2, 2], "dtype": "<u2", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`
	if err := os.WriteFile(filepath.Join(dir, "a", ".zarray"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	chunk = filepath.Join(dir, "a", "0.0")
	if err := os.WriteFile(chunk, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, chunk
}

// xmlEscape is s as XML character data.
func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// TestServeETagKeptCopy: under --metadata-ttl a server may keep serving
// the bytes of a chunk it read before its object was rewritten. Its ETag
// must then not be the tag of the new version, which a server that read
// the new bytes gives: a client revalidating with it would be told 304 and
// keep the old bytes for good.
func TestServeETagKeptCopy(t *testing.T) {
	requireTool(t, "curl")
	dir, chunk := etagArray(t)
	old := startServe(t, "--metadata-ttl", "1s", dir)
	if r := curl(t, old.url+"a/0.0"); r.code != 200 || string(r.body) != "12345678" {
		t.Fatalf("GET a/0.0: %d %q", r.code, r.body)
	}
	os.WriteFile(chunk, []byte("87654321"), 0o644)
	time.Sleep(1500 * time.Millisecond)
	kept := curl(t, old.url+"a/0.0")
	fresh := curl(t, startServe(t, "--metadata-ttl", "1s", dir).url+"a/0.0")
	if string(fresh.body) != "87654321" {
		t.Fatalf("a new server reads %q, want the rewritten bytes", fresh.body)
	}
	t.Logf("the first server serves %q with ETag %s; the new one %q with %s", kept.body, kept.header.Get("ETag"), fresh.body, fresh.header.Get("ETag"))
	if !bytes.Equal(kept.body, fresh.body) && kept.header.Get("ETag") == fresh.header.Get("ETag") {
		t.Errorf("the first server's old bytes %q carry the ETag %s of the new version's %q", kept.body, kept.header.Get("ETag"), fresh.body)
	}
}

// TestServeETagReloaded: a chunk whose bytes left the server's memory and
// whose object was then rewritten (without --metadata-ttl, the server
// still knows the old version) is loaded again at its next GET, as the new
// version. That reply must not carry the old version's ETag: a resumed
// download with If-Range of the old tag would get the new version's tail
// after the old version's head, and a client revalidating would keep the
// old bytes as current. (On 0d63a2d: 206 of the new bytes under the old
// tag.)
func TestServeETagReloaded(t *testing.T) {
	s, first, fresh := reloadedChunks(t)
	etag := first[0].header.Get("ETag")
	r := curl(t, "-H", "If-Range: "+etag, "-r", fmt.Sprintf("%d-", len(fresh[0])-16), s.url+"a/0.0")
	switch {
	case r.code == 206 && bytes.Equal(r.body, first[0].body[len(fresh[0])-16:]):
		t.Logf("the old bytes were still held: 206 of them under the old tag")
	case r.code != 200 || !bytes.Equal(r.body, fresh[0]) || r.header.Get("ETag") == etag:
		t.Errorf("If-Range of the old ETag after the rewrite: %d, %d bytes (first %x), ETag %s (old %s); want 200, the whole new chunk, a new ETag",
			r.code, len(r.body), r.body[:min(1, len(r.body))], r.header.Get("ETag"), etag)
	}
	if r := curl(t, "-H", "If-None-Match: "+etag, s.url+"a/0.0"); r.code != 200 || !bytes.Equal(r.body, fresh[0]) {
		t.Errorf("If-None-Match of the old ETag after the rewrite: %d, %d bytes; want 200 and the new chunk", r.code, len(r.body))
	}
}

// TestServeDateReloaded: a chunk file's Last-Modified (the server's start)
// does not change with its version, so a date must not stand for a
// version: after a chunk was reloaded as a rewritten version, If-Range of
// the old Last-Modified gets the whole new chunk, never its tail after the
// old head, and If-Modified-Since gets the new chunk, never 304. (On
// 0d63a2d: 206 of the new bytes, and 304.)
func TestServeDateReloaded(t *testing.T) {
	s, first, fresh := reloadedChunks(t)
	lm := first[1].header.Get("Last-Modified")
	r := curl(t, "-H", "If-Range: "+lm, "-r", fmt.Sprintf("%d-", len(fresh[1])-16), s.url+"a/1.0")
	switch {
	case r.code == 206 && bytes.Equal(r.body, first[1].body[len(fresh[1])-16:]):
		t.Logf("the old bytes were still held: 206 of them")
	case r.code != 200 || !bytes.Equal(r.body, fresh[1]):
		t.Errorf("If-Range of the old Last-Modified after the rewrite: %d, %d bytes (first %x); want 200 and the whole new chunk", r.code, len(r.body), r.body[:min(1, len(r.body))])
	}
	if r := curl(t, "-H", "If-Modified-Since: "+first[2].header.Get("Last-Modified"), s.url+"a/2.0"); r.code != 200 || !bytes.Equal(r.body, fresh[2]) {
		t.Errorf("If-Modified-Since of the old Last-Modified after the rewrite: %d, %d bytes; want 200 and the new chunk", r.code, len(r.body))
	}
}

// reloadedChunks serves a Zarr array "a" of 24 raw chunks of 1 MiB through
// a 16 MiB cache, reads each once (first: the replies to a/0.0, a/1.0 and
// a/2.0, which then leave memory), and rewrites those three with other
// bytes (fresh).
func reloadedChunks(t *testing.T) (s *served, first []curlResult, fresh [][]byte) {
	t.Helper()
	requireTool(t, "curl")
	const n, size = 24, 1 << 20
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"zarr_format": 2, "shape": [%d, 1024], "chunks": [1024, 1024], "dtype": "|u1", "compressor": null, "fill_value": 0, "order": "C", "filters": null}`, n*1024)
	writeFile(t, filepath.Join(dir, "a", ".zarray"), []byte(meta))
	for i := range n {
		writeFile(t, filepath.Join(dir, "a", fmt.Sprintf("%d.0", i)), bytes.Repeat([]byte{byte(i)}, size))
	}
	s = startServe(t, "--cache-size", "16MiB", "--read-ahead", "0", dir)
	for i := range n {
		r := curl(t, s.url+fmt.Sprintf("a/%d.0", i))
		if r.code != 200 || r.header.Get("ETag") == "" || r.header.Get("Last-Modified") == "" {
			t.Fatalf("GET a/%d.0: %d, ETag %q, Last-Modified %q", i, r.code, r.header.Get("ETag"), r.header.Get("Last-Modified"))
		}
		if i < 3 {
			first = append(first, r)
		}
	}
	for i := range 3 {
		fresh = append(fresh, bytes.Repeat([]byte{0xc8 + byte(i)}, size))
		writeFile(t, filepath.Join(dir, "a", fmt.Sprintf("%d.0", i)), fresh[i])
	}
	return s, first, fresh
}

// TestServeETagParts: a large chunk read in ranged parts (fs/chunkparts.go)
// whose object was rewritten since the server last read it is read as the
// new version, pinned to what the window's Stat found; the reply must
// carry the new version's ETag, not the one the server knew before. (On
// 0d63a2d: the new bytes under the old version's ETag, the window's Stat
// not learnt by the tree.)
func TestServeETagParts(t *testing.T) {
	requireTool(t, "curl")
	o := &partsOrigin{size: 20 << 20}
	srv := chunkOrigin(t, o)
	s := startServe(t, srv.URL+"/z/")
	want := func(v byte) []byte {
		b := patternBytes(0, o.size)
		for i := range b {
			b[i] ^= v
		}
		return b
	}
	first := curl(t, s.url+"0")
	if first.code != 200 || !bytes.Equal(first.body, want(0)) || first.header.Get("ETag") == "" {
		t.Fatalf("GET 0: %d, %d bytes (version 0: %v), ETag %q", first.code, len(first.body), bytes.Equal(first.body, want(0)), first.header.Get("ETag"))
	}
	o.version.Store(1)
	r := curl(t, s.url+"0")
	if r.code != 200 || !bytes.Equal(r.body, want(1)) || r.header.Get("ETag") == first.header.Get("ETag") {
		t.Errorf("GET 0 after the rewrite: %d, %d bytes (version 1: %v), ETag %s (the first %s); want 200, version 1 and another ETag",
			r.code, len(r.body), bytes.Equal(r.body, want(1)), r.header.Get("ETag"), first.header.Get("ETag"))
	}
	if n := o.gets.Load(); n < 4 {
		t.Errorf("%d ranged GETs at the origin: the chunk was not read in parts", n)
	}
}

// TestServeViewReloaded: a stitched view's bytes change when a chunk of it
// that left memory is loaded again as a rewritten version. Its ETag (the
// server's start, path and size) must then change too: If-Range of the
// tag given before gets the whole new view, never the new chunk's bytes
// after a head of the old, and If-None-Match or If-Modified-Since of what
// was given before is not 304. (On 0d63a2d: 206 of the new bytes under the
// old tag, and 304 twice.)
func TestServeViewReloaded(t *testing.T) {
	requireTool(t, "curl")
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 160, nil) // a volume.raw of 20 MiB
	s := startServe(t, "--cache-size", "16MiB", "--read-ahead", "0", src)
	first := curl(t, s.url+"s0/volume.raw")
	etag, lm := first.header.Get("ETag"), first.header.Get("Last-Modified")
	if first.code != 200 || !bytes.Equal(first.body, bytes.Join(chunks, nil)) || etag == "" {
		t.Fatalf("GET s0/volume.raw: %d, %d bytes, ETag %q", first.code, len(first.body), etag)
	}
	fresh := bytes.Repeat([]byte{0xee}, hostileChunk)
	writeFile(t, filepath.Join(src, keys[0]), fresh) // its chunk left memory as the rest went through
	r := curl(t, "-H", "If-Range: "+etag, "-r", "0-15", s.url+"s0/volume.raw")
	switch {
	case r.code == 206 && bytes.Equal(r.body, chunks[0][:16]):
		t.Logf("the old chunk was still held: 206 of it")
	case r.code != 200 || !bytes.HasPrefix(r.body, fresh) || r.header.Get("ETag") == etag:
		t.Errorf("If-Range of the old ETag after a chunk was rewritten: %d, %d bytes (first %x), ETag %s (old %s); want 200, the whole new view, another ETag",
			r.code, len(r.body), r.body[:min(1, len(r.body))], r.header.Get("ETag"), etag)
	}
	if r := curl(t, "-H", "If-None-Match: "+etag, s.url+"s0/volume.raw"); r.code != 200 || !bytes.HasPrefix(r.body, fresh) {
		t.Errorf("If-None-Match of the old ETag after a chunk was rewritten: %d, %d bytes; want 200 and the new view", r.code, len(r.body))
	}
	if r := curl(t, "-H", "If-Modified-Since: "+lm, s.url+"s0/volume.raw"); r.code != 200 || !bytes.HasPrefix(r.body, fresh) {
		t.Errorf("If-Modified-Since of the old Last-Modified after a chunk was rewritten: %d, %d bytes; want 200 and the new view", r.code, len(r.body))
	}
}
