package link

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testGateway is an HTTP server that accepts links, like a gateway.
type testGateway struct {
	url   string
	links *Server
	hs    *http.Server
	// started receives each stream's request context as its handler starts.
	started chan context.Context
	release chan struct{}
	// flooded counts the bytes /flood has written.
	flooded atomic.Int64
}

// handler streams "n" events (?n=), echoes a POST body, or panics (/panic).
func (g *testGateway) handler(w http.ResponseWriter, r *http.Request) {
	if g.started != nil {
		g.started <- r.Context()
	}
	switch r.URL.Path {
	case "/panic":
		panic("boom")
	case "/echo":
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Test"))
		_, _ = w.Write(b)
	case "/stream":
		n := 0
		_, _ = fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range n {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	case "/late": // the header, then a body byte when the test says
		w.WriteHeader(http.StatusOK)
		select {
		case <-g.release:
			_, _ = w.Write([]byte("x"))
		case <-r.Context().Done():
		}
	case "/hang":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case "/flood":
		chunk := make([]byte, 64<<10)
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			g.flooded.Add(int64(n))
			if err != nil {
				return
			}
		}
	default:
		http.NotFound(w, r)
	}
}

func startGateway(t *testing.T, withLinks bool) *testGateway {
	t.Helper()
	g := &testGateway{}
	mux := http.NewServeMux()
	api := http.HandlerFunc(g.handler)
	g.links = NewServer(api, nil)
	if withLinks {
		mux.Handle("GET "+Path, g.links)
	}
	mux.Handle("/", api)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "http://" + ln.Addr().String()
	g.hs = &http.Server{Handler: mux}
	go func() { _ = g.hs.Serve(ln) }()
	t.Cleanup(func() {
		g.links.Close()
		_ = g.hs.Close()
	})
	return g
}

func newTransport(t *testing.T) *Transport {
	tr := NewTransport(&http.Transport{})
	t.Cleanup(tr.Close)
	return tr
}

func get(t *testing.T, ctx context.Context, tr http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr.RoundTrip(req)
}

func TestStreamsShareOneLink(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	const streams, events = 40, 50
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := events + s
			resp, err := get(t, context.Background(), tr, fmt.Sprintf("%s/stream?n=%d", g.url, n))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			var want strings.Builder
			for i := range n {
				fmt.Fprintf(&want, "data: %d\n\n", i)
			}
			if err != nil || string(b) != want.String() || resp.Header.Get("Content-Type") != "text/event-stream" {
				errs <- fmt.Errorf("stream %d: %d bytes, err %w, header %v", s, len(b), err, resp.Header)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := tr.Links(); n != 1 {
		t.Fatalf("%d links open, want every stream on one", n)
	}
}

func TestRequestBodyAndHeaders(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	body := strings.Repeat("x", 100<<10)
	req, _ := http.NewRequest(http.MethodPost, g.url+"/echo", strings.NewReader(body))
	req.Header.Set("X-Test", "yes")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != body || resp.Header.Get("X-Echo") != "yes" {
		t.Fatalf("echo: %d, %d bytes, header %v", resp.StatusCode, len(b), resp.Header)
	}
	resp, err = get(t, context.Background(), tr, g.url+"/missing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || tr.Links() != 1 {
		t.Fatalf("missing path: %d over %d links", resp.StatusCode, tr.Links())
	}
}

func TestLargeBodiesTakePlainHTTP(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	body := strings.Repeat("y", maxLinkBody+1)
	req, _ := http.NewRequest(http.MethodPost, g.url+"/echo", strings.NewReader(body))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != len(body) || tr.Links() != 0 {
		t.Fatalf("a body over a frame: %d bytes back over %d links", len(b), tr.Links())
	}
}

func TestFallbackWhenTheHostRefusesTheUpgrade(t *testing.T) {
	g := startGateway(t, false) // a plain server: the upgrade path is a 404
	tr := newTransport(t)
	for range 3 {
		resp, err := get(t, context.Background(), tr, g.url+"/stream?n=3")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
			t.Fatalf("over plain HTTP: %q", b)
		}
	}
	if tr.Links() != 0 {
		t.Fatal("a link to a host that refused the upgrade")
	}
}

