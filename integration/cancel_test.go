package integration

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/fs"
)

// TestInterruptedReadCancelsLoad: a reader killed while its chunk is being
// fetched makes the kernel interrupt the request; with no reader left the
// load is cancelled (the server sees its request go away), and the mount
// goes on serving. The reader uses O_DIRECT: a page-cache read is fetched
// by the kernel's read-ahead, which no signal to the reader interrupts.
func TestInterruptedReadCancelsLoad(t *testing.T) {
	vol, _ := writeVolume(t)
	const slow = "/s1/-7-9_2-18_-3-1.gz"
	arrived, gone := make(chan struct{}), make(chan struct{})
	var first sync.Once
	files := http.FileServer(http.Dir(vol))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held := false
		if r.URL.Path == slow {
			first.Do(func() { held = true })
		}
		if !held {
			files.ServeHTTP(w, r)
			return
		}
		close(arrived)
		<-r.Context().Done() // hold the reply until the client gives up
		close(gone)
	}))
	t.Cleanup(srv.Close)
	mnt := mountSource(t, srv.URL, fs.Options{})

	reader := exec.Command(python, "-c", "import os, sys; os.read(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT), 1 << 20)",
		filepath.Join(mnt, "s1", "-7-9_2-18_-3-1"))
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the read never reached the server")
	}
	reader.Process.Signal(syscall.SIGKILL)
	reader.Wait()
	select {
	case <-gone:
	case <-time.After(10 * time.Second): // under the fetcher's 30 s stall timeout
		t.Fatal("the load went on after its only reader was killed")
	}
	// Still serving: another chunk reads.
	if out := run(t, "cat", filepath.Join(mnt, "s1", "9-25_2-18_-3-1")); len(out) == 0 {
		t.Error("empty read after the interrupted one")
	}
	if out, _ := runErr("ls", filepath.Join(mnt, "s1")); !strings.Contains(out, "-7-9_2-18_-3-1") {
		t.Errorf("listing after the interrupted read: %q", out)
	}
}
