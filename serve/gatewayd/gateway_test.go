package gatewayd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/internal/memnet"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testKey = auth.Key{ID: "k", Secret: []byte("0123456789abcdef0123")}

// liveEngine is a mock engine served on addr ("127.0.0.1:0" for any port).
type liveEngine struct {
	srv  *engined.Server
	hs   *http.Server
	addr string
	stop context.CancelFunc
	done chan struct{}
}

func startEngine(t *testing.T, addr string, key auth.Key) *liveEngine {
	t.Helper()
	cfg := engined.DefaultConfig()
	cfg.Key = key
	return serveEngine(t, addr, cfg)
}

// serveEngine starts an engine of cfg on addr ("127.0.0.1:0": any port),
// waiting a moment for the port of a killed engine to free.
func serveEngine(t *testing.T, addr string, cfg engined.Config) *liveEngine {
	t.Helper()
	srv, err := engined.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for range 50 { // the port of a killed engine may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &liveEngine{srv: srv, hs: &http.Server{Handler: srv.Handler()}, addr: ln.Addr().String(), stop: stop, done: make(chan struct{})}
	go func() { srv.Run(ctx); close(e.done) }()
	go func() { _ = e.hs.Serve(ln) }()
	t.Cleanup(e.kill)
	return e
}

// kill drops the engine at once, connections and all, as a crash would.
func (e *liveEngine) kill() {
	_ = e.hs.Close()
	e.stop()
	<-e.done
}

func startGateway(t *testing.T, engineURL string, mutate func(*Config)) (*Server, string) {
	t.Helper()
	g, cancel := newStartedGateway(t, engineURL, mutate)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: g.Handler()}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); cancel(); g.Wait() })
	return g, "http://" + ln.Addr().String()
}

// newStartedGateway is a started gateway (as startGateway's, not yet
// served) and the cancel that stops it.
func newStartedGateway(t *testing.T, engineURL string, mutate func(*Config)) (*Server, context.CancelFunc) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.Engines, cfg.Key, cfg.FenceInterval = "gw", []string{engineURL}, testKey, 20*time.Millisecond
	cfg.OpenDataPlane = true // tests post to the gateway as a client would; security_test.go closes it
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	return g, cancel
}

func post(ctx context.Context, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// forEachLeg runs test over the ways the gateway reaches an engine: net/http
// (the default, on the gateway's own transport or on one set in the
// config) and the h1 client (EngineH1).
func forEachLeg(t *testing.T, test func(t *testing.T, leg func(*Config))) {
	for _, leg := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"net/http", func(*Config) {}},
		{"net/http-set", func(c *Config) { c.Transport = &http.Transport{} }},
		{"h1", func(c *Config) { c.EngineTransport = EngineH1 }},
	} {
		t.Run(leg.name, func(t *testing.T) { test(t, leg.mutate) })
	}
}

