package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/volfs/volfs/fs"
	"github.com/volfs/volfs/internal/testenv"
)

// neuroglancerModules holds neuroglancer and esbuild, installed by
// .ci/run with npm beside zarrita.
const neuroglancerModules = zarritaModules

// requireNeuroglancer returns the node_modules that holds the neuroglancer
// package and esbuild, skipping (or, under VOLFS_REQUIRE_FUSE, failing)
// when they are not installed.
func requireNeuroglancer(t *testing.T) string {
	t.Helper()
	requireTool(t, "node")
	modules, err := filepath.Abs(neuroglancerModules)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"neuroglancer/lib/main.bundle.js", "esbuild/package.json"} {
		if _, err := os.Stat(filepath.Join(modules, pkg)); err != nil {
			testenv.Unavailable(t, "neuroglancer or esbuild is not installed in %s (bash .ci/run installs them): %v", modules, err)
		}
	}
	return modules
}

// buildNeuroglancer bundles the npm package into a static viewer (see
// testdata/neuroglancer_build.mjs) and returns its directory.
func buildNeuroglancer(t *testing.T, modules string) string {
	t.Helper()
	out := t.TempDir()
	run(t, "node", nodeScript(t, modules, "neuroglancer_build.mjs"), out)
	return out
}

// gradientPython writes, under argv[1], one volume three ways: pc (a
// precomputed layer), v2.zarr (Zarr v2 by zarr-python, zlib) and v3.zarr
// (Zarr v3, gzip). Its value at x is 2x: a ramp over the 128 voxels of x,
// the same at every y and z.
const gradientPython = `
import json, os, sys, numpy as np, zarr
from numcodecs import Zlib
root = sys.argv[1]
X, Y, Z = 128, 96, 16
a = np.broadcast_to((np.arange(X) * 2).astype(np.uint8)[:, None, None], (X, Y, Z))  # a[x, y, z]

# precomputed: chunk files in Fortran order (x fastest).
pc = os.path.join(root, "pc")
os.makedirs(os.path.join(pc, "s0"))
json.dump({"type": "image", "data_type": "uint8", "num_channels": 1, "scales": [{"key": "s0", "size": [X, Y, Z],
    "resolution": [8, 8, 8], "voxel_offset": [0, 0, 0], "chunk_sizes": [[64, 64, 8]], "encoding": "raw"}]},
    open(os.path.join(pc, "info"), "w"))
for x0 in range(0, X, 64):
    for y0 in range(0, Y, 64):
        for z0 in range(0, Z, 8):
            c = a[x0:x0 + 64, y0:y0 + 64, z0:z0 + 8]
            name = "%d-%d_%d-%d_%d-%d" % (x0, x0 + c.shape[0], y0, y0 + c.shape[1], z0, z0 + c.shape[2])
            open(os.path.join(pc, "s0", name), "wb").write(c.tobytes(order="F"))

# Zarr v2 by zarr-python, zlib: dimension 0 is x.
zarr.open_array(os.path.join(root, "v2.zarr"), mode="w", shape=a.shape, chunks=(64, 64, 8), dtype="u1",
    compressor=Zlib(5))[:] = a

# Zarr v3 by hand: the bytes codec, then gzip; edge chunks whole, as the
# format has them.
v3 = os.path.join(root, "v3.zarr")
os.makedirs(v3)
json.dump({"zarr_format": 3, "node_type": "array", "shape": list(a.shape), "data_type": "uint8",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64, 64, 8]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0,
    "codecs": [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}]},
    open(os.path.join(v3, "zarr.json"), "w"))
import gzip
for i in range(2):
    for j in range(2):
        for k in range(2):
            c = np.zeros((64, 64, 8), np.uint8)
            part = a[i * 64:(i + 1) * 64, j * 64:(j + 1) * 64, k * 8:(k + 1) * 8]
            c[:part.shape[0], :part.shape[1], :part.shape[2]] = part
            os.makedirs(os.path.join(v3, "c", str(i), str(j)), exist_ok=True)
            open(os.path.join(v3, "c", str(i), str(j), str(k)), "wb").write(gzip.compress(c.tobytes()))
`

// The dimension names neuroglancer gives a precomputed volume and a Zarr
// array without OME metadata.
var (
	pcDims   = [3]string{"x", "y", "z"}
	zarrDims = [3]string{"d0", "d1", "d2"}
)

