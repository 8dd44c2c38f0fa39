package plan

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/workload"
)

func preset(t *testing.T, name string) *Profile {
	t.Helper()
	p, ok := Preset(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	return p
}

func readCDF(t testing.TB, name string) workload.CDF {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "plan", name))
	if err != nil {
		t.Fatal(err)
	}
	cdf, err := workload.ParseCDF(data)
	if err != nil {
		t.Fatal(err)
	}
	return cdf
}

// shortOptions are DES runs short enough for a unit test.
func shortOptions(slo time.Duration) Options {
	o := DefaultOptions(slo)
	o.Seeds = []uint64{1, 2}
	o.Warmup, o.Measure = 10*time.Second, 60*time.Second
	return o
}

// TestOptimizeMeetsTargetAndNextSmallerDoesNot is the planner's end-to-end
// check on three workloads: the fleet optimize recommends meets its P99
// TTFT target in the DES, and every fleet with one instance fewer in one
// pool misses it; a planner built afresh (no shared memo) re-runs the DES
// of each to confirm.
func TestOptimizeMeetsTargetAndNextSmallerDoesNot(t *testing.T) {
	h100, l4, a100 := preset(t, "h100-llama3.1-8b"), preset(t, "l4-llama3.1-8b"), preset(t, "a100-llama3.1-8b")
	tests := []struct {
		name   string
		cdf    string
		share  float64 // input share of a total
		lambda float64
		slo    time.Duration
		choice PoolChoice
	}{
		{"chat", "chat-cdf.json", 0.8, 20, 2 * time.Second, PoolChoice{Short: []*Profile{l4, h100}, Long: []*Profile{h100}}},
		{"rag", "rag-cdf.json", 0.9, 8, 3 * time.Second, PoolChoice{Short: []*Profile{a100}, Long: []*Profile{h100, a100}}},
		{"agent", "agent-cdf.json", 0.95, 3, 8 * time.Second, PoolChoice{Short: []*Profile{h100}, Long: []*Profile{h100}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Workload{CDF: readCDF(t, tt.cdf), InputShare: tt.share, Lambda: tt.lambda}
			pl, err := New(w, shortOptions(tt.slo))
			if err != nil {
				t.Fatal(err)
			}
			res, err := pl.Optimize(context.Background(), tt.choice, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Best == nil {
				t.Fatalf("no fleet met the target: %+v", res.Verified[0])
			}
			best := res.Best
			fresh, _ := New(w, shortOptions(tt.slo))
			e, err := fresh.Evaluate(context.Background(), best.Eval.Fleet, tt.lambda, "")
			if err != nil {
				t.Fatal(err)
			}
			if !e.Pass || float64(e.P99) > tt.slo.Seconds() || e.Requests < 100 {
				t.Fatalf("recommended %s: DES P99 %s s over %d requests, target %v", e.Fleet, e.P99, e.Requests, tt.slo)
			}
			if len(best.Smaller) == 0 && best.Eval.Fleet.Instances() > len(best.Eval.Fleet.Pools) {
				t.Fatalf("no smaller fleet was checked for %s", best.Eval.Fleet)
			}
			for _, s := range best.Smaller {
				se, err := fresh.Evaluate(context.Background(), s.Fleet, tt.lambda, "")
				if err != nil {
					t.Fatal(err)
				}
				if se.Pass || se.Cost >= e.Cost {
					t.Errorf("next smaller %s ($%.2f): DES P99 %s s meets the %v target", se.Fleet, se.Cost, se.P99, tt.slo)
				}
			}
			t.Logf("%s: analytical %s -> DES %s ($%.2f/hr, P99 %s s); smaller: %d fleets miss", tt.name,
				best.Candidate.Fleet, e.Fleet, e.Cost, e.P99, len(best.Smaller))
		})
	}
}

func TestTraceWorkloadReplaysWithReuse(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "traces", "mooncake", "synthetic_trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	reqs, err := workload.ReadMooncake(f)
	if err != nil {
		t.Fatal(err)
	}
	o := shortOptions(10 * time.Second)
	o.Seeds = []uint64{1}
	o.Warmup, o.Measure = 60*time.Second, 120*time.Second
	pl, err := New(Workload{Trace: reqs}, o)
	if err != nil {
		t.Fatal(err)
	}
	wl := pl.Workload()
	fleet := Fleet{Pools: []PoolSpec{{Name: "all", Profile: preset(t, "h100-llama3.1-8b"), MaxTokens: wl.MaxTokens(), Instances: 8}}}
	evals, err := pl.ComparePolicies(context.Background(), fleet, []string{"least-request", "pulsar-waw"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		if e.Requests < 100 || !e.Pass {
			t.Errorf("%s: %d requests, P99 %s s", e.Policy, e.Requests, e.P99)
		}
	}
	if evals[1].ReusePct < 5 || evals[1].ReusePct <= evals[0].ReusePct {
		t.Errorf("prefix affinity (pulsar-waw) reuses %.1f%%, no more than least-request's %.1f%%", evals[1].ReusePct, evals[0].ReusePct)
	}
}

func TestPoolModelByHand(t *testing.T) {
	e := engine.Profile{Name: "e", BaseMs: 10, PerDecodeSeqMs: 1, PerPrefillTokenMs: 0.01, KVTokens: 110_000, MaxSeqs: 100, PrefillChunk: 1000}
	p := &Profile{Name: "e", Engine: &e, CostPerHr: 2}
	samples := []Sample{{In: 1000, Out: 100}, {In: 1000, Out: 100}, {In: 5000, Out: 1000}}
	m, err := NewPoolModel("all", p, samples, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	// Mean total 2,733.3: KV holds 40 of them, below 100 sequences.
	// Budget per prefill step 1000 - 40 + 1 = 961: T = 2 + 99 = 101 (twice)
	// and 6 + 999 = 1005. tau = 10 + 1 x 40 x 400/402.33 + 0.01 x 40 x 2333.3/402.33 ms.
	if m.Slots != 40 || math.Abs(m.Share-1) > 1e-12 {
		t.Fatalf("slots %d share %v, want 40 and 1", m.Slots, m.Share)
	}
	meanT := (101.0 + 101 + 1005) / 3
	tau := (10 + 40*400/meanT + 0.01*40*(7000.0/3)/meanT) / 1000
	if got := m.Step.Seconds(); math.Abs(got-tau) > 1e-9 {
		t.Errorf("step %v s, want %v", got, tau)
	}
	mean := meanT * tau
	cs2 := ((101*101*2+1005*1005)/3.0)/(meanT*meanT) - 1
	if math.Abs(m.MeanService.Seconds()-mean) > 1e-8 || math.Abs(m.CS2-cs2) > 1e-9 {
		t.Errorf("service mean %v cs2 %v, want %v and %v", m.MeanService.Seconds(), m.CS2, mean, cs2)
	}
	if math.Abs(m.Prefill99.Seconds()-6*tau) > 1e-8 {
		t.Errorf("P99 prefill %v, want 6 steps = %v", m.Prefill99.Seconds(), 6*tau)
	}
	// Size: the fewest instances whose queue meets the target, as Queue says.
	n, err := m.Size(20, 5*time.Second, 0.85, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if m.TTFT99(n, 20) > 5 || m.Queue(n, 20).Utilization() > 0.85 {
		t.Errorf("%d instances miss the target", n)
	}
	if below := m.Queue(n-1, 20); n > 1 && below.Utilization() <= 0.85 && m.TTFT99(n-1, 20) <= 5 {
		t.Errorf("%d instances are not the fewest", n)
	}
	if _, err := m.Size(20, time.Duration(5*tau*float64(time.Second)), 0.85, 1000); err == nil || !strings.Contains(err.Error(), "before any queueing") {
		t.Errorf("a target below the prefill time: %v", err)
	}
	if _, err := NewPoolModel("all", p, samples, 0, 200_000); err == nil {
		t.Error("a pool whose largest request exceeds the KV budget was accepted")
	}
}

func TestProfileMappings(t *testing.T) {
	h := preset(t, "h100-llama3.1-8b")
	shape := PoolShape{MeanInput: 2000, MeanContext: 2200, MaxTokens: 16000}
	e := h.EngineFor(shape)
	// KV: (80 GB x 0.9 - 8.03e9 x 2 bytes) / (2 x 32 x 8 x 128 x 2 bytes).
	if want := int(math.Floor((72e9 - 16.06e9) / 131072.0)); e.KVTokens != want {
		t.Errorf("KV tokens %d, want %d", e.KVTokens, want)
	}
	bw := 3350e9 * 0.8
	if want := 16.06e9/bw*1000 + 2; math.Abs(e.BaseMs-want) > 1e-9 {
		t.Errorf("base %v ms, want %v", e.BaseMs, want)
	}
	if want := (2200*131072/bw + 2*8.03e9/(989e12*0.5)) * 1000; math.Abs(e.PerDecodeSeqMs-want) > 1e-12 {
		t.Errorf("per decode seq %v ms, want %v", e.PerDecodeSeqMs, want)
	}
	if h.Cost() != 4 || preset(t, "h100x4-llama3.1-70b").Cost() != 16 {
		t.Error("instance cost is the GPU's times TP")
	}
	m := preset(t, "manual-a100-llama-8b")
	me := m.EngineFor(shape)
	hEff := 0.00012 * 2200 / 2048 * 1000
	if math.Abs(me.BaseMs-12) > 1e-12 || math.Abs(me.PerDecodeSeqMs-hEff) > 1e-12 || math.Abs(me.PerPrefillTokenMs-hEff/2048) > 1e-15 ||
		me.KVTokens != 16*33000 || me.MaxSeqs != 256*2048/16000 {
		t.Errorf("manual mapping %+v", me)
	}
	for _, name := range PresetNames() {
		p := preset(t, name)
		if err := p.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		if err := p.EngineFor(shape).Validate(); err != nil {
			t.Errorf("preset %s maps to an invalid engine profile: %v", name, err)
		}
	}
}

func TestParseProfile(t *testing.T) {
	for _, f := range []string{"manual-profile.yaml", "computed-profile.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "examples", "plan", f))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ParseProfile(f, data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if p.Cost() <= 0 || p.Name == "" {
			t.Errorf("%s: %+v", f, p)
		}
	}
	p, err := ParseProfile("dir/mine.yaml", []byte("engine: {base_ms: 4, per_decode_seq_ms: 0.1, per_prefill_token_ms: 0.05, kv_tokens: 100000, max_seqs: 16}\ncost_per_hr: 3\n"))
	if err != nil || p.Name != "mine" || p.Engine.PrefillChunk != engine.DefaultPrefillChunk {
		t.Errorf("engine profile: %+v %v", p, err)
	}
	for _, tt := range []struct{ in, want string }{
		{"manual: {w: 1}\nextra: 2\n", "unknown field"},
		{"cost_per_hr: 1\n", "exactly one of"},
		{"engine: {base_ms: 4, kv_tokens: 1000, max_seqs: 4}\n", "cost_per_hr"},
		{"manual: {w: 0.01, h: 0, calibration_ctx: 0, chunk: 512, blk_size: 16, total_kv_blks: 10, max_slots: 4, cost_per_hr: 1}\n", "calibration_ctx"},
		{"computed: {hardware: {tflops: 100, bandwidth_gbs: 100, memory_gb: 10, cost_per_hr: 1}, model: {params_b: 70, layers: 80, hidden: 8192, kv_heads: 8, head_dim: 128}, serving: {tp: 1, weight_bytes: 2, kv_bytes: 2, chunk: 2048, kv_util: 0.9, max_slots: 8, mfu: 0.5, bw_util: 0.8}}\n", "no KV room"},
		{"", "empty"},
	} {
		if _, err := ParseProfile("p.yaml", []byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseProfile(%q) = %v, want an error with %q", tt.in, err, tt.want)
		}
	}
}

func TestTooLongRequestsCannotMeetTarget(t *testing.T) {
	w := Workload{CDF: readCDF(t, "chat-cdf.json"), Lambda: 10}
	pl, err := New(w, shortOptions(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cands := pl.Candidates(PoolChoice{Long: []*Profile{preset(t, "h100-llama3.1-8b")}, LongMax: 2048, SingleOnly: true}, 10)
	if len(cands) != 1 || !strings.Contains(cands[0].Err, "longer than every pool") {
		t.Fatalf("candidates %+v, want one that says requests are too long", cands)
	}
	// The DES rejects them and counts them against the SLO.
	f := Fleet{Pools: []PoolSpec{{Name: "all", Profile: preset(t, "h100-llama3.1-8b"), MaxTokens: 2048, Instances: 4}}}
	e, err := pl.Evaluate(context.Background(), f, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if e.TooLong == 0 || e.Pass || !math.IsInf(float64(e.P99), 1) || e.SLOPct > 100*(1-float64(e.TooLong)/float64(e.Requests))+1e-9 {
		t.Errorf("%d too long of %d, P99 %s, SLO %.1f%%: rejections must count", e.TooLong, e.Requests, e.P99, e.SLOPct)
	}
}

func TestParetoAndDisagg(t *testing.T) {
	w := Workload{CDF: readCDF(t, "rag-cdf.json"), Lambda: 8}
	pl, err := New(w, shortOptions(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h := preset(t, "h100-llama3.1-8b")
	pts := pl.Pareto(PoolChoice{Short: []*Profile{preset(t, "a100-llama3.1-8b")}, Long: []*Profile{h}})
	front := 0
	for _, a := range pts {
		if a.Err != "" {
			continue
		}
		dominated := false
		for _, b := range pts {
			if b.Err == "" && b.Cost <= a.Cost && b.P99 <= a.P99 && (b.Cost < a.Cost || b.P99 < a.P99) {
				dominated = true
			}
		}
		if dominated != a.Dominated {
			t.Errorf("threshold %d: dominated %v, marked %v", a.Threshold, dominated, a.Dominated)
		}
		if !a.Dominated {
			front++
		}
	}
	if len(pts) < 3 || front == 0 {
		t.Fatalf("%d points, %d on the front", len(pts), front)
	}
	d, err := pl.Disaggregate(h, DefaultDisagg())
	if err != nil {
		t.Fatal(err)
	}
	if d.Prefill < 1 || d.Decode < 1 || 8 > 0.85*float64(d.Prefill)*d.PrefillRPS+1e-9 || 8 > 0.85*float64(d.Decode)*d.DecodeRPS+1e-9 {
		t.Errorf("disagg %+v does not carry 8 req/s", d)
	}
	if d.Prefill > 1 && 8 <= 0.85*float64(d.Prefill-1)*d.PrefillRPS {
		t.Errorf("%d prefill workers are not the fewest", d.Prefill)
	}
	k := DefaultDisagg()
	k.LinkGBs = 10
	withLink, _ := pl.Disaggregate(h, k)
	if withLink.TTFT <= d.TTFT {
		t.Error("a KV transfer did not add to the TTFT estimate")
	}
	if _, err := pl.Disaggregate(preset(t, "half"), k); err == nil {
		t.Error("a transfer term on a profile without a model was accepted")
	}
	k.PrefillDegrade = 1.5
	if _, err := pl.Disaggregate(h, k); err == nil {
		t.Error("a degrade factor above 1 was accepted")
	}
}

func TestConfidenceAndSecJSON(t *testing.T) {
	lo, hi := confidence([]float64{10, 11, 12})
	// mean 11, sd 1, t(2) = 4.303: 11 -+ 4.303 / sqrt(3).
	if h := 4.303 / math.Sqrt(3); math.Abs(lo-(11-h)) > 1e-12 || math.Abs(hi-(11+h)) > 1e-12 {
		t.Errorf("interval %v-%v", lo, hi)
	}
	if lo, _ := confidence([]float64{1, 2, 3}); lo != 0 {
		t.Errorf("lower end %v, want clipped at 0", lo)
	}
	if lo, hi := confidence([]float64{1, math.Inf(1)}); lo != 1 || !math.IsInf(hi, 1) {
		t.Errorf("with an infinite value: %v-%v", lo, hi)
	}
	b, err := json.Marshal(struct{ A, B Sec }{Sec(math.Inf(1)), 1.23456})
	if err != nil || string(b) != `{"A":null,"B":1.2346}` {
		t.Errorf("json %s %v", b, err)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	cdf := workload.CDF{{1000, 1}}
	for name, tt := range map[string]struct {
		w Workload
		o Options
	}{
		"no workload":   {Workload{Lambda: 1}, DefaultOptions(time.Second)},
		"both":          {Workload{CDF: cdf, Trace: []workload.TraceRequest{{InputTokens: 1}}, Lambda: 1}, DefaultOptions(time.Second)},
		"no rate":       {Workload{CDF: cdf}, DefaultOptions(time.Second)},
		"no target":     {Workload{CDF: cdf, Lambda: 1}, DefaultOptions(0)},
		"cap":           {Workload{CDF: cdf, Lambda: 1}, Options{SLO: time.Second, UtilCap: 2, Policy: "least-request", Seeds: []uint64{1}, Measure: time.Second, MaxInstances: 1}},
		"policy":        {Workload{CDF: cdf, Lambda: 1}, Options{SLO: time.Second, UtilCap: 0.8, Policy: "best", Seeds: []uint64{1}, Measure: time.Second, MaxInstances: 1}},
		"one-row trace": {Workload{Trace: []workload.TraceRequest{{InputTokens: 1}}}, DefaultOptions(time.Second)},
	} {
		if _, err := New(tt.w, tt.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestVerifySaysWhyWhenNoSizeMeetsTarget: a target below the longest
// requests' own prefill time cannot be met by adding instances; the search
// stops and says so.
func TestVerifySaysWhyWhenNoSizeMeetsTarget(t *testing.T) {
	w := Workload{CDF: readCDF(t, "agent-cdf.json"), InputShare: 0.95, Lambda: 3}
	pl, err := New(w, shortOptions(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res, err := pl.Optimize(context.Background(), PoolChoice{Long: []*Profile{preset(t, "h100-llama3.1-8b")}, SingleOnly: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Best != nil || len(res.Verified) != 1 || !strings.Contains(res.Verified[0].Note, "own prefill") {
		t.Fatalf("best %v, verified %+v: want no fleet and a reason", res.Best, res.Verified)
	}
}
