package gatewayd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/telemetry"
)

// startVLLM serves a vLLM-like engine (one worker, no fence) on addr.
func startVLLM(t *testing.T, addr, apiKey string) *liveEngine {
	t.Helper()
	cfg := engined.DefaultConfig()
	cfg.Compat, cfg.APIKey = engined.CompatVLLM, apiKey
	return serveEngine(t, addr, cfg)
}

// logBuffer collects a gateway's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// crashMidStream starts a long stream through the gateway and kills the
// engine once it has begun; it returns when the stream has ended.
func crashMidStream(t *testing.T, url string, eng *liveEngine) {
	t.Helper()
	resp, err := post(context.Background(), url, `{"stream":true,"max_tokens":5000,"messages":[{"role":"user","content":"long answer"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	eng.kill()
	_, _ = io.ReadAll(rd)
	resp.Body.Close()
}

// session runs one short request with a hang guard far above any deadline
// of the gateway's; it returns the status (0: the guard fired).
func session(t *testing.T, url string, i int) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := post(ctx, url, fmt.Sprintf(`{"max_tokens":3,"user":"s%d","messages":[{"role":"user","content":"hi %d"}]}`, i, i))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestRealEngineCrashAndRestart: a vLLM-like engine (one worker, no fence)
// is killed mid-stream and restarted. The quarantine is loud (a WARN naming
// the release command, the gauge), its capacity leaves the stats (Loading),
// and with --recover-on-engine-restart the restarted, idle engine gets its
// worker back: ten new sessions then all complete.
func TestRealEngineCrashAndRestart(t *testing.T) {
	eng := startVLLM(t, "127.0.0.1:0", "")
	var logs logBuffer
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.ScrapeInterval, c.RecoverOnRestart, c.RecoverIdleScrapes = 20*time.Millisecond, true, 3
		c.Advertise, c.KeyFile = "http://10.0.0.7:9001", "/etc/stargate/key"
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	crashMidStream(t, url, eng)
	poll.Until(t, 5*time.Second, "quarantine", func() bool { return len(g.Quarantined()) == 1 })
	if want := "stargate admin release 0 --gateway http://10.0.0.7:9001 --key-file /etc/stargate/key"; !strings.Contains(logs.String(), want) {
		t.Errorf("the quarantine warning lacks the release command %q:\n%s", want, logs.String())
	}
	g.mu.Lock()
	st := g.adm.TakeStats(g.now())
	g.mu.Unlock()
	if st.Capacity != 0 || st.Signals == nil || st.Signals.State != telemetry.Loading {
		t.Errorf("stats with the only worker quarantined: capacity %d, signals %+v; want 0 and Loading", st.Capacity, st.Signals)
	}
	if text := scrapeGateway(t, url); !strings.Contains(text, "stargate_gateway_quarantined_workers 1") {
		t.Errorf("metrics lack the quarantine gauge at 1")
	}

	startVLLM(t, eng.addr, "") // a new process: nothing of the old one survives
	poll.Until(t, 10*time.Second, "recovery after the restart", func() bool { return len(g.Quarantined()) == 0 })
	codes := sessions(t, url, 10)
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("session %d after the restart: status %d, want 200", i, c)
		}
	}
	if text := scrapeGateway(t, url); !strings.Contains(text, `stargate_gateway_recoveries_total{how="engine_restart"} 1`) {
		t.Errorf("metrics do not count the restart recovery:\n%s", grepLines(text, "recoveries"))
	}
}

// TestRealEngineNoFenceStaysQuarantined: without the opt-in, a restarted
// engine without a fence gets nothing back by itself (the fence stays the
// proof), and every request meanwhile ends at once with 503 Retry-After.
func TestRealEngineNoFenceStaysQuarantined(t *testing.T) {
	eng := startVLLM(t, "127.0.0.1:0", "")
	var logs logBuffer
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.ScrapeInterval = 20 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	crashMidStream(t, url, eng)
	startVLLM(t, eng.addr, "")
	poll.Until(t, 5*time.Second, "the no-fence warning", func() bool { return strings.Contains(logs.String(), "engine has no fence (404)") })
	for i := range 5 {
		if code, retry := session(t, url, i); code != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("request %d during quarantine: %d (Retry-After %q), want 503 with Retry-After", i, code, retry)
		}
	}
	if len(g.Quarantined()) != 1 {
		t.Error("the worker left quarantine without a fence or an operator")
	}
}

// TestRealEngineDownEveryRequestEnds: the engine dies and stays dead. No
// request waits past the gateway's deadline: each ends with an answer.
func TestRealEngineDownEveryRequestEnds(t *testing.T) {
	eng := startVLLM(t, "127.0.0.1:0", "")
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.ScrapeInterval, c.MaxQueueWait = 20*time.Millisecond, 500*time.Millisecond
	})
	crashMidStream(t, url, eng)
	codes := sessions(t, url, 10)
	for i, c := range codes {
		if c != http.StatusServiceUnavailable && c != http.StatusBadGateway {
			t.Errorf("request %d with the engine dead: status %d, want 503 or 502", i, c)
		}
	}
	g.mu.Lock()
	admissible := g.admissible()
	g.mu.Unlock()
	if admissible != 0 {
		t.Errorf("admissible workers %d with the engine dead, want 0", admissible)
	}
}

// TestPermitWaitHasADeadline: a request admitted while no worker permit is
// free waits at most MaxQueueWait, then gets 503 with Retry-After.
func TestPermitWaitHasADeadline(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.MaxQueueWait, c.LearnSlots = 300*time.Millisecond, false
		c.Slots.MaxInflightPerWorker, c.Admission.MaxConcurrency = 1, 4 // admission lets in more than the worker holds
	})
	resp, err := post(context.Background(), url, `{"stream":true,"max_tokens":5000,"messages":[{"role":"user","content":"long"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, retry := session(t, url, 1); code != http.StatusServiceUnavailable || retry == "" {
		t.Fatalf("second request with the only permit held: %d (Retry-After %q), want 503 with Retry-After", code, retry)
	}
	if c := g.Counts(); c.Rejected[ReasonQueueTimeout] != 1 {
		t.Errorf("counts %+v, want one queue_timeout rejection", c)
	}
}

// TestEngineAPIKey: a gateway with --engine-api-key-file reaches an engine
// started with --api-key; one without cannot start against it.
func TestEngineAPIKey(t *testing.T) {
	eng := startVLLM(t, "127.0.0.1:0", "sk-engine")
	file := filepath.Join(t.TempDir(), "engine.key")
	if err := os.WriteFile(file, []byte("sk-engine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startGateway(t, "http://"+eng.addr, func(c *Config) { c.EngineAPIKeyFile = file })
	if code, _ := session(t, url, 0); code != http.StatusOK {
		t.Fatalf("with the engine's key: %d, want 200", code)
	}
	cfg := DefaultConfig()
	cfg.Engines, cfg.Key = []string{"http://" + eng.addr}, testKey
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := g.Start(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("start without the engine's key: %v, want a 401", err)
	}
}

// TestLearnSlots: slots per worker come from the engine where it says its
// limit (a stargate engine's max_num_seqs label, SGLang's
// /get_server_info), else from the flag; running more than allowed warns.
func TestLearnSlots(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	learn := func(c *Config) { c.LearnSlots = true }
	g, _ := startGateway(t, "http://"+eng.addr, learn)
	if got, want := g.cfg.Slots.MaxInflightPerWorker, engined.DefaultConfig().Profile.MaxSeqs; got != want {
		t.Errorf("stargate engine: slots %d, want its max_num_seqs %d", got, want)
	}
	g, _ = startGateway(t, "http://"+eng.addr, func(c *Config) { c.LearnSlots = false; c.Slots.MaxInflightPerWorker = 3 })
	if got := g.cfg.Slots.MaxInflightPerWorker; got != 3 {
		t.Errorf("learning off: slots %d, want the flag's 3", got)
	}
	vllm := startVLLM(t, "127.0.0.1:0", "")
	g, _ = startGateway(t, "http://"+vllm.addr, func(c *Config) { c.LearnSlots, c.Slots.MaxInflightPerWorker = true, 11 })
	if got := g.cfg.Slots.MaxInflightPerWorker; got != 11 {
		t.Errorf("vLLM (says nothing): slots %d, want the flag's 11", got)
	}

	sglang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"data":[{"id":"m","max_model_len":4096}]}`)
		case "/metrics":
			_, _ = io.WriteString(w, "sglang:num_running_reqs 9\nsglang:num_queue_reqs 0\n")
		case "/get_server_info":
			_, _ = io.WriteString(w, `{"max_running_requests":7,"tp_size":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer sglang.Close()
	var logs logBuffer
	g, _ = startGateway(t, sglang.URL, func(c *Config) {
		c.ScrapeInterval, c.LearnSlots = 20*time.Millisecond, true
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if got := g.cfg.Slots.MaxInflightPerWorker; got != 7 {
		t.Errorf("SGLang: slots %d, want max_running_requests 7", got)
	}
	poll.Until(t, 5*time.Second, "the over-limit warning", func() bool {
		return strings.Contains(logs.String(), "engine runs more sequences than the gateway allows")
	})
}

func scrapeGateway(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// sessions runs n sessions at once through url and returns their status
// codes, by session.
func sessions(t *testing.T, url string, n int) []int {
	t.Helper()
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range codes {
		wg.Go(func() { codes[i], _ = session(t, url, i) })
	}
	wg.Wait()
	return codes
}