// ngState is the viewer state opened: one image layer of source in a
// single xy panel, drawn green by value (toNormalized maps 0..255 to 0..1),
// at 4 pixels a voxel, with nothing else drawn over it. The source's three
// dimensions are named dims, in its order, with a voxel of size unit.
func ngState(source string, dims [3]string, unit float64, units string) string {
	dimensions := map[string]any{}
	for _, d := range dims {
		dimensions[d] = []any{unit, units}
	}
	state := map[string]any{
		"dimensions": dimensions,
		"layers": []map[string]any{{
			"type": "image", "name": "v", "source": source,
			"shader": "void main() { emitRGB(vec3(0.0, toNormalized(getDataValue()), 0.0)); }",
		}},
		"layout":                 "xy",
		"crossSectionScale":      0.25, // in voxels of dims a pixel
		"showAxisLines":          false,
		"showScaleBar":           false,
		"showDefaultAnnotations": false,
		"selectedLayer":          map[string]any{"visible": false},
	}
	b, err := json.Marshal(state)
	if err != nil {
		panic(err)
	}
	return "#!" + url.PathEscape(string(b))
}

// rampCheck looks, in a screenshot, for the ramp drawn green: on the
// middle row of the green pixels' bounding box, green rises from x's first
// voxels (near 0) to its last (near 254) and never falls; it returns what
// it found when that is not so.
func rampCheck(shot []byte) error {
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return fmt.Errorf("decoding the screenshot: %w", err)
	}
	isGreen := func(x, y int) (uint8, bool) {
		r, g, b, _ := img.At(x, y).RGBA()
		r8, g8, b8 := uint8(r>>8), uint8(g>>8), uint8(b>>8)
		return g8, r8 < 24 && b8 < 24 && g8 >= 24
	}
	box := image.Rectangle{}
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if _, ok := isGreen(x, y); ok {
				n++
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	// 128 × 96 voxels at 4 pixels a voxel, less the darkest columns.
	if n < 100_000 {
		return fmt.Errorf("%d green pixels, want the volume's 128×96 voxels drawn at 4 pixels each (about 180 000)", n)
	}
	y := (box.Min.Y + box.Max.Y) / 2
	var row []uint8
	for x := box.Min.X; x < box.Max.X; x++ {
		if g, ok := isGreen(x, y); ok {
			row = append(row, g)
		}
	}
	distinct := map[uint8]bool{}
	for i, g := range row {
		distinct[g] = true
		if i > 0 && g < row[i-1] {
			return fmt.Errorf("row %d: green falls from %d to %d at pixel %d of %d: not the ramp along x", y, row[i-1], g, i, len(row))
		}
	}
	if len(row) == 0 || row[0] > 40 || row[len(row)-1] < 240 || len(distinct) < 100 {
		return fmt.Errorf("row %d: %d green pixels from %v to %v, %d distinct levels; want a ramp from below 40 to above 240 with 100 levels or more",
			y, len(row), row[:min(1, len(row))], row[max(0, len(row)-1):], len(distinct))
	}
	return nil
}

// openViewer starts chromium and opens the viewer at page with state.
func openViewer(ctx context.Context, t *testing.T, chromium, page, state string) *browser {
	t.Helper()
	b := startBrowser(ctx, t, chromium)
	b.call(ctx, t, b.session, "Page.navigate", map[string]any{"url": page + state}, nil)
	return b
}

// waitReady waits until the page's neuroglancer viewer reports every layer
// and panel ready (all visible chunks loaded), as neuroglancer's own
// screenshot tool does before a capture. A data source that neuroglancer
// gave up on fails the test with neuroglancer's message.
func waitReady(ctx context.Context, t *testing.T, b *browser) {
	t.Helper()
	var failed string
	b.evaluate(ctx, t, `new Promise((resolve) => {
  const poll = () => {
    for (const l of window.viewer?.layerManager.managedLayers ?? []) {
      for (const s of l.layer?.dataSources ?? []) {
        if (s.loadState?.error !== undefined) { resolve(String(s.loadState.error.message ?? s.loadState.error)); return; }
      }
    }
    if (window.viewer?.isReady()) { resolve(""); } else { requestAnimationFrame(poll); }
  };
  poll();
})`, &failed)
	if failed != "" {
		t.Fatalf("neuroglancer could not load the source: %s", failed)
	}
}

