package study

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

const sec = time.Second

func TestFigures(t *testing.T) {
	ended := []metrics.TurnRecord{
		{Start: 30 * sec, FirstToken: 31 * sec, End: 32 * sec, Completed: true, PromptTokens: 100, CachedTokens: 40},
		{Start: 31 * sec, FirstToken: 33 * sec, End: 34 * sec, Completed: true, PromptTokens: 100},
		{Start: 32 * sec, End: 40 * sec, Attempts: 3, Rejections: 3, Reason: "overloaded"},
	}
	unfinished := []metrics.TurnRecord{
		{Start: 70 * sec, FirstToken: 74 * sec, End: 90 * sec}, // decoding: TTFT known, 4 s
		{Start: 74 * sec, End: 90 * sec, Rejections: 1},        // still waiting: at least 16 s
	}
	f := Figures(12, ended, unfinished)
	want := StepFigures{Rate: 12, Sent: 5, Completed: 2, Failed: 1, Unfinished: 2, Rejections: 4,
		Success: 2.0 / 3, TTFTP50S: 2, TTFTP95S: 16, TTFTP99S: 16, ReusePct: 20}
	if f != want {
		t.Errorf("figures\n got %+v\nwant %+v", f, want)
	}
	if f.Samples() != 5 || f.Sustains(20*sec, 0.5) != true || f.Sustains(15*sec, 0.5) || f.Sustains(20*sec, 0.7) {
		t.Errorf("verdicts wrong for %+v", f)
	}
	if empty := Figures(1, nil, nil); empty.Sustains(time.Hour, 0) {
		t.Error("an empty step sustains")
	}
}

// kneeRunner is a synthetic system whose knees are known: under policy p a
// class behaves as an M/M/1 queue with service rate mu[p] times the class's
// search range top, so the p95 time in system is ln(20)/(mu - rate) and the
// knee for an SLO s is mu - ln(20)/s.
type kneeRunner struct {
	mu    map[string]float64 // fraction of the range top
	hi    map[string]float64 // range top per class
	mutex sync.Mutex
	calls int
}

func (k *kneeRunner) rate(class, pol string) float64 { return k.mu[pol] * k.hi[class] }

func (k *kneeRunner) knee(class, pol string, slo time.Duration) float64 {
	return k.rate(class, pol) - math.Log(20)/slo.Seconds()
}

func (k *kneeRunner) Step(_ context.Context, s StepSpec) (StepFigures, error) {
	k.mutex.Lock()
	k.calls++
	k.mutex.Unlock()
	if s.Windows != DefaultWindows() || s.Seed < 1 {
		return StepFigures{}, errors.New("unexpected step spec")
	}
	p95 := 1e9 // past saturation: never
	if mu := k.rate(s.Class.Name, s.Policy); s.Rate < mu {
		p95 = math.Log(20) / (mu - s.Rate)
	}
	n := int(s.Rate * s.Measure.Seconds())
	return StepFigures{Rate: s.Rate, Sent: n, Completed: n, Success: 1, TTFTP95S: p95}, nil
}

