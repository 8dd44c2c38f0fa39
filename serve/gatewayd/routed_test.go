package gatewayd

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/serve/wire"
)

// startPushingGateway serves a gateway that reports to routerURL.
func startPushingGateway(t *testing.T, id, engineURL, routerURL string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ID, cfg.Engines, cfg.Key, cfg.Routers = id, []string{engineURL}, testKey, []string{routerURL}
	cfg.Advertise, cfg.ScrapeInterval = "http://"+ln.Addr().String(), 20*time.Millisecond
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: g.Handler()}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); cancel(); g.Wait() })
	return g
}

// TestRouterAvoidsADeadEngine: two vLLM-like backends behind a router; one
// engine dies mid-stream and stays dead. Its gateway's capacity leaves the
// router's view, so every new session completes on the other backend and
// none waits on the dead one.
func TestRouterAvoidsADeadEngine(t *testing.T) {
	cfg := routerd.DefaultConfig()
	cfg.Policy, cfg.Key, cfg.ExposeBackend = "round-robin", testKey, true
	r, err := routerd.New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	rs := httptest.NewServer(r.Handler())
	defer func() { rs.Close(); cancel(); <-done }()

	a, b := startVLLM(t, "127.0.0.1:0", ""), startVLLM(t, "127.0.0.1:0", "")
	startPushingGateway(t, "a", "http://"+a.addr, rs.URL)
	startPushingGateway(t, "b", "http://"+b.addr, rs.URL)
	poll.Until(t, 10*time.Second, "both backends ready", func() bool {
		ready := 0
		for _, st := range r.Backends() {
			if st.State == "ready" {
				ready++
			}
		}
		return ready == 2
	})
	resp, err := post(context.Background(), rs.URL, `{"stream":true,"max_tokens":5000,"messages":[{"role":"user","content":"long answer"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	victim := map[string]*liveEngine{"a": a, "b": b}[resp.Header.Get(wire.HeaderBackend)]
	if victim == nil {
		t.Fatalf("the stream names backend %q", resp.Header.Get(wire.HeaderBackend))
	}
	victim.kill()
	_, _ = io.ReadAll(rd)
	resp.Body.Close()
	if code, _ := session(t, rs.URL, 99); code == 0 {
		t.Fatal("a request hung after the crash")
	}
	poll.Until(t, 10*time.Second, "one backend out of placement", func() bool {
		ready := 0
		for _, st := range r.Backends() {
			if st.State == "ready" {
				ready++
			}
		}
		return ready == 1
	})
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Go(func() { codes[i], _ = session(t, rs.URL, i) })
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("session %d with one engine dead: status %d, want 200 from the other backend", i, c)
		}
	}
}