// sourceError waits until neuroglancer gives up on a data source of the
// page's viewer and returns its message.
func sourceError(ctx context.Context, t *testing.T, b *browser) string {
	t.Helper()
	var msg string
	b.evaluate(ctx, t, `new Promise((resolve) => {
  const poll = () => {
    for (const l of window.viewer?.layerManager.managedLayers ?? []) {
      for (const s of l.layer?.dataSources ?? []) {
        if (s.loadState?.error !== undefined) { resolve(String(s.loadState.error.message ?? s.loadState.error)); return; }
      }
    }
    requestAnimationFrame(poll);
  };
  poll();
})`, &msg)
	return msg
}

// checkRendered waits for the viewer, takes screenshots (each one a new
// frame) until the ramp is there, five at most, and fails the test with
// the last reason otherwise.
func checkRendered(ctx context.Context, t *testing.T, b *browser) {
	t.Helper()
	var err error
	for range 5 {
		waitReady(ctx, t, b)
		shot := b.screenshot(ctx, t)
		if err = rampCheck(shot); err == nil {
			return
		}
		keepArtifact(t, strings.ReplaceAll(t.Name(), "/", "_")+".png", shot)
	}
	t.Errorf("neuroglancer did not draw the volume: %v", err)
}

// failedLoads returns the requests chromium reports failed (CORS refusals
// among them), with the reason.
func failedLoads(b *browser, prefix string) []string {
	var urls = map[string]string{}
	for _, m := range b.eventsOf("Network.requestWillBeSent") {
		var p struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		json.Unmarshal(m.Params, &p)
		urls[p.RequestID] = p.Request.URL
	}
	var failed []string
	for _, m := range b.eventsOf("Network.loadingFailed") {
		var p struct {
			RequestID       string          `json:"requestId"`
			ErrorText       string          `json:"errorText"`
			CorsErrorStatus json.RawMessage `json:"corsErrorStatus"`
		}
		json.Unmarshal(m.Params, &p)
		if u := urls[p.RequestID]; strings.HasPrefix(u, prefix) {
			failed = append(failed, fmt.Sprintf("%s: %s %s", u, p.ErrorText, p.CorsErrorStatus))
		}
	}
	return failed
}

// chunkGETs returns the log lines of `volfs serve` answering a GET below
// dir (a path such as /pc/) with data: 200 or 206, metadata files aside.
func chunkGETs(s *served, dir string) []string {
	re := regexp.MustCompile(`msg=request method=GET path=` + regexp.QuoteMeta(dir) + `(\S+) .*code=(200|206) `)
	var out []string
	for _, line := range strings.Split(s.log.String(), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch filepath.Base(m[1]) {
		case "info", ".zarray", ".zattrs", ".zgroup", "zarr.json", "attributes.json":
			continue
		}
		out = append(out, m[1])
	}
	return out
}

