package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/internal/testenv"
)

// weedVersion is the SeaweedFS release the tests run; .ci/run builds it
// into weedCache once, from the module proxy.
const (
	weedVersion = "v0.0.0-20261109003541-7506e5f91cd6"
	weedCache   = "/var/cache/volfs-ci"
)

// Keys of the SeaweedFS identity that may do everything.
const (
	weedAdminKey    = "volfsadmin"
	weedAdminSecret = "volfsadminsecret"
)

// weedBinary returns SeaweedFS's weed: $VOLFS_WEED, or the build .ci/run
// caches. Without it the test skips (fails with VOLFS_REQUIRE_FUSE).
func weedBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("VOLFS_WEED")
	if p == "" {
		p = filepath.Join(weedCache, "weed-"+weedVersion)
	}
	if _, err := exec.LookPath(p); err != nil {
		testenv.Unavailable(t, "SeaweedFS's weed is not at %s (bash .ci/run builds it; or set VOLFS_WEED): %v", p, err)
	}
	return p
}

// requireBoto3 skips (or fails with VOLFS_REQUIRE_FUSE) without Debian's
// python3-boto3.
func requireBoto3(t *testing.T) {
	t.Helper()
	if out, err := runErr(python, "-c", "import boto3"); err != nil {
		testenv.Unavailable(t, "python3-boto3 unavailable: %v\n%s", err, out)
	}
}

// weedServer is a SeaweedFS server (master, volume, filer and S3 gateway
// in one process) on loopback.
type weedServer struct {
	bin, dir string
	args     []string
	Endpoint string // the S3 gateway, http://127.0.0.1:PORT
	cmd      *exec.Cmd
	done     chan struct{}
	log      *os.File
	// startedIn is how long the last start took to answer.
	startedIn time.Duration
}

// freePorts returns n TCP ports that were free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// startWeed starts SeaweedFS with an S3 identity configuration in which
// the anonymous user may read and list the buckets in public, and the
// admin keys may do anything. It returns once the gateway accepts a
// write. The server is stopped when the test ends.
func startWeed(t *testing.T, public ...string) *weedServer {
	t.Helper()
	bin := weedBinary(t)
	requireBoto3(t)
	dir := t.TempDir()
	data := weedConfig(t, dir, public)
	p := freePorts(t, 8)
	w := &weedServer{bin: bin, dir: dir, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[0])}
	w.args = []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.telemetry=false", "-master.volumeSizeLimitMB=256", "-volume.max=16",
		fmt.Sprintf("-master.port=%d", p[1]), fmt.Sprintf("-master.port.grpc=%d", p[2]),
		fmt.Sprintf("-volume.port=%d", p[3]), fmt.Sprintf("-volume.port.grpc=%d", p[4]),
		"-filer", fmt.Sprintf("-filer.port=%d", p[5]), fmt.Sprintf("-filer.port.grpc=%d", p[6]),
		"-s3", fmt.Sprintf("-s3.port=%d", p[0]), fmt.Sprintf("-s3.port.grpc=%d", p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + filepath.Join(dir, "s3.json"),
		"-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	var err error
	if w.log, err = os.Create(filepath.Join(dir, "weed.log")); err != nil {
		t.Fatal(err)
	}
	w.start(t)
	t.Cleanup(func() {
		w.stop(t)
		w.log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("weed's log ends:\n%s", out)
		}
	})
	return w
}

// weedConfig writes dir/s3.json, the S3 identities of startWeed, and
// makes dir/data; it returns the latter.
func weedConfig(t *testing.T, dir string, public []string) string {
	t.Helper()
	var anon []string
	for _, b := range public {
		anon = append(anon, "Read:"+b, "List:"+b)
	}
	conf := map[string]any{"identities": []map[string]any{
		{"name": "anonymous", "actions": anon},
		{"name": "admin", "credentials": []map[string]string{{"accessKey": weedAdminKey, "secretKey": weedAdminSecret}},
			"actions": []string{"Admin", "Read", "List", "Tagging", "Write"}},
	}}
	b, _ := json.Marshal(conf)
	writeFile(t, filepath.Join(dir, "s3.json"), b)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return data
}

