package drive

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
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

// loadProofCooldown follows the turns started in a test's short window to
// their end. How many turns a live fleet completes within a 2 s window
// depends on how busy the machine is (under -race at load average 30 one
// turn did), so the tests sample the turns started in the window and give
// them this long to end: a generous bound that only a hang exceeds.
const loadProofCooldown = 10 * time.Second

// TestDriveFleet drives the small live fleet and checks the measured turns.
func TestDriveFleet(t *testing.T) {
	f := smallFleet(t)
	c := shortConfig(f.RouterURLs...)
	c.Cooldown = loadProofCooldown
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Completed < 1 || s.Unfinished != 0 || s.Good != s.Completed || s.Failures != 0 || s.TTFTP50S <= 0 {
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

// smallFleet starts the small live fleet under pulsar-waw.
func smallFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
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
	t.Cleanup(f.Stop)
	return f
}

// TestDriveClass sends a workload class's open loop with a cool-down: the
// sample is the turns started in the window, ended or not, in the class's
// shape, at its constant rate.
func TestDriveClass(t *testing.T) {
	f := smallFleet(t)
	c := shortConfig(f.RouterURLs...)
	class, err := workload.ClassByName("baseline_mixed")
	if err != nil {
		t.Fatal(err)
	}
	c.Class, c.RPS, c.Cooldown = class, 6, 300*time.Millisecond
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	from, to := class.Lead+c.Warmup, class.Lead+c.Warmup+c.Measure
	// The class's own schedule, drawn again: the driver sends each request
	// at its time or, on a busy machine, later; never earlier and never one
	// the stream did not schedule. Evenly spaced at 6 req/s, 12 fall in the
	// 2 s window, give or take its edges.
	stream, err := class.Stream(c.RPS, c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	scheduled, inWindow := map[uint64]time.Duration{}, 0
	for {
		r := stream.Next()
		at := class.Lead + r.At
		if at >= to {
			break
		}
		scheduled[r.Session] = at
		if at >= from {
			inWindow++
		}
	}
	if inWindow < 11 || inWindow > 13 {
		t.Fatalf("the stream schedules %d requests in the window, want about 12", inWindow)
	}
	all := append(append([]metrics.TurnRecord(nil), res.Records...), res.Unfinished...)
	// How many of them started inside the window depends on how late a busy
	// machine sends them; half is a bound only a stalled driver misses.
	if n := len(all); n < inWindow/2 {
		t.Fatalf("%d turns started in the window, %d scheduled there", n, inWindow)
	}
	sessions := map[uint64]bool{}
	for _, r := range all {
		at, ok := scheduled[r.Session]
		if !ok || r.Start < at || r.Start < from || r.Start >= to || r.PromptTokens < 312 || r.PromptTokens > 712 || sessions[r.Session] {
			t.Fatalf("record %+v, scheduled at %v (%v) (window [%v, %v))", r, at, ok, from, to)
		}
		sessions[r.Session] = true
	}
	for _, r := range res.Unfinished {
		if r.Completed || r.End != to+c.Cooldown {
			t.Fatalf("unfinished record %+v", r)
		}
	}
	if res.Summary.Completed == 0 || res.Summary.Failures != 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
}

// TestDriveClosedLoop runs three clients without think time: never more
// than three turns at once, and every client busy.
func TestDriveClosedLoop(t *testing.T) {
	f := smallFleet(t)
	c := shortConfig(f.RouterURLs...)
	c.Clients, c.RPS, c.Workload.ThinkTimeMean = 3, 0, 0
	c.Cooldown = loadProofCooldown
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Completed < 1 || res.Summary.Unfinished != 0 || res.Summary.Failures != 0 {
		t.Fatalf("summary %+v", res.Summary)
	}
	for _, r := range res.Records {
		overlapping := 0
		for _, o := range res.Records {
			if o.Start <= r.Start && r.Start < o.End {
				overlapping++
			}
		}
		if overlapping > 3 {
			t.Fatalf("%d turns in flight at %v with 3 clients", overlapping, r.Start)
		}
	}
}

// TestFailedTurnEndsSession: a turn that fails after its attempts ends its
// session, as in the simulator, so every session has one record.
func TestFailedTurnEndsSession(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		openai.WriteError(w, http.StatusInternalServerError, "InternalServerError", "broken")
	}))
	defer broken.Close()
	c := shortConfig(broken.URL)
	c.Client.RetryBackoff = time.Millisecond
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, r := range res.Records {
		if r.Completed || r.Attempts != c.Client.MaxAttempts || seen[r.Session] || r.Turn != 0 {
			t.Fatalf("record %+v", r)
		}
		seen[r.Session] = true
	}
	if len(seen) == 0 {
		t.Fatal("no failed turn measured")
	}
}