// TestEngineLeg: the gateway reaches engines with net/http unless the
// config asks for h1, which takes plain http:// engines only, and refuses
// an unknown engine transport.
func TestEngineLeg(t *testing.T) {
	for _, tt := range []struct {
		engines   []string
		transport http.RoundTripper
		leg       EngineTransport
		wantH1    bool
		wantErr   string
	}{
		{[]string{"http://127.0.0.1:8000"}, nil, "", false, ""},
		{[]string{"http://127.0.0.1:8000"}, nil, EngineNetHTTP, false, ""},
		{[]string{"http://10.0.0.1:8000/", "http://10.0.0.2:8000"}, nil, EngineH1, true, ""},
		{[]string{"http://127.0.0.1:8000"}, &http.Transport{}, EngineH1, true, ""},
		{[]string{"http://127.0.0.1:8000"}, &http.Transport{}, "", false, ""},
		{[]string{"http://10.0.0.1:8000", "https://10.0.0.2:8000"}, nil, EngineH1, false, "plain http:// engines only"},
		{[]string{"http://10.0.0.1:8000"}, nil, "h2", false, `unknown engine transport "h2"`},
	} {
		cfg := DefaultConfig()
		cfg.Engines, cfg.Transport, cfg.EngineTransport = tt.engines, tt.transport, tt.leg
		g, err := New(cfg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("engines %v, leg %q: error %v, want one saying %q", tt.engines, tt.leg, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, h1 := g.leg.(*h1Leg); h1 != tt.wantH1 {
			t.Errorf("engines %v, transport %v, leg %q: the h1 client %v, want %v", tt.engines, tt.transport != nil, tt.leg, h1, tt.wantH1)
		}
	}
}

// TestEngineTransportFlag: the flag value takes the known names only.
func TestEngineTransportFlag(t *testing.T) {
	var v EngineTransport
	if v.String() != "net-http" {
		t.Errorf("default %q, want net-http", v.String())
	}
	for _, name := range []string{"h1", "net-http"} {
		if err := v.Set(name); err != nil || v.String() != name {
			t.Errorf("Set(%q): %v, value %q", name, err, v.String())
		}
	}
	if err := v.Set("nethttp"); err == nil || v != EngineNetHTTP {
		t.Errorf("Set(nethttp): %v, value %q; want an error and the value unchanged", err, v)
	}
}

// TestEngineUnreachable: an engine gone before the request is written
// answers 502 with the reason, and does not quarantine the worker (the
// engine cannot have run it).
func TestEngineUnreachable(t *testing.T) { forEachLeg(t, testEngineUnreachable) }

func testEngineUnreachable(t *testing.T, leg func(*Config)) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, url := startGateway(t, "http://"+eng.addr, leg)
	for i, want := range []int{http.StatusOK, http.StatusBadGateway} {
		if i == 1 {
			eng.kill() // the first request's connection goes with it
			// A kept connection the engine closed is known closed once its
			// end arrives and the client has looked (net/http's reader runs
			// apart); a request that crosses the close could have reached a
			// live engine, and would rightly be uncertain.
			time.Sleep(50 * time.Millisecond)
		}
		resp, err := post(context.Background(), url, `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, body %s; want %d", i, resp.StatusCode, body, want)
		}
		if i == 1 && !strings.Contains(string(body), "engine unreachable") {
			t.Errorf("body %s, want it to say the engine is unreachable", body)
		}
	}
	if q := g.Quarantined(); len(q) != 0 {
		t.Errorf("quarantined %v; a request that never reached the engine is not uncertain", q)
	}
	poll.Until(t, time.Second, "both requests to be booked", func() bool {
		c := g.Counts()
		return c.Completed == 1 && c.Failed[ReasonEngineUnreachable] == 1
	})
}

// TestEngineKilledMidStream kills the engine while it streams: the client
// gets an in-stream error, the worker is quarantined, a request that comes
// meanwhile is refused at once (503, Retry-After: the gateway has no
// admissible worker) instead of going to a worker whose state is unknown, the
// engine's health alone restores nothing, and a fence after the engine
// restarts (with its key) restores the worker. Accounting closes throughout.
func TestEngineKilledMidStream(t *testing.T) { forEachLeg(t, testEngineKilledMidStream) }

func testEngineKilledMidStream(t *testing.T, leg func(*Config)) {
	eng := startEngine(t, "127.0.0.1:0", auth.Key{}) // first life: no fence key
	g, url := startGateway(t, "http://"+eng.addr, leg)

	resp, err := post(context.Background(), url, `{"stream":true,"max_tokens":5000,"messages":[{"role":"user","content":"long answer"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream has begun
		t.Fatal(err)
	}
	eng.kill()
	rest, _ := io.ReadAll(rd)
	resp.Body.Close()
	if !strings.Contains(string(rest), `data: {"error"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream after the kill ends %q; want an SSE error event", tail(string(rest)))
	}
	if strings.Contains(string(rest), "<nil>") || strings.Contains(string(rest), `\u003cnil\u003e`) {
		t.Fatalf("the error event does not say why: %q", tail(string(rest)))
	}
	poll.Until(t, 2*time.Second, "quarantine", func() bool { return len(g.Quarantined()) == 1 })

	// A request while the only worker is quarantined is refused, not held.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	resp, err = post(ctx, url, `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	cancel()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("request during quarantine: %v %v; want a 503 with Retry-After", resp, err)
	}
	resp.Body.Close()

	// The engine comes back without a fence key: healthy, yet the worker
	// stays quarantined.
	eng = startEngine(t, eng.addr, auth.Key{})
	time.Sleep(200 * time.Millisecond) // ten fence intervals
	if len(g.Quarantined()) != 1 {
		t.Fatal("a healthy engine without a fence restored the worker")
	}
	eng.kill()

	// Back with its key: the next fence restores the worker.
	startEngine(t, eng.addr, testKey)
	poll.Until(t, 2*time.Second, "the fence to restore the worker", func() bool { return len(g.Quarantined()) == 0 })
	resp, err = post(context.Background(), url, `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after recovery: %v %v", resp, err)
	}
	resp.Body.Close()

	// The answer can reach the client before the gateway books it.
	poll.Until(t, 2*time.Second, "every request to be booked", func() bool {
		c := g.Counts()
		return c.Completed+sum(c.Failed)+sum(c.Rejected) == c.Accepted
	})
	c := g.Counts()
	ended := c.Completed + sum(c.Failed) + sum(c.Rejected)
	if c.Accepted != 3 || ended != 3 || c.Completed != 1 || c.Failed[ReasonEngineLost] != 1 || c.Rejected[ReasonOverloaded] != 1 {
		t.Errorf("accounting %+v", c)
	}
	g.mu.Lock()
	fences := g.slots.Fences()
	g.mu.Unlock()
	if fences.Recovered != 1 {
		t.Errorf("fences %+v, want one recovery", fences)
	}
}

// TestOperatorRelease restores a worker of an engine that cannot fence,
// only with a signed operator call.
func TestOperatorRelease(t *testing.T) { forEachLeg(t, testOperatorRelease) }

func testOperatorRelease(t *testing.T, leg func(*Config)) {
	eng := startEngine(t, "127.0.0.1:0", auth.Key{})
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) { leg(c); c.UpstreamIdleTimeout = 150 * time.Millisecond })
	if err := eng.srv.SetFaults(engined.Faults{Hang: true}); err != nil {
		t.Fatal(err)
	}
	// A hung engine: the idle timeout makes the end uncertain.
	resp, err := post(context.Background(), url, `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("hung engine: status %d, want 502", resp.StatusCode)
	}
	poll.Until(t, time.Second, "quarantine", func() bool { return len(g.Quarantined()) == 1 })
	_ = eng.srv.SetFaults(engined.Faults{})
	release := func(key auth.Key) int {
		req, _ := auth.NewSigner(key, "operator").NewRequest("gateway/gw", http.MethodPost, url+"/admin/workers/0/release", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := release(auth.Key{ID: "k", Secret: []byte("not-the-right-key!!")}); code != http.StatusUnauthorized || len(g.Quarantined()) != 1 {
		t.Fatalf("release with a wrong key: %d, quarantined %v", code, g.Quarantined())
	}
	if code := release(testKey); code != http.StatusOK || len(g.Quarantined()) != 0 {
		t.Fatalf("release: %d, quarantined %v", code, g.Quarantined())
	}
}

// TestOverloadAnswer503 fills the gateway past its queue bound: the
// overflow gets a 503 with Retry-After, and every request is accounted for.
func TestOverloadAnswer503(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.Admission.MaxConcurrency = 1
		c.Admission.MaxWaitingFactor = 1 // one waits, the third is refused
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"stream":true,"max_tokens":2000,"messages":[{"role":"user","content":"hold"}]}`
	first, err := post(ctx, url, body)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Body.Close()
	_, _ = bufio.NewReader(first.Body).ReadString('\n') // the first is running
	queued := make(chan struct{})
	go func() { // the second waits in the queue: its headers come only when it runs
		defer close(queued)
		if r, err := post(ctx, url, body); err == nil {
			r.Body.Close()
		}
	}()
	poll.Until(t, 2*time.Second, "the second request to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.adm.Waiting() == 1
	})
	resp, err := post(context.Background(), url, `{"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("overflow: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	<-queued
	poll.Until(t, 2*time.Second, "accounting to close", func() bool {
		c := g.Counts()
		return c.Accepted >= 2 && c.Accepted == c.Completed+sum(c.Failed)+sum(c.Rejected) && c.Rejected[ReasonOverloaded] == 1
	})
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func tail(s string) string { return s[max(0, len(s)-200):] }

// slowClient is a ResponseWriter whose first write waits, as a write does
// when the client reads slowly (a shut link window or a full socket).
type slowClient struct {
	*httptest.ResponseRecorder
	wait time.Duration
	once sync.Once
}

func (w *slowClient) Write(p []byte) (int, error) {
	w.once.Do(func() { time.Sleep(w.wait) })
	return w.ResponseRecorder.Write(p)
}

// TestSlowClientIsNotAnIdleEngine: time the gateway spends waiting on its
// client is not time the engine was silent, so a client slower than the
// upstream idle timeout neither fails its stream nor quarantines the worker.
//
// The idle timer is the subject, so the net/http leg runs in a synctest
// bubble: engine, gateway and client share a fake clock and an in-process
// network (memnet), the engine's steps come every 8 ms of that clock, and
// the client's 400 ms against the 100 ms idle timeout are exact whatever the
// machine's load. The h1 leg needs real TCP sockets (it reads them with raw
// syscalls), so there the engine stays prompt on the real clock and the
// timeout is wide (2 s, a client of 3 s): only a stall of the engine of
// seconds could trip it. The h1 client's own rule is tested in internal/h1.
func TestSlowClientIsNotAnIdleEngine(t *testing.T) {
	t.Run("net/http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			network := memnet.New()
			ln, err := network.Listen("engine:80")
			if err != nil {
				t.Fatal(err)
			}
			cfg := engined.DefaultConfig()
			cfg.Key = testKey
			srv, err := engined.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() { srv.Run(ctx); close(ran) }()
			hs := &http.Server{Handler: srv.Handler()}
			go func() { _ = hs.Serve(ln) }()
			tr := &http.Transport{DialContext: network.Dial(nil)}
			g, cancel := newStartedGateway(t, "http://engine:80", func(c *Config) { c.Transport = tr; c.UpstreamIdleTimeout = 100 * time.Millisecond })
			defer func() {
				cancel()
				g.Wait()
				tr.CloseIdleConnections()
				_ = hs.Close()
				stop()
				<-ran
			}()
			checkSlowClient(t, g, 400*time.Millisecond)
		})
	})
	t.Run("h1", func(t *testing.T) {
		eng := startEngine(t, "127.0.0.1:0", testKey)
		g, _ := startGateway(t, "http://"+eng.addr, func(c *Config) { c.EngineTransport = EngineH1; c.UpstreamIdleTimeout = 2 * time.Second })
		checkSlowClient(t, g, 3*time.Second)
	})
}

// checkSlowClient streams a request through g to a client whose first write
// takes wait, longer than g's idle timeout, and wants the whole stream and no
// quarantine.
func checkSlowClient(t *testing.T, g *Server, wait time.Duration) {
	t.Helper()
	w := &slowClient{ResponseRecorder: httptest.NewRecorder(), wait: wait}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	g.Handler().ServeHTTP(w, req)
	body := w.Body.String()
	if w.Code != http.StatusOK || strings.Contains(body, `"error"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("status %d, body ends %q; want the whole stream", w.Code, body[max(0, len(body)-200):])
	}
	if q := g.Quarantined(); len(q) != 0 {
		t.Fatalf("quarantined %v after a slow client", q)
	}
}

// TestTrustsTheRouterInItsProcess: a request whose context carries what the
// router in this process read from it (openai.WithRead) is not parsed again;
// one without is. The body here is not JSON, so only the engine sees that
// when the gateway takes the router's reading.
func TestTrustsTheRouterInItsProcess(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, _ := startGateway(t, "http://"+eng.addr, nil)
	for _, tt := range []struct {
		name      string
		read      bool
		wantParse bool // the gateway's own "not valid JSON" refusal
	}{
		{"over a connection", false, true},
		{"from the router in its process", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`not json`))
			if tt.read {
				req = req.WithContext(openai.WithRead(req.Context(), openai.Read{Prompt: 3, Session: 42}))
			}
			w := httptest.NewRecorder()
			g.Handler().ServeHTTP(w, req)
			parsed := strings.Contains(w.Body.String(), "gateway gw: request body is not valid JSON")
			if w.Code != http.StatusBadRequest || parsed != tt.wantParse {
				t.Errorf("status %d, body %s; want 400, the gateway's own parse %v", w.Code, w.Body, tt.wantParse)
			}
		})
	}
	c := g.Counts()
	if c.Rejected[ReasonBadRequest] != 1 || c.Failed[ReasonEngineRefused] != 1 {
		t.Errorf("counts %+v, want one bad request refused by the gateway and one by the engine", c)
	}
}
