package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/plan"
	"github.com/stargate-llm/stargate/workload"
)

func TestPlanPoolRouterCommands(t *testing.T) {
	cdf := filepath.Join("..", "..", "examples", "plan", "chat-cdf.json")
	short := []string{"--cdf", cdf, "--lam", "10", "--seeds", "1", "--warmup", "5s", "--measure", "30s"}
	pools := "short:l4-llama3.1-8b:1024:4,long:h100-llama3.1-8b:32768:3"
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{append([]string{"plan", "compare-routers", "--pools", pools}, short...),
			[]string{"length ", "compress-and-route:gamma=1.5", "spillover", "least-loaded", "random", "short ", " / long "}},
		{append([]string{"plan", "compare-policies", "--pools", pools, "--policies", "least-request,round-robin"}, short...), []string{"round-robin"}},
		{append([]string{"plan", "simulate", "--pools", pools, "--gamma", "1.5"}, short...), []string{"Pool router compress-and-route:gamma=1.5", "share%"}},
		{append([]string{"plan", "simulate", "--pools", pools, "--pool-router", "model:a=short,fallback=long", "--models", "a=0.5,b=0.5"}, short...),
			[]string{"Pool router model:a=short,fallback=long"}},
		{append([]string{"plan", "optimize", "--verify-top", "1", "--layout", "two", "--thresholds", "1024", "--gamma", "1.25,2"}, short...),
			[]string{"Recommended: "}},
		{append([]string{"plan", "whatif", "--rates", "5", "--pools", pools, "--pool-router", "spillover:threshold=0.5"}, short...), []string{"Rate sweep"}},
		{append([]string{"plan", "estimate-error", "--thresholds", "1024"}, short...), []string{"length:estimate=mean", "@1024 short%"}},
	} {
		code, stdout, stderr := runCLI(t, tt.args...)
		for _, w := range tt.want {
			if code != 0 || !strings.Contains(stdout, w) {
				t.Errorf("%v: exit %d, stderr %q, stdout lacks %q:\n%s", tt.args[:2], code, stderr, w, stdout)
				break
			}
		}
	}
	// The old meaning of compare-routers still answers, with a note.
	code, stdout, stderr := runCLI(t, append([]string{"plan", "compare-routers", "--pools", pools, "--policies", "least-request"}, short...)...)
	if code != 0 || !strings.Contains(stdout, "least-request") || !strings.Contains(stderr, "deprecated") {
		t.Errorf("compare-routers --policies: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	// The optimizer searched both gammas.
	code, stdout, _ = runCLI(t, append([]string{"plan", "optimize", "--verify-top", "1", "--layout", "two", "--thresholds", "1024", "--gamma", "1.25,2", "--format", "json"}, short...)...)
	var res plan.Optimized
	if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil {
		t.Fatalf("optimize --gamma json: exit %d", code)
	}
	seen := map[string]bool{}
	for _, c := range res.Candidates {
		seen[c.PoolRouter] = true
	}
	if len(seen) != 2 {
		t.Errorf("optimize --gamma 1.25,2 sized with routers %v, want two", seen)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool-router", "fastest"}, `unknown pool router "fastest"`},
		{[]string{"--pool-router", "compress-and-route:gamma=0"}, "gamma="},
		{[]string{"--pool-router", "spillover", "--gamma", "1.5"}, "--gamma goes with --pool-router compress-and-route"},
		{[]string{"--pool-router", "compress-and-route:gamma=2", "--gamma", "1.5"}, "give gamma once"},
		{[]string{"--gamma", "1.5,2"}, "give one value here"},
		{[]string{"--gamma", "x"}, "gamma="},
		{[]string{"--pool-router", "model:a=medium"}, `pool "medium"`},
		{[]string{"--models", "a=0.5"}, "add up to"},
		{[]string{"--classifier-url", "http://127.0.0.1:1/"}, "--classifier-url goes with --pool-router semantic"},
		{[]string{"--pool-router", "semantic:code=long", "--classifier-url", "ftp://x"}, "want an http://"},
		{[]string{"--pool-router", "semantic:code=long", "--classifier-url", "http://127.0.0.1:1/", "--classifier-timeout", "0s"}, "--classifier-timeout"},
	} {
		args := append(append([]string{"plan", "simulate", "--pools", pools}, short...), tt.args...)
		if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and one line with %q", tt.args, code, stderr, tt.want)
		}
	}
	if code, _, stderr := runCLI(t, append([]string{"plan", "compare-routers", "--pools", pools, "--routers", "length", "--routers", "nope"}, short...)...); code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("compare-routers with a bad router: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, append([]string{"plan", "estimate-error", "--estimates", "soon"}, short...)...); code != 2 || !strings.Contains(stderr, "estimate=") {
		t.Errorf("estimate-error with a bad estimate: exit %d, %q", code, stderr)
	}
}