// TestContextLengthErrorIsNotRetried: a 400 fails the turn at once.
func TestContextLengthErrorIsNotRetried(t *testing.T) {
	var calls atomic.Int64
	tooLong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "maximum context length is 16 tokens")
	}))
	defer tooLong.Close()
	res, err := Run(context.Background(), shortConfig(tooLong.URL))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) == 0 {
		t.Fatal("no turn measured")
	}
	for _, r := range res.Records {
		if r.Attempts != 1 || r.Reason != client.Invalid.String() {
			t.Fatalf("record %+v", r)
		}
	}
}

func TestValidateModes(t *testing.T) {
	class, _ := workload.ClassByName("baseline_mixed")
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"clients and class": {func(c *Config) { c.Clients, c.Class = 2, class }, "use one"},
		"negative clients":  {func(c *Config) { c.Clients = -1 }, "clients must be"},
		"negative cooldown": {func(c *Config) { c.Cooldown = -time.Second }, "cooldown"},
		"closed loop":       {func(c *Config) { c.Clients, c.RPS = 2, 0 }, ""},
	} {
		c := shortConfig("http://127.0.0.1:1")
		tc.edit(&c)
		err := c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

// TestDrivePlan plays a planned stream: each session starts at its planned
// instant, with its own id, at its planned target, and the plan's first
// session past the run's end stops the stream.
func TestDrivePlan(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // X-Session-ID -> target
	target := func(i int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.Header.Get("X-Session-ID")] = i
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"))
		}))
	}
	a, b := target(0), target(1)
	defer a.Close()
	defer b.Close()
	c := shortConfig(a.URL, b.URL)
	c.Warmup, c.Measure, c.Cooldown = 0, time.Second, loadProofCooldown
	c.Workload.TurnsMin, c.Workload.TurnsMax = 1, 1
	planned := []Planned{
		{At: 100 * time.Millisecond, Session: c.Workload.NewSession(9, 41), Target: 1},
		{At: 300 * time.Millisecond, Session: c.Workload.NewSession(9, 7), Target: 0},
		{At: 600 * time.Millisecond, Session: c.Workload.NewSession(9, 12), Target: 1},
		{At: time.Hour, Session: c.Workload.NewSession(9, 99), Target: 0},
	}
	next := 0
	c.Plan = func() Planned {
		p := planned[min(next, len(planned)-1)]
		next++
		return p
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 3 {
		t.Fatalf("%d records, want the 3 planned sessions' turns: %+v", len(res.Records), res.Records)
	}
	for _, p := range planned[:3] {
		id := strconv.FormatUint(p.Session.ID, 10)
		if got, ok := seen[id]; !ok || got != p.Target {
			t.Errorf("session %s reached target %d (seen %v), planned %d", id, got, ok, p.Target)
		}
		for _, r := range res.Records {
			if r.Session == p.Session.ID && (r.Start < p.At || r.Router != p.Target || !r.Completed) {
				t.Errorf("session %s: record %+v, planned at %v to %d", id, r, p.At, p.Target)
			}
		}
	}
	if _, ok := seen["99"]; ok {
		t.Error("the session planned past the end was played")
	}
}

func TestValidatePlan(t *testing.T) {
	c := shortConfig("http://127.0.0.1:1")
	c.Plan = func() Planned { return Planned{At: time.Hour} }
	if err := c.Validate(); err != nil {
		t.Fatalf("a plan alone: %v", err)
	}
	c.Clients = 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "session plan") {
		t.Fatalf("a plan with clients: err = %v", err)
	}
}
