package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// The deadline tests: reads that a slow, dripping or lying server, or a
// flood of clients, must not hold for longer than volfs's flags allow
// (issues 15 and 16). docs/RELIABILITY.md lists the figures they log.

// socketFDs counts the sockets the process pid holds open.
func socketFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestHostileMetricsFlood: 2000 connections to --metrics-addr that send
// half a request and wait hold at most the metrics server's few
// connections, so a volfs limited to 256 descriptors still opens and reads
// every chunk file and lists its directory; once the flood's clients leave,
// a scrape is answered.
func TestHostileMetricsFlood(t *testing.T) {
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 8, nil)
	addr := freeAddr(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft descriptor limit to the hard one: 256 for both.
	s, _ := startCmd(t, exec.Command("prlimit", "--nofile=256:256", volfsBin, "mount", "--cache-size", "16MiB", "--read-ahead", "0",
		"--metrics-addr", addr, src, mnt), mnt)
	pid := s.cmd.Process.Pid
	before := socketFDs(t, pid)

	const flood = 2000
	start := time.Now()
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d to the metrics port: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// The server takes what it will: wait until its cap is in use.
	for socketFDs(t, pid) < before+8 {
		if time.Since(start) > time.Minute {
			t.Fatalf("volfs accepted %d metrics connections in a minute, want 8", socketFDs(t, pid)-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, key := range keys {
		out, err := runBounded(t, time.Minute, "cat", filepath.Join(mnt, key))
		if err != nil || out != string(chunks[i]) {
			t.Errorf("cat %s during the flood: %v, %d bytes, want %d", key, err, len(out), len(chunks[i]))
		}
	}
	out, err := runBounded(t, time.Minute, "ls", filepath.Join(mnt, "s0"))
	for _, key := range keys {
		if !strings.Contains(out, filepath.Base(key)+"\n") {
			t.Errorf("ls during the flood: %v, %q lacks %s", err, out, filepath.Base(key))
		}
	}
	held := socketFDs(t, pid) - before
	t.Logf("metrics flood of %d half-sent requests: volfs holds %d of their sockets; reads done %v after the flood began",
		flood, held, time.Since(start).Round(time.Millisecond))
	if held > 8 {
		t.Errorf("volfs holds %d sockets of the flood, want at most 8", held)
	}
	// The flood leaves; the backlog it filled drains at once.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape after the flood: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "volfs_cache_hits_total") {
		t.Errorf("scrape after the flood: %s, %d bytes", resp.Status, len(body))
	}
	t.Logf("scrape answered %v after the flood began", time.Since(start).Round(time.Millisecond))
	checkPeak(t, s)
}

// dripHandler sends size bytes of 1, one a second, with a Content-Length
// of size, until the client leaves.
func dripHandler(size int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range size {
			if _, err := w.Write([]byte{1}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// TestHostileReadTimeout: with --read-timeout 4s and the default stall
// timeout and minimum rate (under which one attempt at a 128 KiB chunk may
// last 32 s, and the retries and the kernel's re-read 6.5 minutes), a read
// of a chunk or a pass-through file that a server drips fails with EIO
// within the read timeout and a few seconds of slack, while the mount
// serves other chunks; the kernel's re-read of the failed read-ahead
// fails at once.
func TestHostileReadTimeout(t *testing.T) {
	// The slack is below the read timeout: a kernel's re-read that started
	// over would take twice the timeout, and fail the test.
	const readTimeout = 4 * time.Second
	const slack = 3 * time.Second
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 3, nil)
	writeFile(t, filepath.Join(src, "notes.bin"), bytes.Repeat([]byte{9}, 1<<20))
	drip := dripHandler(hostileChunk)
	files := http.FileServer(http.Dir(src))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/"+keys[0] || r.URL.Path == "/notes.bin" && r.Method == http.MethodGet {
			drip(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	s := startVolfs(t, "mount", "--cache-size", "16MiB", "--read-ahead", "0", "--read-timeout", readTimeout.String(), srv.URL)
	for _, name := range []string{keys[0], "notes.bin"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			start := time.Now()
			cmd := exec.Command("cat", filepath.Join(s.mnt, name))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The mount serves other chunks while the read waits.
			checkAlive(t, s.mnt, keys[1], chunks[1])
			var err error
			select {
			case err = <-done:
			case <-time.After(readTimeout + time.Minute):
				cmd.Process.Kill()
				t.Fatalf("cat %s still running after %v", name, readTimeout+time.Minute)
			}
			took := time.Since(start)
			t.Logf("dripped read of %s: EIO after %v (--read-timeout %v)", name, took.Round(time.Millisecond), readTimeout)
			if err == nil || !strings.Contains(out.String(), "Input/output error") {
				t.Errorf("cat %s: got %v, %q, want EIO", name, err, out.String())
			}
			if took > readTimeout+slack {
				t.Errorf("cat %s: EIO after %v, want at most %v", name, took, readTimeout+slack)
			}
		})
	}
	checkAlive(t, s.mnt, keys[2], chunks[2])
	checkPeak(t, s)
}

// shardedInfo is a precomputed layer of two 64x64x32 uint8 chunks (ids 0
// and 1) in one shard, 0.shard, with one minishard and raw indexes.
const shardedInfo = `{"@type": "neuroglancer_multiscale_volume", "type": "image", "data_type": "uint8", "num_channels": 1,
 "scales": [{"key": "s0", "size": [64, 64, 64], "voxel_offset": [0, 0, 0], "resolution": [1, 1, 1],
   "chunk_sizes": [[64, 64, 32]], "encoding": "raw",
   "sharding": {"@type": "neuroglancer_uint64_sharded_v1", "preshift_bits": 0, "hash": "identity",
     "minishard_bits": 0, "shard_bits": 0, "minishard_index_encoding": "raw", "data_encoding": "raw"}}]}`

// shardPrefix returns the start of 0.shard of shardedInfo with the two
// chunks gap bytes after the shard index (the gap is the zeros that
// follow), and the chunks' bytes.
func shardPrefix(gap uint64) (prefix []byte, chunks [][]byte) {
	le := func(b []byte, vs ...uint64) []byte {
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	chunks = [][]byte{bytes.Repeat([]byte{3}, hostileChunk), bytes.Repeat([]byte{4}, hostileChunk)}
	// Offsets count from the end of the 16-byte shard index.
	minishard := gap + 2*hostileChunk
	prefix = le(nil, minishard, minishard+48)
	if gap > 1<<26 {
		return prefix, chunks // far: only the index is sent, then zeros
	}
	prefix = append(prefix, make([]byte, gap)...)
	prefix = append(append(prefix, chunks[0]...), chunks[1]...)
	// Ids 0 and 1 (deltas), offsets from the end of the index then from
	// the previous chunk's end, sizes.
	prefix = le(prefix, 0, 1, gap, 0, hostileChunk, hostileChunk)
	return prefix, chunks
}

// rangeIgnorer serves shardedInfo, its 0.shard answering every request,
// ranged or not, with a 200 whose body is prefix and then zeros for ever,
// at most rate bytes a second (0: as fast as it goes). It counts the bytes
// it sends and the requests still being answered.
type rangeIgnorer struct {
	sent, active atomic.Int64
	left         chan struct{} // a value each time a shard request ends
}

func newRangeIgnorer(t *testing.T, prefix []byte, rate int) (*rangeIgnorer, *httptest.Server) {
	ri := &rangeIgnorer{left: make(chan struct{}, 1024)}
	zeros := make([]byte, 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/info":
			io.WriteString(w, shardedInfo)
			return
		case "/s0/0.shard":
		default:
			http.NotFound(w, r)
			return
		}
		ri.active.Add(1)
		defer func() { ri.active.Add(-1); ri.left <- struct{}{} }()
		w.Header().Set("Content-Type", "application/octet-stream")
		if r.Method == http.MethodHead {
			return
		}
		tick := time.NewTicker(time.Second / 16)
		defer tick.Stop()
		body := prefix
		for {
			b := body
			if len(b) == 0 {
				b = zeros
			}
			if rate > 0 {
				b = b[:min(len(b), rate/16)]
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
			n, err := w.Write(b)
			ri.sent.Add(int64(n))
			if err != nil {
				return
			}
			if len(body) > 0 {
				body = body[n:]
			}
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return ri, srv
}

// TestHostileRangeIgnored: an origin that answers the ranged reads of a
// sharded scale with an endless 200. A shard laid out near its start reads
// right, pulling no more than the ranges' ends and drains; one whose
// minishard index lies 1 GiB in is EIO at once, having pulled almost
// nothing; and a slow one whose reader is killed stops being downloaded.
func TestHostileRangeIgnored(t *testing.T) {
	t.Run("near", func(t *testing.T) {
		prefix, chunks := shardPrefix(4 << 20)
		ri, srv := newRangeIgnorer(t, prefix, 0)
		s := startVolfs(t, "mount", "--cache-size", "16MiB", srv.URL)
		start := time.Now()
		for i, key := range []string{"s0/0-64_0-64_0-32", "s0/0-64_0-64_32-64"} {
			out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, key))
			if err != nil || out != string(chunks[i]) {
				t.Errorf("cat %s: %v, %d bytes, want the chunk's %d", key, err, len(out), len(chunks[i]))
			}
		}
		srv.CloseClientConnections()
		t.Logf("near: both chunks read in %v, %.1f MiB pulled (shard prefix %.1f MiB)",
			time.Since(start).Round(time.Millisecond), float64(ri.sent.Load())/(1<<20), float64(len(prefix))/(1<<20))
		// Index, minishard index, two chunks: each read to its range's
		// end plus a drain of 256 KiB, and socket buffers.
		if most := int64(4*len(prefix)) + 16<<20; ri.sent.Load() > most {
			t.Errorf("pulled %d bytes, want at most %d", ri.sent.Load(), most)
		}
		checkPeak(t, s)
	})
	t.Run("far", func(t *testing.T) {
		prefix, _ := shardPrefix(1 << 30)
		ri, srv := newRangeIgnorer(t, prefix, 0)
		s := startVolfs(t, "mount", "--cache-size", "16MiB", srv.URL)
		start := time.Now()
		out, err := runBounded(t, time.Minute, "cat", filepath.Join(s.mnt, "s0/0-64_0-64_0-32"))
		if err == nil || !strings.Contains(out, "Input/output error") {
			t.Errorf("cat of a chunk whose minishard index lies 1 GiB in: %v, %d bytes, want EIO", err, len(out))
		}
		srv.CloseClientConnections()
		t.Logf("far: EIO after %v, %.1f MiB pulled", time.Since(start).Round(time.Millisecond), float64(ri.sent.Load())/(1<<20))
		if most := int64(16 << 20); ri.sent.Load() > most {
			t.Errorf("pulled %d bytes, want at most %d", ri.sent.Load(), most)
		}
		checkPeak(t, s)
	})
	// 48 MiB before the chunks at 1 MiB/s: a read would take 48 s. With
	// --direct-io the kernel's read is the reader's, and its death
	// interrupts the request, which cancels the load nobody waits for; a
	// read through the page cache is the kernel's read-ahead, which no
	// signal interrupts, so --read-timeout ends it.
	for _, tc := range []struct {
		name        string
		args        []string
		readTimeout time.Duration
	}{
		{"reader killed, direct-io", []string{"--direct-io", "--read-timeout", "10m"}, 10 * time.Minute},
		{"reader killed, page cache", []string{"--read-timeout", "5s"}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix, _ := shardPrefix(48 << 20)
			ri, srv := newRangeIgnorer(t, prefix, 1<<20)
			s := startVolfs(t, append(append([]string{"mount", "--cache-size", "16MiB"}, tc.args...), srv.URL)...)
			start := time.Now()
			cmd := exec.Command("cat", filepath.Join(s.mnt, "s0/0-64_0-64_0-32"))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Kill the reader once the download of the far range is under way.
			for ri.sent.Load() < 2<<20 {
				select {
				case <-ri.left:
				case <-time.After(10 * time.Millisecond):
				}
			}
			killed := time.Now()
			cmd.Process.Kill()
			cmd.Wait()
			deadline := time.After(time.Minute)
			for ri.active.Load() > 0 {
				select {
				case <-ri.left:
				case <-deadline:
					t.Fatalf("still downloading a minute after the reader was killed (%d MiB pulled)", ri.sent.Load()>>20)
				}
			}
			t.Logf("%s: download stopped %v after the kill, %v after the read began, %.1f MiB pulled", tc.name,
				time.Since(killed).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), float64(ri.sent.Load())/(1<<20))
			if took := time.Since(start); took > min(tc.readTimeout, 20*time.Second)+5*time.Second {
				t.Errorf("download went on for %v after the read began", took)
			}
			if out, err := runBounded(t, time.Minute, "ls", filepath.Join(s.mnt, "s0")); err != nil || !strings.Contains(out, "0-64_0-64_32-64") {
				t.Errorf("ls after the kill: %v %q", err, out)
			}
			checkPeak(t, s)
		})
	}
}

// TestGCSDrip: a gs:// object that the server drips a byte a second is
// cut off by --stall-timeout and --min-rate as an HTTP source's is: each
// exchange ends at the stall timeout plus its size at the minimum rate,
// the call after six attempts' worth, and the read is EIO within that
// bound (and the back-off), with --read-timeout far out of the way; the
// mount serves the object's neighbour meanwhile.
func TestGCSDrip(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	keys, chunks := writeLayer(t, src, 2, nil)
	e := startGCSEmulator(t)
	const bucket = "drips"
	e.Store.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	putLayer(t, e, bucket, "", src, false)
	e.Drip(bucket, keys[0])

	const stall, rate = 1500 * time.Millisecond, 1 << 20
	s := startVolfs(t, "mount", "--anonymous", "--cache-size", "16MiB", "--stall-timeout", stall.String(), "--min-rate", "1MiB",
		"--read-timeout", "10m", "gs://"+bucket)
	checkAlive(t, s.mnt, keys[1], chunks[1])
	// Six attempts of 1.5 s plus the chunk's limit (2 x 128 KiB + 1 MiB)
	// at 1 MiB/s, and five back-offs of at most 5 s: the call's bound.
	// The kernel's re-read fails at once.
	perAttempt := stall + time.Duration(2*hostileChunk+1<<20)*time.Second/rate
	bound := 6*perAttempt + 5*5*time.Second
	start := time.Now()
	out, err := runBounded(t, bound+time.Minute, "cat", filepath.Join(s.mnt, keys[0]))
	took := time.Since(start)
	t.Logf("gs:// drip read ended after %v (bound from the flags: %v)", took.Round(time.Millisecond), bound)
	if err == nil || !strings.Contains(out, "Input/output error") {
		t.Errorf("cat of the dripping object: got %v, %d bytes, want EIO", err, len(out))
	}
	if took > bound+5*time.Second {
		t.Errorf("EIO after %v, want at most %v", took, bound+5*time.Second)
	}
	checkAlive(t, s.mnt, keys[1], chunks[1])
	checkPeak(t, s)
}

// patternByte is byte i of the pass-through object of TestPassThroughStream.
func patternByte(i int64) byte { return byte(i*7 + i>>20) }

// patternObject reads as the first size bytes of patternByte.
type patternObject struct{ off, size int64 }

func (p *patternObject) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-p.off)]
	for i := range b {
		b[i] = patternByte(p.off + int64(i))
	}
	p.off += int64(len(b))
	return len(b), nil
}