func TestRefusedDialIsADialError(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err := get(t, context.Background(), newTransport(t), "http://"+addr+"/health")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("dialing a closed port: %v; want a dial error", err)
	}
}

func TestCancelAndCloseResetTheStream(t *testing.T) {
	g := startGateway(t, true)
	g.started = make(chan context.Context, 4)
	tr := newTransport(t)

	// The client's context ends mid-stream: the read fails, the handler's
	// context ends.
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := get(t, ctx, tr, g.url+"/hang")
	if err != nil {
		t.Fatal(err)
	}
	hctx := <-g.started
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	resp.Body.Close()
	waitDone(t, hctx, "the handler of a cancelled stream")

	// The body closed before its end: the handler's context ends.
	resp, err = get(t, context.Background(), tr, g.url+"/hang")
	if err != nil {
		t.Fatal(err)
	}
	hctx = <-g.started
	resp.Body.Close()
	waitDone(t, hctx, "the handler of a closed body")
	if tr.Links() != 1 {
		t.Fatal("a reset closed the link")
	}
}

func TestGatewayGoneMidStream(t *testing.T) {
	g := startGateway(t, true)
	g.started = make(chan context.Context, 4)
	tr := newTransport(t)
	resp, err := get(t, context.Background(), tr, g.url+"/hang")
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	g.links.Close() // a crash: the link drops
	if _, err := io.ReadAll(resp.Body); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read after the link dropped: %v; want an error", err)
	}
	resp.Body.Close()
}

func TestShutdownDrains(t *testing.T) {
	g := startGateway(t, true)
	g.started = make(chan context.Context, 4)
	tr := newTransport(t)
	resp, err := get(t, context.Background(), tr, g.url+"/stream?n=1")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	<-g.started

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { g.links.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Shutdown with no stream in flight waited")
	}
	// The router hears GOAWAY and drops the link; the next upgrade is
	// refused (shutting down), so requests go over plain HTTP.
	poll.Until(t, 5*time.Second, "the link to close", func() bool { return tr.Links() == 0 })
	resp, err = get(t, context.Background(), tr, g.url+"/stream?n=2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "data: 0\n\ndata: 1\n\n" || tr.Links() != 0 {
		t.Fatalf("after shutdown: %q over %d links", b, tr.Links())
	}
}