// TestNeuroglancer opens `volfs serve` in neuroglancer, the npm release
// bundled here, in a headless chromium with software WebGL: the viewer page
// from one origin, the data from the server on another, so that CORS is
// checked as a browser checks it. For precomputed, Zarr v2 (zarr://) and
// Zarr v3 (zarr3://) sources of one ramp, the test asserts that the
// server answered chunk GETs with data, that chromium reports no failed
// request, and that the screenshot holds the ramp drawn by value. The same
// page then opens the FUSE mount of the precomputed layer through
// `python3 -m http.server`. Through a proxy that strips the CORS headers,
// the same check fails as it must: chromium refuses the info, no chunk is
// read and nothing is drawn.
func TestNeuroglancer(t *testing.T) {
	chromium := requireTool(t, "chromium")
	modules := requireNeuroglancer(t)
	requireZarr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	viewer := buildNeuroglancer(t, modules)
	page := httptest.NewServer(http.FileServer(http.Dir(viewer)))
	defer page.Close()
	src := t.TempDir()
	run(t, python, "-c", gradientPython, src)
	// The viewer's page is another origin than the server's: it may read
	// it only when named (and a loopback server refuses any other).
	s := startServe(t, "--cors-origin", page.URL, src)

	for _, tc := range []struct {
		name, source, dir string
		dims              [3]string
		unit              float64
		units             string
	}{
		{"precomputed", "precomputed://" + s.url + "pc", "/pc/", pcDims, 8e-9, "m"},
		{"zarr v2", "zarr://" + s.url + "v2.zarr", "/v2.zarr/", zarrDims, 1, ""},
		{"zarr v3", "zarr3://" + s.url + "v3.zarr", "/v3.zarr/", zarrDims, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			b := openViewer(ctx, t, chromium, page.URL+"/", ngState(tc.source, tc.dims, tc.unit, tc.units))
			checkRendered(ctx, t, b)
			if f := failedLoads(b, s.url); len(f) > 0 {
				t.Errorf("chromium reports failed requests to volfs serve:\n%s", strings.Join(f, "\n"))
			}
			if got := chunkGETs(s, tc.dir); len(got) == 0 {
				t.Errorf("volfs serve answered no chunk GET below %s with data:\n%s", tc.dir, s.log)
			} else {
				t.Logf("chunks read: %v", got)
			}
		})
	}

	t.Run("CORS stripped", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		target, err := url.Parse(s.url)
		if err != nil {
			t.Fatal(err)
		}
		// The proxy's own address is loopback too, and SetURL sends the
		// Host volfs serve accepts.
		proxy := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
			ModifyResponse: func(r *http.Response) error {
				for k := range r.Header {
					if strings.HasPrefix(k, "Access-Control-") {
						r.Header.Del(k)
					}
				}
				return nil
			},
		}
		stripped := httptest.NewServer(proxy)
		defer stripped.Close()
		before := len(chunkGETs(s, "/pc/"))
		b := openViewer(ctx, t, chromium, page.URL+"/", ngState("precomputed://"+stripped.URL+"/pc", pcDims, 8e-9, "m"))
		b.waitEvent(ctx, t, "request refused for CORS", func(m cdpMessage) bool {
			return m.Method == "Network.loadingFailed" && bytes.Contains(m.Params, []byte(`"corsErrorStatus"`))
		})
		if f := failedLoads(b, stripped.URL+"/pc/info"); len(f) == 0 || !strings.Contains(f[0], "corsError") {
			t.Errorf("chromium's failed requests for the info: %v; want it refused for CORS", f)
		}
		// Neuroglancer gives up on the source, and says so.
		t.Logf("neuroglancer: %s", sourceError(ctx, t, b))
		if err := rampCheck(b.screenshot(ctx, t)); err == nil {
			t.Errorf("the ramp is drawn although chromium refused the info")
		}
		if n := len(chunkGETs(s, "/pc/")); n != before {
			t.Errorf("%d chunk GETs through the proxy, want none", n-before)
		}
	})

	t.Run("FUSE mount through python3 http.server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		// The mount has no CORS: the page and the mount share one origin,
		// a directory holding the viewer's files and a link to the mount.
		mnt := mountSource(t, filepath.Join(src, "pc"), fs.Options{})
		root := t.TempDir()
		entries, err := os.ReadDir(viewer)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Symlink(filepath.Join(viewer, e.Name()), filepath.Join(root, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(mnt, filepath.Join(root, "pc")); err != nil {
			t.Fatal(err)
		}
		addr := pythonHTTPServer(ctx, t, root)
		b := openViewer(ctx, t, chromium, "http://"+addr+"/", ngState("precomputed://http://"+addr+"/pc", pcDims, 8e-9, "m"))
		checkRendered(ctx, t, b)
		if f := failedLoads(b, "http://"+addr+"/pc/"); len(f) > 0 {
			t.Errorf("chromium reports failed requests to the mount:\n%s", strings.Join(f, "\n"))
		}
	})
}

// pythonHTTPServer runs `python3 -m http.server` over dir on a loopback
// port and returns its address once it accepts connections. It is killed
// at the end of the test.
func pythonHTTPServer(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The listening socket is handed to python as its stdin, so that no
	// other process can take the port between a probe and the bind.
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	defer f.Close()
	cmd := exec.CommandContext(ctx, python, "-c", `
import functools, http.server, socket, sys
sock = socket.socket(fileno=0)
sock.setblocking(True)
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(sock.getsockname(), handler, bind_and_activate=False)
server.socket.close()
server.socket, server.server_address = sock, sock.getsockname()
server.serve_forever()
`, dir)
	cmd.Stdin = f
	var logs quietLog
	cmd.Stderr = &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("python3 http.server:\n%s", logs.String())
		}
	})
	return ln.Addr().String()
}
