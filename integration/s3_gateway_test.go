package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWeedSplit starts SeaweedFS as two processes, as a deployment that
// scales its gateways does: `weed server -filer` (master, volume server
// and filer) and `weed s3 -filer=...` (the S3 gateway, with startWeed's
// identities), so that the gateway alone can be restarted, in about a
// second, while the data stays up. It returns the gateway; the backend's
// filer is its filer field. Both are killed when the test ends.
func startWeedSplit(t *testing.T, public ...string) (gateway, backend *weedServer) {
	t.Helper()
	bin := weedBinary(t)
	requireBoto3(t)
	dir := t.TempDir()
	data := weedConfig(t, dir, public)
	p := freePorts(t, 8)
	backend = &weedServer{bin: bin, dir: dir, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[5])}
	backend.args = []string{"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.telemetry=false", "-master.volumeSizeLimitMB=256", "-volume.max=16",
		fmt.Sprintf("-master.port=%d", p[1]), fmt.Sprintf("-master.port.grpc=%d", p[2]),
		fmt.Sprintf("-volume.port=%d", p[3]), fmt.Sprintf("-volume.port.grpc=%d", p[4]),
		"-filer", fmt.Sprintf("-filer.port=%d", p[5]), fmt.Sprintf("-filer.port.grpc=%d", p[6]),
	}
	gateway = &weedServer{bin: bin, dir: dir, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[0])}
	gateway.args = []string{"s3", "-ip.bind=127.0.0.1", fmt.Sprintf("-port=%d", p[0]), fmt.Sprintf("-port.grpc=%d", p[7]),
		"-port.iceberg=0", "-port.lance=0",
		fmt.Sprintf("-filer=127.0.0.1:%d.%d", p[5], p[6]), // host:port.grpcPort
		"-config=" + filepath.Join(dir, "s3.json"), "-localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	for _, w := range []*weedServer{backend, gateway} {
		var err error
		if w.log, err = os.Create(filepath.Join(dir, w.args[0]+".log")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range []*weedServer{gateway, backend} {
			w.stop(t)
			w.log.Close()
			if t.Failed() {
				out, _ := os.ReadFile(w.log.Name())
				if len(out) > 6000 {
					out = out[len(out)-6000:]
				}
				t.Logf("weed %s's log ends:\n%s", w.args[0], out)
			}
		}
	})
	backend.start(t)
	gateway.start(t)
	return gateway, backend
}

// ddInFlight starts `dd` of path with 64 KiB reads and returns once it has
// copied the first `after` bytes; wait returns what it copied in all, its
// stderr and its error.
func ddInFlight(t *testing.T, path string, after int) (wait func() ([]byte, string, error)) {
	t.Helper()
	cmd := exec.Command("dd", "if="+path, "bs=64K", "status=none")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	copied := make(chan []byte, 1)
	go func() {
		var got []byte
		buf := make([]byte, 1<<20)
		for {
			n, err := out.Read(buf)
			if len(got) < after && len(got)+n >= after {
				close(first)
			}
			got = append(got, buf[:n]...)
			if err != nil {
				copied <- got
				return
			}
		}
	}()
	select {
	case <-first:
	case data := <-copied:
		cmd.Wait()
		t.Fatalf("dd ended after %d bytes, before %d: %s", len(data), after, stderr.String())
	}
	return func() ([]byte, string, error) {
		data := <-copied
		err := cmd.Wait()
		return data, stderr.String(), err
	}
}