func TestSLOMatrixFindsKnownKnees(t *testing.T) {
	fleet, _ := config.Preset("three-site")
	classes := []string{"baseline_mixed", "very_long"}
	k := &kneeRunner{mu: map[string]float64{"round-robin": 0.4, "least-request": 0.8, "waw": 0.6}, hi: map[string]float64{}}
	cfg, err := fleet.SimConfig(config.Run{Policy: "waw", RPS: 1, Measure: sec}, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range classes {
		c, _ := workload.ClassByName(name)
		_, k.hi[name] = bracket(Capacity(&cfg, c))
	}
	m, err := RunSLOMatrix(context.Background(), SLOMatrixOptions{Fleet: fleet, Runner: k, Mode: "synthetic",
		Policies: []string{"round-robin", "least-request", "waw"}, Classes: classes, Replicates: 2, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	// 2 classes x 3 policies x 3 tiers x 2 replicates.
	if len(m.Searches) != 36 || m.Steps != 8 || m.Replicates != 2 || m.Mode != "synthetic" {
		t.Fatalf("%d searches, %d steps, %d replicates, mode %s", len(m.Searches), m.Steps, m.Replicates, m.Mode)
	}
	probes := 0
	for _, s := range m.Searches {
		c, _ := workload.ClassByName(s.Class)
		info := m.Classes[0]
		if s.Class != info.Name {
			info = m.Classes[1]
		}
		knee := k.knee(s.Class, s.Policy, c.Tiers[s.Tier-1])
		tol := (info.Hi - info.Lo) / 256
		if s.Rate > knee || knee-s.Rate > tol {
			t.Errorf("%s %s tier %d: %.3f req/s, want at most %.3f and within %.3f", s.Class, s.Policy, s.Tier, s.Rate, knee, tol)
		}
		if len(s.Probes) != 10 || s.Samples != int(s.Rate*45) || s.SLOMs != float64(c.Tiers[s.Tier-1].Milliseconds()) {
			t.Errorf("%s %s tier %d: %d probes, %d samples, SLO %v ms", s.Class, s.Policy, s.Tier, len(s.Probes), s.Samples, s.SLOMs)
		}
		for _, p := range s.Probes {
			if p.Sustain != (p.Rate <= knee) || p.Figures.Rate != p.Rate {
				t.Errorf("probe %+v disagrees with the system (knee %.3f)", p, knee)
			}
		}
		probes += len(s.Probes)
	}
	// The tiers of one class, policy and replicate share their common steps.
	if k.calls >= probes || k.calls < probes/3 {
		t.Errorf("%d steps run for %d probes", k.calls, probes)
	}
	rows := m.Rows()
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	for _, r := range rows {
		lr, rr := r.Cells["least-request"], r.Cells["round-robin"]
		if r.Best != "least-request" || math.Abs(r.Ratio-lr.Median/rr.Median) > 1e-12 || r.Ratio < 1.9 {
			t.Errorf("%s tier %d: best %s at %.2fx", r.Class, r.Tier, r.Best, r.Ratio)
		}
		// Both replicates see the same system: the interval is the point.
		if lr.Lo != lr.Median || lr.Hi != lr.Median || len(lr.Rates) != 2 {
			t.Errorf("cell %+v", lr)
		}
		if r.CapacityRatio < 1.66 || r.CapacityRatio > 1.67 {
			t.Errorf("%s: capacity ratio %.3f, want 15/9 on three-site", r.Class, r.CapacityRatio)
		}
	}
	// very_long's rates are low: 45 s at them is under 500 samples for one
	// replicate, but two make it count or not depending on the rate.
	for _, c := range m.Cells() {
		if c.Counts != (c.Samples >= 500) {
			t.Errorf("cell %s %s tier %d: %d samples, counts %v", c.Class, c.Policy, c.Tier, c.Samples, c.Counts)
		}
	}
	var js, html, md bytes.Buffer
	if err := m.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back SLOMatrix
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Searches) != 36 || len(back.Searches[0].Probes) != 10 {
		t.Errorf("JSON round trip: %v", err)
	}
	if err := m.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), "<svg"); n != 2 {
		t.Errorf("report.html has %d charts, want one per class", n)
	}
	tab := m.Table()
	if err := tab.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| baseline_mixed | 2 | 1500 |") || !strings.Contains(md.String(), "least-request") {
		t.Errorf("markdown table:\n%s", md.String())
	}
	if f := m.Findings(); len(f) != 2 || !strings.Contains(f[0], "reaches the 1.75x target") {
		t.Errorf("findings %q", f)
	}
}

func TestSLOMatrixRejectsBadOptions(t *testing.T) {
	fleet, _ := config.Preset("three-site")
	for name, opts := range map[string]SLOMatrixOptions{
		"no fleet":       {},
		"unknown policy": {Fleet: fleet, Policies: []string{"fastest"}},
		"unknown class":  {Fleet: fleet, Classes: []string{"chat"}},
		"tier 4":         {Fleet: fleet, Tiers: []int{4}},
		"no replicates":  {Fleet: fleet, Replicates: -1},
		"too many steps": {Fleet: fleet, Steps: 31},
		"bad windows":    {Fleet: fleet, Windows: Windows{Measure: -sec}},
	} {
		if _, err := RunSLOMatrix(context.Background(), opts); !errors.Is(err, ErrInvalidRun) {
			t.Errorf("%s: err = %v, want ErrInvalidRun", name, err)
		}
	}
}

