package routerd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoBackend answers every completion with a small JSON body and records the
// headers it saw.
type echoBackend struct {
	mu      sync.Mutex
	headers []http.Header
	status  int
	// direct counts the completions that came without a connection: the
	// router called the handler in process (Config.Local).
	direct int
}

func (e *echoBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	if r.Method != http.MethodPost { // a link upgrade
		http.NotFound(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	e.mu.Lock()
	e.headers = append(e.headers, r.Header.Clone())
	if r.RemoteAddr == "" {
		e.direct++
	}
	status := e.status
	e.mu.Unlock()
	if status != 0 {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"ok"}}]}`))
}

// seen is how many completions the backend got, and how many of those came
// in process.
func (e *echoBackend) seen() (requests, direct int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.headers), e.direct
}

func startRouter(t *testing.T, mutate func(*Config), backends ...*echoBackend) string {
	t.Helper()
	hs := make([]http.Handler, len(backends))
	for i, b := range backends {
		hs[i] = b
	}
	url, _ := startRouterWith(t, mutate, nil, hs...)
	return url
}

// startRouterWith starts a router in front of backends, named a, b, ... .
// A handler given as local is backend a's, in the router's process
// (Config.Local): the router calls it directly, and reaches it over the
// network only for its probes.
func startRouterWith(t *testing.T, mutate func(*Config), local http.Handler, backends ...http.Handler) (string, *Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Policy = "round-robin"
	cfg.ExposeBackend = true // the tests read which backend answered
	if local != nil {
		backends = append([]http.Handler{local}, backends...)
		cfg.Local = &Local{}
	}
	for i, b := range backends {
		srv := httptest.NewServer(b)
		t.Cleanup(srv.Close)
		cfg.Static = append(cfg.Static, StaticBackend{Name: string(rune('a' + i)), URL: srv.URL, Capacity: 10})
	}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if local != nil {
		if err := cfg.Local.Open(cfg.Static[0].URL, local); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv.URL, r
}

// inProcess is how many of n requests should come in process: all of them
// to a local backend, none over the network.
func inProcess(local bool, n int) int {
	if local {
		return n
	}
	return 0
}

func call(t *testing.T, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const okBody = `{"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`

// TestIngressRules checks what the router lets through and what it
// refuses, over the network and to a gateway in its process.
func TestIngressRules(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) { testIngressRules(t, local) })
	}
}