// start runs the server and waits until its gateway answers.
func (w *weedServer) start(t *testing.T) {
	t.Helper()
	begin := time.Now()
	defer func() { w.startedIn = time.Since(begin) }()
	w.cmd = exec.Command(w.bin, w.args...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.done = make(chan struct{})
	go func() {
		w.cmd.Wait()
		close(w.done)
	}()
	// The gateway answers once it listens; writes need a volume server
	// registered with the master, which the uploads' retries wait for.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", w.Endpoint+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-w.done:
			t.Fatalf("weed exited before its S3 gateway answered (log in %s)", w.dir)
		case <-ctx.Done():
			t.Fatalf("weed's S3 gateway did not answer within 2 minutes: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop kills the server (SIGKILL, as a crash) and waits for it to exit.
func (w *weedServer) stop(t *testing.T) {
	t.Helper()
	if w.cmd == nil {
		return
	}
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.done
	w.cmd = nil
}

// s3put runs testdata/s3put.py against w with the admin keys.
func (w *weedServer) s3put(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(python, append([]string{"testdata/s3put.py", w.Endpoint}, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+weedAdminKey, "AWS_SECRET_ACCESS_KEY="+weedAdminSecret,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("s3put.py %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// s3Env isolates the volfs processes a test starts from the machine's AWS
// configuration: no credentials but key (none when empty), no instance
// metadata.
func s3Env(t *testing.T, key, secret string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", "AWS_REGION": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
		"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": "",
	} {
		t.Setenv(k, v) // restored when the test ends
		if v == "" {
			os.Unsetenv(k) // botocore refuses an empty AWS_PROFILE
		}
	}
}

// writeZarr3 writes Zarr v3 arrays with numpy (gzip and transpose codecs,
// both key encodings, edge chunks, a missing chunk) under dir, each with
// its values beside it in NAME.npy.
func writeZarr3(t *testing.T, dir string) []string {
	t.Helper()
	script := `
import gzip, json, os, sys
import numpy as np
dir = sys.argv[1]
rng = np.random.default_rng(3)
def write(name, dtype, shape, chunk, enc, fill):
    a = rng.integers(0, 60000, shape).astype(dtype)
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 5}}]
    meta = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk)}},
            "chunk_key_encoding": enc, "fill_value": fill, "codecs": codecs}
    os.makedirs(os.path.join(dir, name))
    json.dump(meta, open(os.path.join(dir, name, "zarr.json"), "w"))
    grid = [-(-s // c) for s, c in zip(shape, chunk)]
    for idx in np.ndindex(*grid):
        if idx == tuple(g - 1 for g in grid):
            a[tuple(slice(i * c, None) for i, c in zip(idx, chunk))] = fill  # never written
            continue
        block = np.full(chunk, fill, dtype=dtype)
        sel = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunk, shape))
        block[tuple(slice(0, s.stop - s.start) for s in sel)] = a[sel]
        sep = enc.get("configuration", {}).get("separator", "/")
        key = sep.join(map(str, idx))
        if enc["name"] == "default":
            key = "c" + sep + key
        p = os.path.join(dir, name, *key.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "wb").write(gzip.compress(block.astype("<" + np.dtype(dtype).str[1:]).tobytes()))
    np.save(os.path.join(dir, name + ".npy"), a)
write("v3.u16", "uint16", (37, 50, 41), (16, 16, 16), {"name": "default"}, 0)
write("v3.i32", "int32", (20, 33), (8, 10), {"name": "v2", "configuration": {"separator": "."}}, 5)
`
	run(t, python, "-c", script, dir)
	return []string{"v3.u16", "v3.i32"}
}

// checkZarr3 compares the arrays that writeZarr3 wrote with what the mount
// shows, read with zarrcheck.py's numpy reader of [bytes little] arrays.
func checkZarr3(t *testing.T, src, mnt string, names []string) {
	t.Helper()
	script := `
import sys; sys.path.insert(0, "testdata"); import zarrcheck, numpy as np
src, mnt = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    zarrcheck.check(name, zarrcheck.read_v3(mnt + "/" + name), np.load(src + "/" + name + ".npy"))
if zarrcheck.failures: print("\n".join(zarrcheck.failures)); sys.exit(1)
print(len(sys.argv) - 3, "Zarr v3 arrays read exactly")`
	t.Log(strings.TrimSpace(run(t, python, append([]string{"-c", script, src, mnt}, names...)...)))
}

// TestS3SeaweedFS uploads precomputed (gzip-encoded as CloudVolume
// uploads), Zarr v2, Zarr v3 and N5 volumes with boto3 to SeaweedFS's S3
// gateway on loopback, mounts the bucket with the volfs binary and reads
// every volume back exactly; then a private bucket with keys and without,
// a bucket policy that denies one prefix, and a bucket that does not
// exist.
func TestS3SeaweedFS(t *testing.T) {
	requireFUSE(t)
	requireZarr(t)
	w := startWeed(t, "pub")
	s3Env(t, "", "")

	vol, truth := writeVolume(t)
	zsrc := t.TempDir()
	run(t, python, "testdata/zarrcheck.py", "write", zsrc, "11")
	v3src := t.TempDir()
	v3 := writeZarr3(t, v3src)
	w.s3put(t, "put", "pub", "precomputed", vol, "--gzip-encoded")
	w.s3put(t, "put", "pub", "zarr", zsrc)
	w.s3put(t, "put", "pub", "zarr3", v3src)
	secret := t.TempDir()
	writeFile(t, filepath.Join(secret, "secret.txt"), []byte("not for everyone\n"))
	writeFile(t, filepath.Join(secret, "open.txt"), []byte("for everyone\n"))
	w.s3put(t, "put", "pub", "files", secret)
	w.s3put(t, "put", "priv", "precomputed", vol, "--gzip-encoded")

	s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "s3://pub")
	mnt := s.mnt

	t.Run("precomputed", func(t *testing.T) {
		check(t, truth, filepath.Join(mnt, "precomputed"), vol)
	})
	t.Run("zarr v2 and N5", func(t *testing.T) {
		run(t, python, "testdata/zarrcheck.py", "verify", zsrc, filepath.Join(mnt, "zarr"))
	})
	t.Run("zarr v3", func(t *testing.T) {
		checkZarr3(t, v3src, filepath.Join(mnt, "zarr3"), v3)
	})
	t.Run("same bytes as from disk", func(t *testing.T) {
		disk := startVolfs(t, "mount", vol)
		run(t, "diff", "-r", disk.mnt, filepath.Join(mnt, "precomputed"))
	})
	t.Run("info and cat", func(t *testing.T) {
		out := run(t, volfsBin, "info", "--endpoint-url", w.Endpoint, "s3://pub/precomputed")
		for _, want := range []string{"s0", "s1", "uint16", "70x45x9"} {
			if !strings.Contains(out, want) {
				t.Errorf("info output lacks %q:\n%s", want, out)
			}
		}
		const chunk = "s0/-13-19_5-21_-3-1"
		got, err := exec.Command(volfsBin, "cat", "--endpoint-url", w.Endpoint, "s3://pub/precomputed", chunk).Output()
		if err != nil {
			t.Fatalf("volfs cat: %v", err)
		}
		if want := run(t, "cat", filepath.Join(mnt, "precomputed", chunk)); string(got) != want {
			t.Errorf("volfs cat %s: %d bytes differ from the mount's %d", chunk, len(got), len(want))
		}
	})
	t.Run("endpoint from AWS_ENDPOINT_URL_S3", func(t *testing.T) {
		cmd := exec.Command(volfsBin, "cat", "s3://pub/files", "open.txt")
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_S3="+w.Endpoint)
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != "for everyone\n" {
			t.Errorf("volfs cat with AWS_ENDPOINT_URL_S3: %q, %v", out, err)
		}
	})

	t.Run("private bucket", func(t *testing.T) {
		// Anonymous: refused at mount, with the credentials named.
		out, err := runErr(volfsBin, "info", "--endpoint-url", w.Endpoint, "s3://priv/precomputed")
		if err == nil || !strings.Contains(out, "permission denied") || !strings.Contains(out, "anonymous access (no AWS credentials found)") {
			t.Errorf("anonymous volfs info of a private bucket: %v\n%s\nwant a refusal naming anonymous access", err, out)
		}
		t.Setenv("AWS_ACCESS_KEY_ID", weedAdminKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", weedAdminSecret)
		keyed := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "s3://priv/precomputed")
		check(t, truth, keyed.mnt, vol)
		// --anonymous sends no signature even with keys in the environment.
		out, err = runErr(volfsBin, "info", "--anonymous", "--endpoint-url", w.Endpoint, "s3://priv/precomputed")
		if err == nil || !strings.Contains(out, "anonymous access (--anonymous)") {
			t.Errorf("volfs info --anonymous of a private bucket: %v\n%s", err, out)
		}
	})

	t.Run("bucket policy that denies", func(t *testing.T) {
		policy := `{"Version": "2012-10-17", "Statement": [
			{"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::pub/files/secret.txt"}]}`
		w.s3put(t, "policy", "pub", policy)
		m := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "s3://pub/files")
		out, err := runErr("cat", filepath.Join(m.mnt, "secret.txt"))
		if err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("cat of an object the policy denies: %v, %q, want EACCES", err, out)
		}
		if got := run(t, "cat", filepath.Join(m.mnt, "open.txt")); got != "for everyone\n" {
			t.Errorf("cat of an object the policy allows: %q", got)
		}
		if lines := strings.Count(m.stderr.String(), "refused access"); lines != 1 {
			t.Errorf("volfs logged %d lines about the refusal, want 1:\n%s", lines, m.stderr.String())
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		// With keys: to anonymous requests SeaweedFS answers 403 for a
		// bucket that does not exist, as for one it may not read.
		t.Setenv("AWS_ACCESS_KEY_ID", weedAdminKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", weedAdminSecret)
		out, err := runErr(volfsBin, "info", "--endpoint-url", w.Endpoint, "s3://nosuchbucket")
		if err == nil || !strings.Contains(out, `bucket "nosuchbucket" does not exist`) {
			t.Errorf("volfs info of a bucket that does not exist: %v\n%s", err, out)
		}
		mnt := filepath.Join(t.TempDir(), "mnt")
		os.Mkdir(mnt, 0o755)
		out, err = runErr(volfsBin, "mount", "--endpoint-url", w.Endpoint, "s3://nosuchbucket", mnt)
		if err == nil || !strings.Contains(out, "does not exist") || isMounted(t, mnt) {
			t.Errorf("volfs mount of a bucket that does not exist: %v\n%s", err, out)
		}
	})
}

// TestS3ServerRestart kills SeaweedFS while a process reads a volume
// through the mount and starts it again: the read goes on after retries,
// or fails with EIO, and never returns a wrong byte; after the restart the
// whole volume reads exactly.
func TestS3ServerRestart(t *testing.T) {
	requireFUSE(t)
	requireZarr(t)
	w := startWeed(t, "pub")
	s3Env(t, "", "")
	// 64 MiB of uint16 in 32 gzip chunks of 2 MiB.
	src := t.TempDir()
	run(t, python, "-c", `
import sys, numpy as np, zarr, numcodecs
a = (np.arange(32 * 1024 * 1024, dtype="<u4") * 2654435761 >> 20).astype("<u2").reshape(32, 1024, 1024)
z = zarr.open(sys.argv[1] + "/arr", mode="w", shape=a.shape, chunks=(8, 256, 512), dtype="<u2", compressor=numcodecs.GZip(1))
z[:] = a`, src)
	w.s3put(t, "put", "pub", "vol", src)
	want := filepath.Join(t.TempDir(), "want.raw")
	disk := startVolfs(t, "mount", src)
	run(t, "cp", filepath.Join(disk.mnt, "arr", "volume.raw"), want)
	full, err := os.ReadFile(want)
	if err != nil || len(full) != 64<<20 {
		t.Fatalf("volume.raw from disk: %d bytes, %v", len(full), err)
	}

	// A small cache and read-ahead, so that most of the volume is fetched
	// after the restart.
	s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "--cache-size", "16MiB", "--read-ahead", "2MiB", "s3://pub/vol")
	wait := ddInFlight(t, filepath.Join(s.mnt, "arr", "volume.raw"), 4<<20)
	killed := time.Now()
	w.stop(t)
	w.start(t)
	data, stderr, err := wait()
	t.Logf("dd ended %v after the kill (the server answered again after %v)", time.Since(killed).Round(10*time.Millisecond), w.startedIn.Round(10*time.Millisecond))
	if len(data) > len(full) || string(data) != string(full[:len(data)]) {
		t.Fatalf("dd across the restart copied %d bytes, some of which differ from the volume's", len(data))
	}
	switch {
	case err != nil && !strings.Contains(stderr, "Input/output error"):
		t.Errorf("dd across the restart failed with %v: %s, want EIO", err, stderr)
	case err != nil:
		t.Logf("dd across the restart: EIO after %d of %d bytes, all of them right", len(data), len(full))
	case len(data) != len(full):
		t.Errorf("dd across the restart copied %d bytes, want %d", len(data), len(full))
	default:
		t.Logf("dd across the restart: all %d bytes right", len(data))
	}
	// The mount is not stuck: once the server serves reads again, every
	// chunk reads exactly through the same mount. (Chunk files, not
	// volume.raw: the mount answers a read of the range that just failed
	// with the same EIO for a few seconds, fs.failureMemory.)
	w.waitReadable(t, "/pub/vol/arr/.zarray")
	n := 0
	for z := range 4 {
		for y := range 4 {
			for x := range 2 {
				name := fmt.Sprintf("%d.%d.%d", z, y, x)
				run(t, "cmp", filepath.Join(disk.mnt, "arr", name), filepath.Join(s.mnt, "arr", name))
				n++
			}
		}
	}
	t.Logf("after the restart, all %d chunks read exactly through the same mount", n)
	if peak := peakRSS(t, s.cmd.Process.Pid); peak > maxPeakRSS {
		t.Errorf("volfs peaked at %d MiB, want at most %d", peak>>20, maxPeakRSS>>20)
	} else {
		t.Logf("volfs peak RSS %.1f MiB", float64(peak)/(1<<20))
	}
}

// waitReadable waits until an anonymous GET of path (/bucket/key) succeeds:
// after a restart the gateway answers before its volume server is back.
func (w *weedServer) waitReadable(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", w.Endpoint+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET %s did not succeed within 2 minutes: %v", path, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
