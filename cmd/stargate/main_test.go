package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/internal/slowtest"
	"go.uber.org/goleak"
)

// TestMain runs the test binary as the stargate command when a test starts
// it as a child process (see startProcess), and runs the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	badFleet := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badFleet, []byte("regions:\n  - name: a\n    routerz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown policy", []string{"sim", "--policy", "fastest"}, `unknown policy "fastest"`},
		{"bad rate", []string{"sim", "--rps", "lots"}, `--rps "lots"`},
		{"negative rate", []string{"sim", "--rps", "-5"}, `--rps "-5"`},
		{"bad seed", []string{"sim", "--seed", "x"}, `--seed "x"`},
		{"bad duration", []string{"sim", "--warmup", "soon"}, "invalid argument"},
		{"unknown flag", []string{"sim", "--colour"}, "unknown flag"},
		{"bad format", []string{"sim", "--format", "xml"}, `--format "xml"`},
		{"missing fleet", []string{"sim", "--fleet", filepath.Join(dir, "nope.yaml")}, "neither a built-in fleet"},
		{"invalid fleet file", []string{"sim", "--fleet", badFleet}, "routerz"},
		{"unknown engine", []string{"sim", "--engine", "quarter"}, `unknown profile "quarter"`},
		{"rate too high", []string{"sim", "--rps", "500000"}, "at most 100000"},
		{"window too long", []string{"sim", "--measure", "48h"}, "together at most 24h"},
		{"study without a name", []string{"study"}, "name a study"},
		{"routing: live sweep", []string{"study", "routing", "--live", "--sweep"}, "--sweep runs in the simulator only"},
		{"unknown class", []string{"sim", "--class", "chat"}, `unknown class "chat"`},
		{"slo matrix: unknown policy", []string{"study", "slo-matrix", "--policy", "fastest"}, `unknown policy "fastest"`},
		{"slo matrix: unknown class", []string{"study", "slo-matrix", "--classes", "chat"}, `unknown class "chat"`},
		{"slo matrix: bad tier", []string{"study", "slo-matrix", "--tiers", "4"}, `--tiers: SLO tier "4"`},
		{"slo matrix: no replicates", []string{"study", "slo-matrix", "--replicates", "0"}, "--replicates 0"},
		{"slo matrix: too many steps", []string{"study", "slo-matrix", "--steps", "40"}, "bisection steps must be 1-30"},
		{"slo matrix: missing fleet", []string{"study", "slo-matrix", "--fleet", filepath.Join(dir, "nope.yaml")}, "neither a built-in fleet"},
		{"overlap live quick", []string{"study", "overlap", "--live", "--quick"}, "--quick is for the simulator"},
		{"overlap live zero clients", []string{"study", "overlap", "--live", "--clients", "0"}, "client counts must be >= 1"},
		{"slo matrix: live in parallel", []string{"study", "slo-matrix", "--live", "--parallel", "2"}, "live steps run one at a time"},
		{"slo matrix: empty window", []string{"study", "slo-matrix", "--measure", "0s"}, "--measure > 0"},
		{"overlap zero clients", []string{"study", "overlap", "--clients", "0,4"}, "client counts must be >= 1"},
		{"unknown command", []string{"simulate"}, "unknown command"},
		{"shard not I/N", []string{"study", "routing", "--shard", "2"}, `--shard "2": want I/N`},
		{"shard index too big", []string{"study", "routing", "--shard", "4/4"}, "I must be 0-3"},
		{"shard of zero parts", []string{"study", "routing", "--shard", "0/0"}, "N must be 1-"},
		{"shard empty", []string{"study", "routing", "--shard", ""}, `--shard "": want I/N`},
		{"shard live", []string{"study", "routing", "--live", "--shard", "0/2"}, "cannot be combined with --live"},
		{"shard unknown policy", []string{"study", "routing", "--shard", "0/2", "--policy", "fastest"}, `unknown policy "fastest"`},
		{"merge nothing", []string{"report", "merge"}, "requires at least 1 arg"},
		{"merge missing dir", []string{"report", "merge", filepath.Join(dir, "nope")}, "no such file"},
		{"merge empty dir", []string{"report", "merge", dir}, "holds no part-I-of-N.json"},
		{"gateway listen without engine", []string{"router", "--gateway-listen", "127.0.0.1:0"}, "need --gateway-engine"},
		{"gateway routers unreachable", []string{"router", "--gateway-engine", "http://127.0.0.1:1", "--gateway-router", "http://127.0.0.1:2"}, "--gateway-router needs --gateway-listen"},
		{"bad gateway advertise", []string{"router", "--gateway-engine", "http://127.0.0.1:1", "--gateway-advertise", "https://gw:443"}, "want http://HOST[:PORT]"},
		{"bad local gateway", []string{"router", "--listen", "127.0.0.1:0", "--gateway-engine", "http://127.0.0.1:1", "--gateway-id", "a b"}, `id "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) || !strings.HasPrefix(stderr, "stargate: ") {
				t.Errorf("stderr %q, want a one-message error containing %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "goroutine ") || stdout != "" {
				t.Errorf("unexpected output: stdout %q stderr %q", stdout, stderr)
			}
		})
	}
	// The invalid fleet file's error points at the line.
	_, _, stderr := runCLI(t, "sim", "--fleet", badFleet)
	if !strings.Contains(stderr, "3:") {
		t.Errorf("fleet error has no line number: %q", stderr)
	}
}

// TestSimJSONIsReproducible: the same config and seed give byte-identical
// JSON apart from the wall time.
func TestSimJSONIsReproducible(t *testing.T) {
	args := []string{"sim", "--fleet", "hetero,homo", "--policy", "waw,pulsar-waw", "--rps", "300", "--seed", "1,2",
		"--warmup", "20s", "--measure", "20s", "--format", "json"}
	norm := func(s string) string {
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, s)
		}
		runs := doc["runs"].([]any)
		if len(runs) != 8 {
			t.Fatalf("%d runs, want 8", len(runs))
		}
		for _, r := range runs {
			m := r.(map[string]any)
			for _, k := range []string{"fleet", "policy", "rps", "seed", "engine", "offered_rps", "goodput_rps", "slo_pct",
				"reuse_pct", "ttft_p50_s", "ttft_p99_s", "turns", "failures", "rejections", "wall_s"} {
				if _, ok := m[k]; !ok {
					t.Errorf("run lacks %q", k)
				}
			}
			m["wall_s"] = 0
		}
		b, _ := json.Marshal(doc)
		return string(b)
	}
	code1, out1, err1 := runCLI(t, args...)
	code2, out2, _ := runCLI(t, args...)
	if code1 != 0 || code2 != 0 {
		t.Fatalf("exit %d/%d: %s", code1, code2, err1)
	}
	if norm(out1) != norm(out2) {
		t.Error("two runs with the same seeds differ")
	}
}

func TestSimWritesRecordsAndCSV(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "sim", "--fleet", "homo", "--policy", "waw", "--rps", "200", "--warmup", "10s",
		"--measure", "10s", "--format", "csv", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "fleet,policy,rps,seed") || strings.Count(stdout, "\n") != 2 {
		t.Errorf("csv output:\n%s", stdout)
	}
	for _, name := range []string{"results.json", "table.txt", "records-001-homo-waw-200-seed1.ndjson"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty: %v", name, err)
		}
	}
}

func TestStudyRoutingQuick(t *testing.T) {
	slowtest.Skip(t, "runs the quick study")
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "study", "routing", "--quick", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"pulsar-waw", "waw", "round-robin", "hetero at 450 req/s", "report.html", "request CoV"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "<svg"); n != 4 {
		t.Errorf("report.html has %d charts, want 4 (two per fleet)", n)
	}
	var doc struct {
		Runs []struct {
			Fleet, Policy string
			Goodput       float64 `json:"goodput_rps"`
			Reuse         float64 `json:"reuse_pct"`
			P99           float64 `json:"ttft_p99_s"`
		} `json:"runs"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || json.Unmarshal(raw, &doc) != nil || len(doc.Runs) != 14 {
		t.Fatalf("results.json: %v, %d runs, want 14", err, len(doc.Runs))
	}
	// The study's shape, even in the short version: on the heterogeneous
	// fleet pulsar-waw beats waw clearly; on the homogeneous one they tie.
	get := func(fleet, pol string) (goodput, reuse, p99 float64) {
		for _, r := range doc.Runs {
			if r.Fleet == fleet && r.Policy == pol {
				return r.Goodput, r.Reuse, r.P99
			}
		}
		t.Fatalf("no run for %s %s", fleet, pol)
		return
	}
	pg, pr, pp := get("hetero", "pulsar-waw")
	wg, wr, wp := get("hetero", "waw")
	if pg < 1.05*wg || pr <= wr || pp >= wp {
		t.Errorf("hetero: pulsar-waw goodput %.1f reuse %.1f p99 %.2f vs waw %.1f %.1f %.2f; want pulsar-waw ahead on all three", pg, pr, pp, wg, wr, wp)
	}
	pg, _, _ = get("homo", "pulsar-waw")
	wg, _, _ = get("homo", "waw")
	if pg < 0.97*wg || pg > 1.03*wg {
		t.Errorf("homo: pulsar-waw goodput %.1f vs waw %.1f; want within 3%%", pg, wg)
	}
}

