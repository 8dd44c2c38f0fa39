package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/routerd"
)

// TestEngineRestartUnderLoadLive: under steady load, backend local-1's
// engine dies and a new one loads its model before serving. From the
// router's first sight of local-1 Loading to its last, nothing is sent
// there; every request succeeds (the router places what the dead engine
// dropped on local-0); and local-1 takes traffic again once Ready.
func TestEngineRestartUnderLoadLive(t *testing.T) {
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: "least-request", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []routerd.DispatchEvent
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Start(ctx, cfg, reg, Options{Seed: 1, Hooks: func(int) routerd.Hooks {
		return routerd.Hooks{Dispatch: func(e routerd.DispatchEvent) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, e)
		}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	r := f.Routers[0]
	poll.Until(t, 5*time.Second, "both backends ready", func() bool {
		return backendByName(t, r, "local-0").State == "ready" && backendByName(t, r, "local-1").State == "ready"
	})

	// Load: four clients in a loop until told to stop.
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	var codes []int
	var cmu sync.Mutex
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code := ask(f.RouterURLs[0], fmt.Sprintf("c%d-%d", c, i))
				cmu.Lock()
				codes = append(codes, code)
				cmu.Unlock()
			}
		})
	}
	defer halt()
	time.Sleep(500 * time.Millisecond)

	// Watch the router's view of local-1 while it restarts.
	var firstLoading, lastLoading time.Time
	watch := func() string {
		st := backendByName(t, r, "local-1").State
		if st == "loading" {
			now := time.Now()
			if firstLoading.IsZero() {
				firstLoading = now
			}
			lastLoading = now
		}
		return st
	}
	if err := f.KillEngine(1); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "local-1 Loading after its engine died", func() bool { return watch() == "loading" })
	if err := f.RestartEngine(1, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := f.RestartEngine(5, 0); err == nil {
		t.Error("restarting backend 5 of 2 was accepted")
	}
	poll.Until(t, 15*time.Second, "local-1 Ready after the load and the warm-up", func() bool { return watch() == "ready" })
	readyAt := time.Now()
	poll.Until(t, 15*time.Second, "traffic on local-1 again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(sent, func(e routerd.DispatchEvent) bool { return e.Backend == "local-1" && e.At.After(readyAt) })
	})
	halt()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range sent {
		if e.Backend == "local-1" && !e.At.Before(firstLoading) && !e.At.After(lastLoading) {
			t.Errorf("dispatch to local-1 at %v, while the router had it Loading (%v to %v)", e.At.Format("15:04:05.000"), firstLoading.Format("15:04:05.000"), lastLoading.Format("15:04:05.000"))
		}
	}
	cmu.Lock()
	defer cmu.Unlock()
	failed := 0
	for _, c := range codes {
		if c != http.StatusOK {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed through the restart, want none", failed, len(codes))
	}
	t.Logf("%d requests; local-1 Loading at the router for %v", len(codes), lastLoading.Sub(firstLoading).Round(time.Millisecond))
}

// ask sends one short chat request as session, with a hang guard; it
// returns the status (0: no answer).
func ask(url, session string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"max_tokens":3,"messages":[{"role":"user","content":"word word word word word"}]}`))
	req.Header.Set("X-Session-ID", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
