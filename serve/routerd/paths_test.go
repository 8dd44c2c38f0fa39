package routerd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/netsim"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
)

// TestAdminPath sets a path delay through the signed admin API: a good
// signature applies it (requests then pay the round trip), a bad one or a
// bad body changes nothing.
func TestAdminPath(t *testing.T) {
	be := httptest.NewServer(&echoBackend{})
	defer be.Close()
	key := auth.RandomKey("ops")
	cfg := DefaultConfig()
	cfg.Policy, cfg.Key = "round-robin", key
	cfg.Static = []StaticBackend{{Name: "a", URL: be.URL, Capacity: 10}}
	var mu sync.Mutex
	var dispatched []DispatchEvent
	cfg.Hooks.Dispatch = func(d DispatchEvent) { mu.Lock(); dispatched = append(dispatched, d); mu.Unlock() }
	r, err := New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	srv := httptest.NewServer(r.Handler())
	defer func() { srv.Close(); cancel(); <-done }()

	admin := func(k auth.Key, name, body string) int {
		req, err := auth.NewSigner(k, "operator").NewRequest("router/"+cfg.ID, http.MethodPost, srv.URL+"/admin/backends/"+name+"/path", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	unsigned := func() int {
		resp, err := http.Post(srv.URL+"/admin/backends/a/path", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name string
		code func() int
		want int
	}{
		{"wrong key", func() int { return admin(auth.RandomKey("ops"), "a", `{"rtt_ms":300}`) }, http.StatusUnauthorized},
		{"unsigned", unsigned, http.StatusUnauthorized},
		{"unknown field", func() int { return admin(key, "a", `{"rtt":300}`) }, http.StatusBadRequest},
		{"negative", func() int { return admin(key, "a", `{"rtt_ms":-1}`) }, http.StatusBadRequest},
		{"unknown backend", func() int { return admin(key, "zz", `{"rtt_ms":300}`) }, http.StatusNotFound},
	} {
		if got := c.code(); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
		if p := r.Path("a"); p != (netsim.Path{}) {
			t.Fatalf("%s changed the path: %+v", c.name, p)
		}
	}
	if code := admin(key, "a", `{"rtt_ms":300,"jitter_ms":0}`); code != http.StatusOK {
		t.Fatalf("signed path call: %d", code)
	}
	if p := r.Path("a"); p != (netsim.Path{OneWay: 150 * time.Millisecond, Exponential: true}) {
		t.Fatalf("path after the signed call: %+v", p)
	}
	start := time.Now()
	resp, _ := call(t, srv.URL, okBody, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %d", resp.StatusCode)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("a request over a 300 ms path took %v", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dispatched) != 1 || dispatched[0].Backend != "a" || dispatched[0].Router != cfg.ID || dispatched[0].Tokens < 4 {
		t.Errorf("dispatch hook heard %+v", dispatched)
	}
}