func TestSLOMatrixDefaultPolicies(t *testing.T) {
	reg := policy.NewRegistry()
	k := &kneeRunner{mu: map[string]float64{}, hi: map[string]float64{}}
	fleet, _ := config.Preset("three-site")
	m, err := RunSLOMatrix(context.Background(), SLOMatrixOptions{Fleet: fleet, Runner: k, Registry: reg,
		Classes: []string{"rag_multidoc"}, Tiers: []int{2}, Steps: 1, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	// Every default policy the registry knows, pressure included.
	want := "round-robin,least-request,power-of-two,waw,pulsar-waw,pressure"
	if got := strings.Join(m.Policies, ","); got != want {
		t.Errorf("policies %s, want %s", got, want)
	}
	if m.Replicates != 1 {
		t.Errorf("quick: %d replicates", m.Replicates)
	}
}

func TestParseTiers(t *testing.T) {
	for in, want := range map[string]string{"1,2,3": "[1 2 3]", "2": "[2]", " 3, 1 ,3": "[1 3]"} {
		got, err := ParseTiers(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("ParseTiers(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "4", "0", "two", ","} {
		if _, err := ParseTiers(in); err == nil {
			t.Errorf("ParseTiers(%q) accepted", in)
		}
	}
}

func TestMedianAndBootstrap(t *testing.T) {
	if median([]float64{3, 1, 2}) != 2 || median([]float64{4, 1, 3, 2}) != 2.5 || !math.IsNaN(median(nil)) {
		t.Error("median")
	}
	lo, hi := bootstrapMedian([]float64{10, 12, 14}, 2000, 0.95, 1)
	if lo < 10 || lo > 12 || hi < 12 || hi > 14 || lo >= hi {
		t.Errorf("interval %v-%v for 10, 12, 14", lo, hi)
	}
	if lo2, hi2 := bootstrapMedian([]float64{10, 12, 14}, 2000, 0.95, 1); lo2 != lo || hi2 != hi {
		t.Error("the bootstrap is not seeded")
	}
	if CapacityRatio([]float64{2, 2, 1}) != 5.0/3 || CapacityRatio(nil) != 0 {
		t.Error("capacity ratio")
	}
}

// TestSLOMatrixQuickSim is a test-sized quick matrix in the simulator: tier
// 2 of the two quick classes, three policies, six bisection steps. It shows
// the matrix's shape: on baseline_mixed the load-aware policy gains about
// the fleet's capacity ratio over round-robin, and on multiturn session
// affinity goes past it.
func TestSLOMatrixQuickSim(t *testing.T) {
	slowtest.Skip(t, "runs a quick SLO matrix")
	fleet, _ := config.Preset("three-site")
	m, err := RunSLOMatrix(context.Background(), SLOMatrixOptions{Fleet: fleet, Quick: true, Tiers: []int{2}, Steps: 6,
		Policies: []string{"round-robin", "least-request", "waw"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := m.Rows()
	if len(rows) != 2 || rows[0].Class != "baseline_mixed" || rows[1].Class != "multiturn" {
		t.Fatalf("rows %+v", rows)
	}
	base, multi := rows[0], rows[1]
	lr := base.Cells["least-request"].Median / base.Cells["round-robin"].Median
	if lr < 0.9*base.CapacityRatio || lr > 1.1*base.CapacityRatio {
		t.Errorf("baseline_mixed: least-request at %.2fx round-robin, want near the capacity ratio %.2fx", lr, base.CapacityRatio)
	}
	if w := multi.Cells["waw"].Median / multi.Cells["round-robin"].Median; w < multi.CapacityRatio {
		t.Errorf("multiturn: waw at %.2fx round-robin, want past the capacity ratio %.2fx", w, multi.CapacityRatio)
	}
	for _, s := range m.Searches {
		for _, p := range s.Probes {
			f := p.Figures
			if f.Sent != f.Completed+f.Failed+f.Unfinished || f.Events == 0 {
				t.Fatalf("%s %s at %.1f req/s: figures do not add up: %+v", s.Class, s.Policy, p.Rate, f)
			}
		}
	}
}