// TestS3GatewayRestart kills SeaweedFS's S3 gateway (SIGKILL, as a crash)
// while dd reads a 64 MiB volume through the mount, and starts it again at
// once: the reads that meet the outage are retried with back-off until
// the gateway answers, and dd copies every byte exactly, without an error.
// The restart takes 0.5-0.8 s here; the mount runs with --retries 9 (about
// 10 s of back-off), since the default 5 rides out 1.5 s on average and
// as little as a few hundred ms when the jitter draws short.
// (TestS3ServerRestart keeps the case of an outage longer than the
// retries: EIO, never a wrong byte.)
func TestS3GatewayRestart(t *testing.T) {
	requireFUSE(t)
	requireZarr(t)
	w, _ := startWeedSplit(t, "pub")
	s3Env(t, "", "")
	// 64 MiB of uint16 in 128 raw chunks of 512 KiB: decoding costs
	// nothing, so fetches run back to back and the outage meets some.
	src := t.TempDir()
	run(t, python, "-c", `
import sys, numpy as np, zarr
a = (np.arange(32 * 1024 * 1024, dtype="<u4") * 2654435761 >> 20).astype("<u2").reshape(32, 1024, 1024)
z = zarr.open(sys.argv[1] + "/arr", mode="w", shape=a.shape, chunks=(4, 256, 256), dtype="<u2", compressor=None)
z[:] = a`, src)
	w.s3put(t, "put", "pub", "vol", src)
	disk := startVolfs(t, "mount", src)
	full, err := os.ReadFile(filepath.Join(disk.mnt, "arr", "volume.raw"))
	if err != nil || len(full) != 64<<20 {
		t.Fatalf("volume.raw from disk: %d bytes, %v", len(full), err)
	}

	// A small cache and read-ahead, so that most of the volume is fetched
	// after the restart.
	addr := freeAddr(t)
	s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "--cache-size", "16MiB", "--read-ahead", "2MiB", "--retries", "9", "--metrics-addr", addr, "s3://pub/vol")
	// Whether the outage meets a request is timing: a run where dd waited
	// out the restart between fetches (once here: 0 retries, dd ended 10 s
	// after the kill) shows nothing, so the crash is tried again, up to
	// three times, until one meets a request. Every try must copy every
	// byte exactly.
	var retries float64
	view := filepath.Join(s.mnt, "arr", "volume.raw")
	for try := 1; try <= 3 && retries == 0; try++ {
		if try > 1 {
			// The last dd left the view in the kernel's page cache (and
			// its last 16 MiB in memory): drop the pages, so that this dd
			// fetches again.
			run(t, python, "-c", `import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)`, view)
		}
		wait := ddInFlight(t, view, 4<<20)
		killed := time.Now()
		w.stop(t)
		w.start(t)
		back := time.Since(killed)
		data, stderr, err := wait()
		t.Logf("try %d: gateway killed and answering again after %v; dd ended %v after the kill", try, back.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))
		if err != nil || len(data) != len(full) || string(data) != string(full) {
			same := 0
			for same < min(len(data), len(full)) && data[same] == full[same] {
				same++
			}
			t.Fatalf("dd across the gateway's restart: %v (%s), %d of %d bytes, the first %d right", err, strings.TrimSpace(stderr), len(data), len(full), same)
		}
		retries, _ = metricValue(scrapeMetrics(t, addr), "volfs_fetch_retries_total")
		t.Logf("try %d: dd across the gateway's restart: all %d bytes right, %v attempts retried", try, len(data), retries)
	}
	if retries == 0 {
		t.Errorf("no attempt was retried in three crashes: the outage met no request, so this run shows nothing")
	}
	checkPeak(t, s)
	if n := strings.Count(s.stderr.String(), "level=ERROR"); n != 0 {
		t.Errorf("volfs logged %d errors across a restart it rode out:\n%s", n, s.stderr.String())
	}
}

// TestS3WarmGatewayGone: `volfs warm` from SeaweedFS's S3 gateway, then
// the gateway goes away (killed, its port closed): a mount with the same
// --cache-dir builds its tree from what warm kept and reads every warmed
// chunk exactly; a chunk not warmed is EIO.
func TestS3WarmGatewayGone(t *testing.T) {
	requireFUSE(t)
	requirePython(t)
	w, _ := startWeedSplit(t, "pub")
	s3Env(t, "", "")
	src := t.TempDir()
	want := warmLayer(t, src, "", "")
	w.s3put(t, "put", "pub", "layer", src)
	cacheDir := t.TempDir()
	source := "s3://pub/layer"
	out, err := runBounded(t, 2*time.Minute, volfsBin, "warm", "--endpoint-url", w.Endpoint, "--cache-dir", cacheDir, "--bbox", ",,0:64", source, "s0")
	t.Logf("warm:\n%s", out)
	if f, c, m, x := warmSummaryOf(t, out); err != nil || f != 32 || c != 0 || m != 0 || x != 0 {
		t.Fatalf("warm: %v, %d fetched, %d cached, %d missing, %d failed; want 32, 0, 0, 0", err, f, c, m, x)
	}
	w.stop(t)

	start := time.Now()
	s := startVolfs(t, "mount", "--endpoint-url", w.Endpoint, "--cache-size", "16MiB", "--cache-dir", cacheDir, source)
	t.Logf("mounted with the gateway gone in %v", time.Since(start).Round(time.Millisecond))
	warmed, cold := splitWarmed(want)
	sums, failed := hashChunks(t, s.mnt, warmed)
	for _, key := range warmed {
		if sums[key] != want[key] {
			t.Errorf("%s: sha256 %q (failed: %q), want %s", key, sums[key], failed[key], want[key])
		}
	}
	t.Logf("%d warmed chunks read with the gateway gone", len(warmed))
	sums, failed = hashChunks(t, s.mnt, cold[:2])
	for _, key := range cold[:2] {
		if failed[key] != "EIO" {
			t.Errorf("%s, not warmed, with the gateway gone: %q (sha256 %q), want EIO", key, failed[key], sums[key])
		}
	}
	if n := strings.Count(s.stderr.String(), "the origin cannot be reached"); n != 1 {
		t.Errorf("%d warnings that the origin cannot be reached, want 1:\n%s", n, s.stderr.String())
	}
}
