package integration

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/volfs/volfs/fs"
)

// poolRead is a Python program that reads every chunk file of a directory
// (argv[1], names starting "0-") with a pool of argv[2] threads taking
// whole files from a shared queue in lexical order, as a thread pool of
// zarr-python, dask or tensorstore does, then prints their bytes in that
// order.
const poolRead = `
import os, queue, sys, threading
d, n = sys.argv[1], int(sys.argv[2])
names = sorted(x for x in os.listdir(d) if x.startswith("0-"))
q = queue.Queue()
for x in names:
    q.put(x)
got = {}
def work():
    while True:
        try:
            x = q.get_nowait()
        except queue.Empty:
            return
        with open(os.path.join(d, x), "rb") as f:
            got[x] = f.read()
ts = [threading.Thread(target=work) for _ in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
out = sys.stdout.buffer
for x in names:
    out.write(got[x])
`

// TestReadAheadThreadPool: one process with 8 threads sharing out the 64
// chunk files of a layer in lexical order is one reader with one
// read-ahead window: the FUSE requests carry 8 thread ids, which volfs
// maps to the one process, and the touches come out of order by up to 8,
// which its tracker tolerates. Keyed by thread, each thread would see
// every 8th chunk and no run, and nothing would be prefetched.
func TestReadAheadThreadPool(t *testing.T) {
	requirePython(t)
	src := t.TempDir()
	gz := map[int]bool{}
	for i := range 64 {
		gz[i] = true
	}
	keys, chunks := writeLayer(t, src, 64, gz)
	m := mountTree(t, src, fs.Options{ReadAhead: 16 * hostileChunk})
	_, want := lexical(keys, chunks)
	cmd := exec.Command(python, "-c", poolRead, m.mnt+"/s0", "8")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("python pool of 8 threads: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("python pool of 8 threads: %d bytes differ from the %d of the chunks written, in lexical order", len(got), len(want))
	}
	s := m.tree.StoreStats()
	t.Logf("store: %+v", s)
	if s.PrefetchIssued < 16 {
		t.Errorf("prefetches issued for 8 threads reading 64 chunks in order: got %d, want at least 16", s.PrefetchIssued)
	}
	// Half the chunks at least come from read-ahead. Some prefetches are
	// abandoned and issued again when the pool's threads race past them,
	// and the window runs past the last chunk, so the share of prefetches
	// used varies with the scheduling (54 to 59 of 64 to 76 issued).
	if s.PrefetchUsed < 32 {
		t.Errorf("chunks read from prefetches: got %d of 64 (%d issued), want at least half", s.PrefetchUsed, s.PrefetchIssued)
	}
}