// TestStudySLOMatrixQuick runs a test-sized quick SLO matrix through the
// command line and checks what it prints and writes.
func TestStudySLOMatrixQuick(t *testing.T) {
	slowtest.Skip(t, "runs a quick SLO matrix")
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "study", "slo-matrix", "--quick", "--tiers", "2", "--steps", "4",
		"--policy", "round-robin,least-request", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"baseline_mixed", "multiturn", "best/rr", "cap/rr", "round-robin's", "report.html"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, name := range []string{"results.json", "report.html", "table.txt", "table.md"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	var doc struct {
		Searches []struct {
			Class, Policy string
			Probes        []struct {
				Figures struct{ Sent int } `json:"figures"`
			} `json:"probes"`
		} `json:"searches"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Searches) != 4 {
		t.Fatalf("results.json: %v, %d searches, want 4", err, len(doc.Searches))
	}
	for _, s := range doc.Searches {
		if len(s.Probes) != 6 || s.Probes[0].Figures.Sent == 0 {
			t.Errorf("%s %s: %d probes kept, want 6 with their figures", s.Class, s.Policy, len(s.Probes))
		}
	}
}

// TestSimClass runs a workload class through stargate sim.
func TestSimClass(t *testing.T) {
	code, stdout, stderr := runCLI(t, "sim", "--fleet", "three-site", "--class", "code_heavy", "--policy", "least-request",
		"--rps", "10", "--warmup", "10s", "--measure", "20s", "--cooldown", "10s", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Runs []struct {
			Class   string `json:"class"`
			Started int    `json:"turns_started"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("%v: %s", err, stdout)
	}
	if r := doc.Runs[0]; r.Class != "code_heavy" || r.Started != 200 {
		t.Errorf("run %+v, want code_heavy with 200 turns started in 20 s at 10 req/s", r)
	}
}

// TestEngineServesAndStops: stargate engine answers on its port and stops
// cleanly when its context ends.
func TestEngineServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	codec := make(chan int, 1)
	go func() {
		codec <- run(ctx, []string{"engine", "--listen", "127.0.0.1:0", "--gpus", "2"}, pw, &errOut)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr := strings.TrimSpace(strings.TrimPrefix(line, "stargate engine serving on "))
	resp, err := http.Post(addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"completion_tokens":3`) {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	// A request in flight when the signal comes still finishes: the engine's
	// clock runs until the server has drained. The request is known to be in
	// flight by events, not by polling a gauge (on a loaded machine the
	// engine's clock catches up several steps at once, and a poll can miss
	// the whole run): its first streamed token says it has started, and it
	// cannot have finished before sent+minRun, since every one of its
	// decode steps takes at least the half profile's base 8 ms of the
	// engine's real clock. A test goroutine stalled past that bound tries
	// again with a new request rather than cancel one that may be done.
	const maxTokens = 150
	minRun := time.Duration(maxTokens-1) * time.Duration(engine.HalfProfile().BaseMs*float64(time.Millisecond))
	var inflight chan inflightResult
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		inflight = streamInFlight(t, addr, maxTokens)
		if time.Since(sent) < minRun {
			cancel()
			if time.Since(sent) >= minRun {
				t.Skipf("the test stalled %v around cancel: the request's being in flight is not proven", time.Since(sent))
			}
			break
		}
		if r := <-inflight; r.err != nil { // let the stale one finish first
			t.Fatalf("request %d: %v", attempt, r.err)
		}
		if attempt == 5 {
			t.Fatalf("the test was stalled past %v after each of %d requests' first token", minRun, attempt)
		}
	}
	if r := <-inflight; r.err != nil || r.tokens != maxTokens {
		t.Errorf("request in flight at shutdown: %v, %d tokens; want the whole %d-token stream", r.err, r.tokens, maxTokens)
	}
	if code := <-codec; code != 0 {
		t.Errorf("exit %d: %s", code, errOut.String())
	}
	if code, _, stderr := runCLI(t, "engine", "--profile", "tiny"); code != 2 || !strings.Contains(stderr, "neither a built-in profile") {
		t.Errorf("bad profile: exit %d, %q", code, stderr)
	}
}

func TestPlanCommands(t *testing.T) {
	cdf := filepath.Join("..", "..", "examples", "plan", "chat-cdf.json")
	short := []string{"--cdf", cdf, "--lam", "10", "--seeds", "1", "--warmup", "5s", "--measure", "30s"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append([]string{"plan", "optimize", "--verify-top", "1"}, short...), "Recommended: "},
		{append([]string{"plan", "simulate", "--pools", "short:l4-llama3.1-8b:2048:4,long:h100-llama3.1-8b:32768:2"}, short...), "Categories"},
		{append([]string{"plan", "pareto", "--short-profile", "l4-llama3.1-8b"}, short...), "worst p99 s"},
		{append([]string{"plan", "disagg", "--link-gbs", "50"}, short...), "prefill +"},
		{append([]string{"plan", "compare-routers", "--pools", "all:h100-llama3.1-8b:32768:2", "--policies", "least-request,round-robin"}, short...), "round-robin"},
		{append([]string{"plan", "whatif", "--rates", "5,10", "--pools", "all:h100-llama3.1-8b:32768:2"}, short...), "Rate sweep"},
	} {
		code, stdout, stderr := runCLI(t, tt.args...)
		if code != 0 || !strings.Contains(stdout, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout lacks %q:\n%s", tt.args[:2], code, stderr, tt.want, stdout)
		}
	}
	code, stdout, _ := runCLI(t, append([]string{"plan", "simulate", "--format", "json", "--pools", "all:half:32768:3"}, short...)...)
	var e struct {
		P99 *float64 `json:"ttft_p99_s"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &e) != nil {
		t.Errorf("plan simulate --format json: exit %d, output %q", code, stdout)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "optimize", "--lam", "5"}, "give --cdf FILE or --trace FILE"},
		{[]string{"plan", "optimize", "--cdf", cdf}, "--lam (req/s) is required"},
		{[]string{"plan", "optimize", "--cdf", cdf, "--lam", "5", "--profile", "tpu"}, `profile "tpu" is neither a preset`},
		{[]string{"plan", "simulate", "--cdf", cdf, "--lam", "5"}, "--pools is required"},
		{[]string{"plan", "simulate", "--cdf", cdf, "--lam", "5", "--pools", "a:half:10"}, "name:profile:max_tokens:instances"},
		{[]string{"plan", "optimize", "--cdf", cdf, "--lam", "5", "--format", "xml"}, `--format "xml"`},
		{[]string{"plan", "optimize", "--cdf", cdf, "--lam", "5", "--categories", "prose=2"}, "category mix"},
		{[]string{"plan"}, "name a subcommand"},
		{[]string{"sim", "--trace-rate", "5"}, "need --trace"},
	} {
		if code, _, stderr := runCLI(t, tt.args...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

func TestSimTraceReplay(t *testing.T) {
	var b strings.Builder
	for i := range 200 {
		// Five shared two-block prefixes, then a block of its own.
		doc := i % 5
		b.WriteString(`{"timestamp": ` + strconv.Itoa(i*100) + `, "input_length": 1400, "output_length": 20, "hash_ids": [` +
			strconv.Itoa(doc*10) + `, ` + strconv.Itoa(doc*10+1) + `, ` + strconv.Itoa(1000+i) + "]}\n")
	}
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join("..", "..", "examples", "plan", "trace-fleet.yaml")
	code, stdout, stderr := runCLI(t, "sim", "--fleet", fleet, "--trace", path, "--policy", "pulsar-waw", "--warmup", "2s", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Runs []struct {
			Turns    int     `json:"turns"`
			ReusePct float64 `json:"reuse_pct"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Runs) != 1 {
		t.Fatalf("%v: %s", err, stdout)
	}
	// Requests arriving in [2 s, 19.9 s]: 180; each reuses its two-block
	// prefix (1024 of 1400 tokens) once its document is cached.
	if r := res.Runs[0]; r.Turns != 180 || r.ReusePct < 60 {
		t.Errorf("%d turns, reuse %.1f%%; want 180 and most of 73%%", r.Turns, r.ReusePct)
	}
	if code, _, stderr := runCLI(t, "sim", "--fleet", fleet, "--trace", path, "--warmup", "1h"); code != 2 || !strings.Contains(stderr, "leaves none of the trace") {
		t.Errorf("warm-up past the trace: exit %d, %q", code, stderr)
	}
}

func TestAdvertisedAddr(t *testing.T) {
	tests := []struct{ in, scheme, want string }{
		{"http://10.0.0.5:9001", "http", "10.0.0.5:9001"},
		{"http://gw.example", "http", "gw.example:80"},
		{"http://[::1]:9001/", "http", "[::1]:9001"},
		{"https://gw.example", "http", ""},
		{"https://gw.example", "https", "gw.example:443"},
		{"http://gw.example:9001", "https", ""},
		{"gw.example:9001", "http", ""},
		{"http://gw.example/v1", "http", ""},
	}
	for _, tt := range tests {
		got, err := advertisedAddr(tt.in, tt.scheme)
		if tt.want == "" {
			if err == nil {
				t.Errorf("advertisedAddr(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("advertisedAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

type inflightResult struct {
	tokens int // completion_tokens of the final usage chunk
	err    error
}

// streamInFlight posts a streamed chat request of maxTokens to addr, returns
// once its first token has arrived, and reports on the channel how the rest
// of the stream went: a 200 and a usage chunk before "data: [DONE]".
func streamInFlight(t *testing.T, addr string, maxTokens int) chan inflightResult {
	t.Helper()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, maxTokens)
	r, err := http.Post(addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK {
		_ = r.Body.Close()
		t.Fatalf("streamed request: status %d", r.StatusCode)
	}
	br := bufio.NewReader(r.Body)
	if _, err := br.ReadString('\n'); err != nil { // the first token's event
		_ = r.Body.Close()
		t.Fatalf("streamed request: no first token: %v", err)
	}
	done := make(chan inflightResult, 1)
	go func() {
		defer func() { _ = r.Body.Close() }()
		var res inflightResult
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				res.err = fmt.Errorf("stream ended without [DONE]: %w", err)
				break
			}
			if line == "data: [DONE]\n" {
				break
			}
			var chunk struct {
				Usage *struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &chunk) == nil && chunk.Usage != nil {
				res.tokens = chunk.Usage.CompletionTokens
			}
		}
		done <- res
	}()
	return done
}