func testIngressRules(t *testing.T, local bool) {
	be := &echoBackend{}
	keys, err := auth.ReadAPIKeys(strings.NewReader("client-key-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(c *Config) { c.APIKeys, c.MaxBodyBytes = keys, 4096 }
	var url string
	if local {
		url, _ = startRouterWith(t, mutate, be)
	} else {
		url = startRouter(t, mutate, be)
	}
	good := map[string]string{"Authorization": "Bearer client-key-0123456789"}
	tests := []struct {
		name   string
		body   string
		header map[string]string
		status int
		want   string
	}{
		{"no key", okBody, nil, 401, "API key"},
		{"wrong key", okBody, map[string]string{"Authorization": "Bearer nope-nope-nope-nope"}, 401, "API key"},
		{"broken JSON", `{"messages": [`, good, 400, "not valid JSON"},
		{"too large", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, good, 413, "larger than 4096"},
		{"max_tokens too big", `{"max_tokens":99999999,"messages":[{"role":"user","content":"hi"}]}`, good, 400, "max_tokens"},
		{"no messages", `{"messages":[]}`, good, 400, "at least one message"},
		{"good", okBody, good, 200, `"ok"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := call(t, url, tt.body, tt.header)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("status %d body %s; want %d with %q", resp.StatusCode, body, tt.status, tt.want)
			}
			if tt.status == 400 && resp.Header.Get("x-should-retry") != "false" {
				t.Errorf("a 400 without x-should-retry: false")
			}
		})
	}
	// What reached the backend: no client credentials, no internal header a
	// client tried to set, and the router's own.
	_, _ = call(t, url, okBody, map[string]string{"Authorization": "Bearer client-key-0123456789",
		"X-Stargate-Worker": "7", "X-Stargate-Router": "evil", "Connection": "X-Foo", "X-Foo": "bar"})
	be.mu.Lock()
	h := be.headers[len(be.headers)-1]
	be.mu.Unlock()
	if h.Get("Authorization") != "" || h.Get("X-Stargate-Worker") != "" || h.Get("X-Stargate-Router") != "router-1" {
		t.Errorf("backend saw %v", h)
	}
	if n, direct := be.seen(); direct != inProcess(local, n) {
		t.Errorf("%d of %d requests came in process, want %d", direct, n, inProcess(local, n))
	}
}

// TestRetryBeforeFirstByte sends to a backend that refuses: the request goes
// to the other, and the router's accounting says so. The refusing backend is
// reached over the network, then in process.
func TestRetryBeforeFirstByte(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			busy, fine := &echoBackend{status: http.StatusServiceUnavailable}, &echoBackend{}
			var url string
			if local {
				url, _ = startRouterWith(t, nil, busy, fine)
			} else {
				url = startRouter(t, nil, busy, fine)
			}
			for range 6 {
				if resp, body := call(t, url, okBody, nil); resp.StatusCode != 200 || resp.Header.Get("X-Stargate-Backend") != "b" || resp.Header.Get("Retry-After") != "" {
					t.Fatalf("status %d from %q (Retry-After %q): %s", resp.StatusCode, resp.Header.Get("X-Stargate-Backend"), resp.Header.Get("Retry-After"), body)
				}
			}
			// Both refuse: a 503 with Retry-After after trying each once.
			fine.mu.Lock()
			fine.status = http.StatusTooManyRequests
			fine.mu.Unlock()
			resp, body := call(t, url, okBody, nil)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "2 backends refused") {
				t.Fatalf("all refusing: %d %s", resp.StatusCode, body)
			}
			if n, direct := busy.seen(); direct != inProcess(local, n) {
				t.Errorf("%d of the refusing backend's %d requests came in process", direct, n)
			}
		})
	}
}

// TestBackendsEndpoint lists static backends with their weights and states.
func TestBackendsEndpoint(t *testing.T) {
	url := startRouter(t, func(c *Config) { c.Policy = "pulsar-waw" }, &echoBackend{}, &echoBackend{})
	time.Sleep(700 * time.Millisecond) // a probe round: static backends' heartbeats
	resp, err := http.Get(url + "/v1/stargate/backends")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v AdminBackends
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Policy != "pulsar-waw" || len(v.Backends) != 2 {
		t.Fatalf("%+v", v)
	}
	for _, b := range v.Backends {
		if b.State != "ready" || b.Weight != 10 || !b.Static || b.RTTSeconds <= 0 {
			t.Errorf("backend %+v", b)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	reg := policy.NewRegistry()
	cfg := DefaultConfig()
	cfg.Policy = "fastest"
	cfg.Static = []StaticBackend{{Name: "a", URL: "ftp://x", Capacity: 0}}
	err := cfg.Validate(reg)
	for _, want := range []string{`unknown policy "fastest"`, "is not http(s)", "capacity 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v lacks %q", err, want)
		}
	}
	if err := DefaultConfig().Validate(reg); err == nil || !strings.Contains(err.Error(), "no static backends, no discovery and no HMAC key") {
		t.Errorf("empty config: %v", err)
	}
}

// TestSetDiscovered adds, drains and removes backends found by discovery.
func TestSetDiscovered(t *testing.T) {
	a, b := httptest.NewServer(&echoBackend{}), httptest.NewServer(&echoBackend{})
	defer a.Close()
	defer b.Close()
	cfg := DefaultConfig()
	cfg.Key = auth.RandomKey("k") // no static backends: discovery or registration only
	r, err := New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	names := func() map[string]string {
		out := map[string]string{}
		for _, bi := range r.Backends() {
			out[bi.Name] = bi.State
		}
		return out
	}
	if err := r.SetDiscovered([]Discovered{{Name: "gw-a", URL: a.URL, Ready: true}, {Name: "gw-b", URL: b.URL, Ready: false}}); err != nil {
		t.Fatal(err)
	}
	if got := names(); got["gw-a"] != "ready" || (got["gw-b"] != "draining" && got["gw-b"] != "terminated") {
		t.Fatalf("after discovery: %v", got)
	}
	if err := r.SetDiscovered([]Discovered{{Name: "gw-b", URL: b.URL, Ready: true}}); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 1 || got["gw-b"] != "ready" {
		t.Fatalf("after gw-a left and gw-b became ready: %v", got)
	}
	if err := r.SetDiscovered([]Discovered{{Name: "x", URL: "ftp://x"}}); err == nil {
		t.Fatal("a non-http URL was accepted")
	}
}