func (p *patternObject) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		p.off = off
	case io.SeekCurrent:
		p.off += off
	case io.SeekEnd:
		p.off = p.size + off
	}
	return p.off, nil
}

// TestPassThroughStream: a 512 MiB pass-through file read in order with
// cat, from a server that honours Range and from one that ignores it (and
// answers every read with the whole object), reads right, pulls about its
// size once, and holds no more memory than a small volfs does.
func TestPassThroughStream(t *testing.T) {
	const size = 512 << 20
	h := sha256.New()
	io.Copy(h, &patternObject{size: size})
	want := hex.EncodeToString(h.Sum(nil))
	for _, ignoreRange := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignores Range %v", ignoreRange), func(t *testing.T) {
			origin := &originLog{bytes: map[string]int64{}}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/big.bin" {
					http.NotFound(w, r)
					return
				}
				cw := &countingWriter{ResponseWriter: w, o: origin, key: r.URL.Path}
				if !ignoreRange {
					http.ServeContent(cw, r, "", time.Time{}, &patternObject{size: size})
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(size))
				if r.Method != http.MethodHead {
					io.Copy(cw, &patternObject{size: size})
				}
			}))
			t.Cleanup(func() {
				srv.CloseClientConnections()
				srv.Close()
			})
			// The server lists nothing (no index): the file is reached by
			// name, so the empty root is allowed.
			s := startVolfs(t, "mount", "--cache-size", "16MiB", "--allow-empty-source", srv.URL)
			start := time.Now()
			out, err := runBounded(t, 5*time.Minute, "sha256sum", filepath.Join(s.mnt, "big.bin"))
			took := time.Since(start)
			if err != nil || !strings.HasPrefix(out, want) {
				t.Errorf("sha256sum of the pass-through file: %v %q, want %s", err, out, want)
			}
			srv.CloseClientConnections()
			sent, _ := origin.snapshot("/big.bin")
			t.Logf("512 MiB pass-through, server ignores Range %v: read in %v (%.0f MB/s), %.0f MiB pulled",
				ignoreRange, took.Round(time.Millisecond), size/took.Seconds()/1e6, float64(sent)/(1<<20))
			if most := int64(size + size/4); sent > most {
				t.Errorf("pulled %d bytes for a %d-byte file, want at most %d", sent, size, most)
			}
			checkPeak(t, s)
		})
	}
}