// TestShutdownLetsStreamsFinish: streams in flight when Shutdown begins end
// whole: their last frames leave before the link closes.
func TestShutdownLetsStreamsFinish(t *testing.T) {
	const streams = 20
	for round := range 5 {
		g := startGateway(t, true)
		g.started = make(chan context.Context, streams)
		g.release = make(chan struct{})
		tr := newTransport(t)
		results := make(chan error, streams)
		for range streams {
			go func() {
				resp, err := get(t, context.Background(), tr, g.url+"/late")
				if err != nil {
					results <- err
					return
				}
				defer resp.Body.Close()
				if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "x" {
					results <- fmt.Errorf("body %q, %w", b, err)
					return
				}
				results <- nil
			}()
		}
		for range streams {
			<-g.started
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		done := make(chan struct{})
		go func() { g.links.Shutdown(ctx); close(done) }()
		close(g.release)
		for range streams {
			if err := <-results; err != nil {
				t.Fatalf("round %d: a stream in flight at Shutdown: %v; want its whole body", round, err)
			}
		}
		<-done
		cancel()
	}
}

func TestHandlerPanicFailsOnlyItsStream(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	resp, err := get(t, context.Background(), tr, g.url+"/panic")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a panicking handler answered %d", resp.StatusCode)
	}
	resp, err = get(t, context.Background(), tr, g.url+"/stream?n=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestSlowReaderHoldsOnlyItsStream: a stream nobody reads stops its
// gateway handler at the stream's window (the router buffers no more), the
// link's other streams go on, and reading it reopens the window.
func TestSlowReaderHoldsOnlyItsStream(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	flood, err := get(t, context.Background(), tr, g.url+"/flood")
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Body.Close()
	poll.Until(t, 5*time.Second, "the flood to fill its window", func() bool { return g.flooded.Load() >= StreamWindow })
	for range 3 {
		resp, err := get(t, context.Background(), tr, g.url+"/stream?n=2")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "data: 0\n\ndata: 1\n\n" {
			t.Fatalf("a stream beside the unread one: %q, %v", b, err)
		}
		resp.Body.Close()
	}
	if n := g.flooded.Load(); n != StreamWindow {
		t.Fatalf("the gateway wrote %d bytes to a stream nobody read; want its window, %d", n, StreamWindow)
	}
	st := flood.Body.(*clientStream)
	st.mu.Lock()
	buffered, ferr := len(st.buf)-st.off, st.err
	st.mu.Unlock()
	if buffered > StreamWindow || ferr != nil {
		t.Fatalf("router side: %d bytes buffered, err %v; want at most %d and no error", buffered, ferr, StreamWindow)
	}
	// Reading reopens the window: far more than one window comes through.
	const want = 8 * StreamWindow
	if n, err := io.CopyN(io.Discard, flood.Body, want); err != nil || n != want {
		t.Fatalf("reading the flood: %d bytes, %v", n, err)
	}
}

func TestProtocolErrorsCloseTheLink(t *testing.T) {
	hang, err := appendRequest(http.MethodGet, "/hang", "x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		frames []byte
	}{
		{"a gateway's frame", appendFrame(nil, frameData, 1, []byte("not for a gateway"))},
		{"a short window", appendFrame(nil, frameWindow, 1, []byte{0, 1})},
		{"a window past the limit", appendFrame(appendFrame(nil, frameRequest, 1, hang), frameWindow, 1, appendWindow(nil, StreamWindow))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, true)
			nc, err := net.Dial("tcp", strings.TrimPrefix(g.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = nc.Close() }()
			br, ok := handshake(nc, "x")
			if !ok {
				t.Fatal("handshake refused")
			}
			if _, err := nc.Write(tt.frames); err != nil {
				t.Fatal(err)
			}
			_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("after %s: %v; want the gateway to close the link", tt.name, err)
			}
		})
	}
}

func TestUpgradeNeedsTheToken(t *testing.T) {
	g := startGateway(t, true)
	resp, err := http.Get(g.url + Path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(bufio.NewReader(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), Proto) {
		t.Fatalf("upgrade without the token: %d %q", resp.StatusCode, b)
	}
}

func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("%s still runs", what)
	}
}

// TestHeaderLeavesWithTheBody: as over HTTP/1.1 from net/http, a response's
// header reaches the router with its first body bytes (or a Flush), not at
// WriteHeader; path delays applied when RoundTrip returns (netsim) then
// land on the first token, as they do over plain HTTP.
func TestHeaderLeavesWithTheBody(t *testing.T) {
	g := startGateway(t, true)
	g.release = make(chan struct{})
	tr := newTransport(t)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := get(t, context.Background(), tr, g.url+"/late")
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			r.resp.Body.Close()
		}
		t.Fatalf("RoundTrip returned before the first body byte (%v)", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	b, _ := io.ReadAll(r.resp.Body)
	r.resp.Body.Close()
	if string(b) != "x" {
		t.Fatalf("body %q", b)
	}
	// /hang flushes its header with no body: RoundTrip returns.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := get(t, ctx, tr, g.url+"/hang")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
}

// TestLinkDialsWithDial: a Transport with Dial opens its link through it
// (a router reaching a gateway in its own process dials in memory).
func TestLinkDialsWithDial(t *testing.T) {
	g := startGateway(t, true)
	tr := newTransport(t)
	var mu sync.Mutex
	var dialed []string
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	for i := range 3 {
		resp, err := get(t, context.Background(), tr, g.url+"/stream?n=2")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != "data: 0\n\ndata: 1\n\n" {
			t.Fatalf("request %d: body %q", i, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if host := strings.TrimPrefix(g.url, "http://"); len(dialed) != 1 || dialed[0] != host || tr.Links() != 1 {
		t.Fatalf("dialed %q with %d links; want one dial of %s and one link", dialed, tr.Links(), host)
	}
}