// classifierStub answers code for code, hangs for rag (past the
// classifier's timeout) and fails for prose with a 500.
func classifierStub(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req classifyRequest
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		switch req.Category {
		case "rag":
			select {
			case <-r.Context().Done():
			case <-done:
			case <-time.After(10 * time.Second): // a hang guard
			}
			return
		case "prose":
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"category": req.Category})
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv, &calls
}

func TestHTTPClassifier(t *testing.T) {
	srv, calls := classifierStub(t)
	c, err := newHTTPClassifier(srv.URL, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := c.Classify(ctx, plan.PoolRequest{InputTokens: 100, Category: workload.Code})
	if err != nil || got != "code" {
		t.Errorf("code: %q, %v", got, err)
	}
	if _, err := c.Classify(ctx, plan.PoolRequest{InputTokens: 100, Category: workload.Code}); err != nil || calls.Load() != 1 {
		t.Errorf("a repeated request: %v, %d calls (want the cached answer)", err, calls.Load())
	}
	if _, err := c.Classify(ctx, plan.PoolRequest{InputTokens: 100, Category: workload.Prose}); err == nil || !strings.Contains(err.Error(), "status 500") {
		t.Errorf("a failing classifier: %v", err)
	}
	start := time.Now()
	if _, err := c.Classify(ctx, plan.PoolRequest{InputTokens: 100, Category: workload.RAG}); err == nil {
		t.Error("a hanging classifier answered")
	}
	if time.Since(start) > 5*time.Second { // a hang guard, not a timing assertion
		t.Error("the classifier's timeout did not stop the call")
	}
}

// TestSemanticRouterOverHTTP: plan simulate with the stub: code goes to
// the long pool as classified, prose and rag (failed, timed out) to the
// fallback, and the failures are counted.
func TestSemanticRouterOverHTTP(t *testing.T) {
	srv, _ := classifierStub(t)
	cdf := filepath.Join("..", "..", "examples", "plan", "chat-cdf.json")
	code, stdout, stderr := runCLI(t, "plan", "simulate", "--cdf", cdf, "--lam", "2", "--seeds", "1", "--warmup", "1s", "--measure", "5s",
		"--pools", "short:h100-llama3.1-8b:32768:2,long:h100-llama3.1-8b:65536:2", "--format", "json",
		"--pool-router", "semantic:code=short,fallback=long", "--classifier-url", srv.URL, "--classifier-timeout", "50ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var e plan.Eval
	if err := json.Unmarshal([]byte(stdout), &e); err != nil {
		t.Fatal(err)
	}
	var codeN int
	for _, c := range e.Categories {
		if c.Name == "code" {
			codeN = c.Requests
		}
	}
	if codeN == 0 || e.Pools[0].Requests != codeN || e.Pools[1].Requests != e.Requests-codeN {
		t.Errorf("pools %+v, %d code requests of %d: want code alone in short", e.Pools, codeN, e.Requests)
	}
	if e.ClassifierErrors == 0 {
		t.Error("no classifier failures counted")
	}
}
