package drive

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func shortConfig(targets ...string) Config {
	w := workload.DefaultConfig()
	w.SystemPromptTokens, w.TurnsMin, w.TurnsMax, w.ThinkTimeMean = 500, 2, 4, 200*time.Millisecond
	w.OutputTokensMin, w.OutputTokensMax = 8, 16
	c := client.DefaultConfig()
	c.AttemptTimeout = 5 * time.Second
	return Config{Targets: targets, RPS: 8, Warmup: 500 * time.Millisecond, Measure: 2 * time.Second, Seed: 1,
		Workload: w, Client: c, Model: "stargate-mock"}
}

// TestDriveFleet drives the small live fleet and checks the measured turns.
func TestDriveFleet(t *testing.T) {
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	scfg, err := fl.SimConfig(config.Run{Policy: "pulsar-waw", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fleet.Start(context.Background(), scfg, reg, fleet.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	res, err := Run(context.Background(), shortConfig(f.RouterURLs...))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Completed < 5 || s.Good != s.Completed || s.Failures != 0 || s.ReusePct <= 0 || s.TTFTP50S <= 0 {
		t.Fatalf("summary %+v", s)
	}
	for _, r := range res.Records {
		if !r.Completed || r.Backend < 0 || r.Backend >= len(res.Backends) || r.OutputTokens < 8 || r.FirstToken <= r.Start || r.End < r.FirstToken {
			t.Fatalf("record %+v (backends %v)", r, res.Backends)
		}
		if !strings.HasPrefix(res.Backends[r.Backend], "local-") {
			t.Fatalf("backend name %q", res.Backends[r.Backend])
		}
	}
}

// TestDriveCountsRejectionsAndErrors drives a target that refuses, then one
// that breaks its streams, and checks the client rules apply.
func TestDriveCountsRejectionsAndErrors(t *testing.T) {
	var calls atomic.Int64
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "1")
		openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "overloaded")
	}))
	defer refuse.Close()
	res, err := Run(context.Background(), shortConfig(refuse.URL))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Completed != 0 || s.Failures == 0 || s.Rejections < 3*s.Failures/2 {
		t.Fatalf("refusing target: %+v", s)
	}
	if calls.Load() < int64(s.Rejections) {
		t.Fatalf("%d calls for %d rejections", calls.Load(), s.Rejections)
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "engine lost"}})
		_, _ = w.Write([]byte("data: " + string(b) + "\n\ndata: [DONE]\n\n"))
	}))
	defer broken.Close()
	res, err = Run(context.Background(), shortConfig(broken.URL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Completed != 0 || res.Summary.Failures == 0 || res.Summary.Rejections != 0 {
		t.Fatalf("broken target: %+v", res.Summary)
	}
	for _, r := range res.Records {
		if r.Reason != client.Errored.String() {
			t.Fatalf("record reason %q", r.Reason)
		}
	}
}

func TestValidate(t *testing.T) {
	c := shortConfig("ftp://x")
	c.RPS = 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "not an http(s) URL") || !strings.Contains(err.Error(), "rps") {
		t.Fatalf("err = %v", err)
	}
}
