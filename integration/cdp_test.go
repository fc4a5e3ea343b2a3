package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/net/websocket"
)

// browser is a headless chromium driven over the DevTools protocol: one
// page target, attached with a flat session, whose events are kept.
type browser struct {
	ws      *websocket.Conn
	session string // the page's session id

	mu      sync.Mutex
	nextID  int                        // GUARDED_BY(mu)
	pending map[int]chan cdpMessage    // GUARDED_BY(mu)
	events  []cdpMessage               // GUARDED_BY(mu)
	waiters map[chan struct{}]struct{} // GUARDED_BY(mu); closed on each event
	closed  error                      // GUARDED_BY(mu); why the connection ended
	stderr  *quietLog
}

// cdpMessage is a DevTools protocol message: a reply (ID set) or an event.
type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// startBrowser runs chromium headless with software WebGL (SwiftShader
// through ANGLE) in its own process group, connects to its DevTools
// endpoint and opens one blank page with the Page, Runtime, Network and Log
// domains enabled. Everything chromium started is killed when ctx ends or
// at the end of the test.
func startBrowser(ctx context.Context, t *testing.T, chromium string) *browser {
	t.Helper()
	cmd := exec.Command(chromium,
		"--headless=new", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
		"--remote-debugging-port=0", "--remote-allow-origins=*", "--user-data-dir="+t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-dev-shm-usage", "--window-size=800,600", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	kill := func() { syscall.Kill(-pgid, syscall.SIGKILL) }
	go func() {
		select {
		case <-ctx.Done():
			kill()
		case <-exited:
		}
	}()
	b := &browser{pending: map[int]chan cdpMessage{}, waiters: map[chan struct{}]struct{}{}, stderr: &quietLog{}}
	t.Cleanup(func() {
		kill()
		<-exited
	})
	wsRe := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		sent := false
		for sc.Scan() {
			fmt.Fprintln(b.stderr, sc.Text())
			if m := wsRe.FindStringSubmatch(sc.Text()); m != nil && !sent {
				sent = true
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
		if !sent {
			close(found)
		}
	}()
	var wsURL string
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("chromium exited without a DevTools endpoint:\n%s", b.stderr)
		}
		wsURL = u
	case <-ctx.Done():
		t.Fatalf("chromium named no DevTools endpoint before the deadline:\n%s", b.stderr)
	}
	b.ws, err = websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatalf("connecting to chromium's DevTools at %s: %v", wsURL, err)
	}
	b.ws.MaxPayloadBytes = 64 << 20
	t.Cleanup(func() { b.ws.Close() })
	go b.readLoop()

	var target struct{ TargetID string }
	b.call(ctx, t, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct{ SessionID string }
	b.call(ctx, t, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	for _, domain := range []string{"Page", "Runtime", "Network", "Log"} {
		b.call(ctx, t, b.session, domain+".enable", map[string]any{}, nil)
	}
	return b
}

// readLoop hands replies to their callers and keeps events, until the
// connection ends.
func (b *browser) readLoop() {
	for {
		var m cdpMessage
		err := websocket.JSON.Receive(b.ws, &m)
		b.mu.Lock()
		if err != nil {
			b.closed = fmt.Errorf("cdp: reading from chromium: %w", err)
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			for w := range b.waiters {
				close(w)
				delete(b.waiters, w)
			}
			b.mu.Unlock()
			return
		}
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else {
			b.events = append(b.events, m)
			for w := range b.waiters {
				close(w)
				delete(b.waiters, w)
			}
		}
		b.mu.Unlock()
	}
}

// call sends method with params in session ("" for the browser) and
// decodes the result into result (when not nil). A protocol error, a
// closed connection or the end of ctx fails the test.
func (b *browser) call(ctx context.Context, t *testing.T, session, method string, params, result any) {
	t.Helper()
	b.mu.Lock()
	if b.closed != nil {
		b.mu.Unlock()
		t.Fatalf("cdp %s: %v\nchromium's log:\n%s", method, b.closed, b.stderr)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	p, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	if err := websocket.JSON.Send(b.ws, cdpMessage{ID: id, SessionID: session, Method: method, Params: p}); err != nil {
		t.Fatalf("cdp %s: sending: %v", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatalf("cdp %s: the connection ended before the reply\nchromium's log:\n%s", method, b.stderr)
		}
		if m.Error != nil {
			t.Fatalf("cdp %s: error %d: %s", method, m.Error.Code, m.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				t.Fatalf("cdp %s: decoding %s: %v", method, m.Result, err)
			}
		}
	case <-ctx.Done():
		t.Fatalf("cdp %s: no reply before the deadline (%v)\nchromium's log:\n%s", method, ctx.Err(), b.stderr)
	}
}

// evaluate runs expr in the page, awaiting it when it is a promise, and
// decodes its value (returned by value) into result.
func (b *browser) evaluate(ctx context.Context, t *testing.T, expr string, result any) {
	t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception *struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call(ctx, t, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if e := r.ExceptionDetails; e != nil {
		desc := e.Text
		if e.Exception != nil {
			desc += " " + e.Exception.Description
		}
		t.Fatalf("evaluating %q in the page: %s", expr, desc)
	}
	if result != nil {
		if err := json.Unmarshal(r.Result.Value, result); err != nil {
			t.Fatalf("evaluating %q: decoding %s: %v", expr, r.Result.Value, err)
		}
	}
}

// waitEvent returns the first event kept (from the start of the session)
// for which match is true, waiting for new events until ctx ends; it fails
// the test then, or when the connection ends.
func (b *browser) waitEvent(ctx context.Context, t *testing.T, what string, match func(cdpMessage) bool) cdpMessage {
	t.Helper()
	seen := 0
	for {
		b.mu.Lock()
		for ; seen < len(b.events); seen++ {
			if match(b.events[seen]) {
				m := b.events[seen]
				b.mu.Unlock()
				return m
			}
		}
		if b.closed != nil {
			b.mu.Unlock()
			t.Fatalf("waiting for %s: %v\nchromium's log:\n%s", what, b.closed, b.stderr)
		}
		w := make(chan struct{})
		b.waiters[w] = struct{}{}
		b.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("no %s before the deadline (%v)", what, ctx.Err())
		}
	}
}

// eventsOf returns the events kept so far whose method is method.
func (b *browser) eventsOf(method string) []cdpMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []cdpMessage
	for _, m := range b.events {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

// screenshot returns the page as PNG bytes.
func (b *browser) screenshot(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	var r struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	b.call(ctx, t, b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	return r.Data
}

// quietLog keeps what a process writes, for a failure's message, without
// echoing it (chromium complains at length about the D-Bus it has not).
type quietLog struct {
	mu  sync.Mutex
	buf bytes.Buffer // GUARDED_BY(mu)
}

func (q *quietLog) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.buf.Write(p)
}

func (q *quietLog) String() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.buf.String()
}

// keepArtifact writes data as name into $VOLFS_TEST_ARTIFACTS, when that is
// set, for a look at what a failing check saw.
func keepArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := os.Getenv("VOLFS_TEST_ARTIFACTS")
	if dir == "" {
		return
	}
	os.WriteFile(dir+"/"+name, data, 0o644)
}
