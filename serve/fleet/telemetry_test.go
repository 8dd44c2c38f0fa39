package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	gwcore "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/routerd"
)

func backendByName(t *testing.T, r *routerd.Server, name string) routerd.BackendInfo {
	t.Helper()
	for _, b := range r.Backends() {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend %q", name)
	return routerd.BackendInfo{}
}

func chat(t *testing.T, url, session string, words, maxTokens int) (status int, backend string) {
	t.Helper()
	body := fmt.Sprintf(`{"max_tokens":%d,"messages":[{"role":"user","content":%q}]}`, maxTokens, strings.Repeat("word ", words))
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Session-ID", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Stargate-Backend")
}

// TestTelemetryFallbackLive kills one engine's DCGM exporter: the router
// keeps scoring that backend on its other signals, says so, and keeps
// serving.
func TestTelemetryFallbackLive(t *testing.T) {
	f := startSmall(t, "pressure")
	r := f.Routers[0]
	poll.Until(t, 5*time.Second, "hardware signals from both backends", func() bool {
		for _, b := range r.Backends() {
			if b.Stats.Signals == nil || !b.Stats.Signals.Hardware || b.Fallback {
				return false
			}
		}
		return true
	})
	if err := f.Engines[0].SetFaults(engined.Faults{ExporterDead: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll.Until(t, 3*time.Second, "the fallback to show", func() bool { return backendByName(t, r, "local-0").Fallback })
	t.Logf("fallback reported %v after the exporter died", time.Since(start).Round(time.Millisecond))
	if backendByName(t, r, "local-1").Fallback {
		t.Error("the healthy backend fell back too")
	}
	if b := backendByName(t, r, "local-0"); b.Stats.HardwareError == "" || b.State != "ready" {
		t.Errorf("local-0: state %s, hardware error %q", b.State, b.Stats.HardwareError)
	}
	resp, err := http.Get(f.RouterURLs[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(text), `stargate_telemetry_fallback{backend="local-0"} 1`) ||
		!strings.Contains(string(text), `stargate_telemetry_fallback{backend="local-1"} 0`) {
		t.Errorf("metrics do not report the fallback:\n%s", grep(string(text), "fallback"))
	}
	for i := range 10 {
		if code, _ := chat(t, f.RouterURLs[0], fmt.Sprintf("s%d", i), 10, 4); code != http.StatusOK {
			t.Fatalf("request %d: status %d during telemetry loss", i, code)
		}
	}
}

// TestCapabilityLearnedLive gives one engine a context limit far lower than
// it advertises (2,000 of 131,072 tokens): each long request it refuses
// tries the other backend; after three refusals of requests of different
// sizes (the evidence a limit under the floor needs) no later long request
// goes there.
func TestCapabilityLearnedLive(t *testing.T) {
	f := startSmall(t, "round-robin")
	if err := f.Engines[1].SetFaults(engined.Faults{MaxModelLen: 2000}); err != nil {
		t.Fatal(err)
	}
	before := f.Engines[1].Counts().Rejected["status_400"]
	for i := range 12 {
		// 3,000 words and more: about 3,755 tokens, over 2,000; each of
		// its own size, so that each refusal is independent evidence.
		code, backend := chat(t, f.RouterURLs[0], fmt.Sprintf("long-%d", i), 3000+100*i, 4)
		if code != http.StatusOK || backend != "local-0" {
			t.Fatalf("long request %d: status %d from %q", i, code, backend)
		}
	}
	if refused, want := f.Engines[1].Counts().Rejected["status_400"]-before, uint64(gwcore.DefaultLimitConfig().Confirmations); refused != want {
		t.Errorf("local-1 refused %d long requests; round-robin sends it %d, and the router learns from them", refused, want)
	}
	if b := backendByName(t, f.Routers[0], "local-1"); b.Status.LearnedLimit == 0 || b.Status.LearnedLimit > 2000 {
		t.Errorf("learned limit %d, want <= 2000", b.Status.LearnedLimit)
	}
	// Short requests still use both.
	seen := map[string]bool{}
	for i := range 20 {
		_, backend := chat(t, f.RouterURLs[0], fmt.Sprintf("short-%d", i), 10, 4)
		seen[backend] = true
	}
	if !seen["local-1"] {
		t.Errorf("short requests avoid local-1: %v", seen)
	}
}

// TestDrainLive drains a backend through the signed admin API: it takes no
// new request until undrained; an unsigned call is refused.
func TestDrainLive(t *testing.T) {
	f := startSmall(t, "round-robin")
	admin := func(path string, key auth.Key) int {
		req, err := auth.NewSigner(key, "operator").NewRequest("router/"+f.Routers[0].ID(), http.MethodPost, f.RouterURLs[0]+path, nil)
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
	if code := admin("/admin/backends/local-1/drain", auth.RandomKey("fleet")); code != http.StatusUnauthorized {
		t.Fatalf("drain with a wrong key: %d", code)
	}
	if code := admin("/admin/backends/local-1/drain", f.Key); code != http.StatusOK {
		t.Fatalf("drain: %d", code)
	}
	for i := range 8 {
		if code, backend := chat(t, f.RouterURLs[0], fmt.Sprintf("d%d", i), 10, 2); code != http.StatusOK || backend != "local-0" {
			t.Fatalf("while draining: %d from %q", code, backend)
		}
	}
	if st := backendByName(t, f.Routers[0], "local-1").State; st != "draining" && st != "terminated" {
		t.Errorf("state %q while drained", st)
	}
	if code := admin("/admin/backends/local-1/undrain", f.Key); code != http.StatusOK {
		t.Fatalf("undrain: %d", code)
	}
	seen := map[string]bool{}
	for i := range 8 {
		_, backend := chat(t, f.RouterURLs[0], fmt.Sprintf("u%d", i), 10, 2)
		seen[backend] = true
	}
	if !seen["local-1"] {
		t.Errorf("after undrain: %v", seen)
	}
}

func grep(text, sub string) string {
	var out bytes.Buffer
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// TestKillBackendLive kills a backend: its connections are refused at once,
// the router fails it when its heartbeats stop, and every request goes to
// the survivor.
func TestKillBackendLive(t *testing.T) {
	f := startSmall(t, "round-robin")
	if err := f.KillBackend(1); err != nil {
		t.Fatal(err)
	}
	if err := f.KillBackend(7); err == nil {
		t.Error("killing backend 7 of 2 was accepted")
	}
	if resp, err := http.Get(f.GatewayURLs[1] + "/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("the killed gateway still answers: %d", resp.StatusCode)
	}
	for i := range 6 {
		if code, backend := chat(t, f.RouterURLs[0], fmt.Sprintf("k%d", i), 10, 2); code != http.StatusOK || backend != "local-0" {
			t.Fatalf("after the kill: %d from %q", code, backend)
		}
	}
	poll.Until(t, 5*time.Second, "the router fails the killed backend", func() bool {
		return backendByName(t, f.Routers[0], "local-1").State == "failed"
	})
}

// TestSetPathJitter adds exponential jitter both ways on one backend's paths
// and keeps the regions' latency.
func TestSetPathJitter(t *testing.T) {
	f := startSmall(t, "round-robin")
	gw := f.GatewayURLs[1][len("http://"):]
	before := f.RouterPaths[0].Path(gw)
	if err := f.SetPathJitter(1, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if p := f.RouterPaths[0].Path(gw); p.OneWay != before.OneWay || p.Jitter != 20*time.Millisecond || !p.Exponential {
		t.Errorf("router path after the jitter: %+v (before %+v)", p, before)
	}
	if p := f.GatewayPaths[1].Path(f.RouterURLs[0][len("http://"):]); p.Jitter != 20*time.Millisecond || !p.Exponential {
		t.Errorf("gateway path after the jitter: %+v", p)
	}
	if p := f.RouterPaths[0].Path(f.GatewayURLs[0][len("http://"):]); p.Jitter != 0 {
		t.Errorf("the other backend's path changed: %+v", p)
	}
	if err := f.SetPathJitter(2, time.Millisecond); err == nil {
		t.Error("jitter on backend 2 of 2 was accepted")
	}
}

// TestPathDelayLandsOnRequests: the in-process network's delay on a
// router's path to a gateway holds up the router's requests there, both
// ways, whether they travel over a link (the default) or plain HTTP.
func TestPathDelayLandsOnRequests(t *testing.T) {
	f := startSmall(t, "round-robin")
	const oneWay = 150 * time.Millisecond
	for i := range f.GatewayURLs {
		gw := hostOf(f.GatewayURLs[i])
		p := f.RouterPaths[0].Path(gw)
		p.OneWay = oneWay
		f.RouterPaths[0].SetPath(gw, p)
	}
	for i := range 2 {
		start := time.Now()
		if code, _ := chat(t, f.RouterURLs[0], fmt.Sprintf("d%d", i), 10, 2); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		if took := time.Since(start); took < 2*oneWay {
			t.Errorf("request %d took %v; the path alone is %v each way", i, took, oneWay)
		}
	}
	if f.Routers[0].HTTP2Conns() == 0 {
		t.Error("the requests did not travel over HTTP/2")
	}
}

// TestLearnedLimitReachesEveryRouter: one router's long request is refused
// by an engine that enforces less than /v1/models says; its gateway passes
// the limit on in its stats, so the other router knows it without sending
// a long request there itself.
func TestLearnedLimitReachesEveryRouter(t *testing.T) {
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: "round-robin", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Start(context.Background(), cfg, reg, Options{Seed: 1, RoutersPerRegion: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.Engines[1].SetFaults(engined.Faults{MaxModelLen: 2000}); err != nil {
		t.Fatal(err)
	}
	// A limit this far under the advertised one needs three refusals of
	// requests of different sizes.
	confirm := uint64(gwcore.DefaultLimitConfig().Confirmations)
	for i := 0; f.Engines[1].Counts().Rejected["status_400"] < confirm; i++ {
		if i == 20 {
			t.Fatal("router 0 never sent enough long requests to local-1")
		}
		chat(t, f.RouterURLs[0], fmt.Sprintf("long-%d", i), 3000+100*i, 4)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		b := backendByName(t, f.Routers[1], "local-1")
		if b.Status.MaxModelLen > 0 && b.Status.MaxModelLen <= 2000 && b.Status.LearnedLimit == 0 {
			break // from the gateway's stats, not from a refusal of its own
		}
		if time.Now().After(deadline) {
			t.Fatalf("router 1's view of local-1: max_model_len %d, learned %d; want the engine's 2000 from the gateway",
				b.Status.MaxModelLen, b.Status.LearnedLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
