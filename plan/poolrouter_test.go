package plan

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// twoPools are a short pool of 1024 tokens and a long one of 32768.
func twoPools(shortLoad, longLoad float64) []PoolView {
	return []PoolView{
		{Name: "short", MaxTokens: 1024, Slots: 100, Active: int(shortLoad * 100)},
		{Name: "long", MaxTokens: 32768, Slots: 100, Active: int(longLoad * 100)},
	}
}

func mustRouter(t *testing.T, spec string) PoolRouter {
	t.Helper()
	r, err := ParsePoolRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPoolRouterChoices(t *testing.T) {
	short := PoolRequest{InputTokens: 600, OutputTokens: 100, EstimatedOutput: 100, Category: workload.Prose, Label: "prose"}
	long := PoolRequest{InputTokens: 4000, OutputTokens: 1000, EstimatedOutput: 100, Category: workload.Code, Label: "code"}
	huge := PoolRequest{InputTokens: 40000, OutputTokens: 10, Label: "prose"}
	// 900 + 200 = 1100 > 1024: long by the oracle, short by an estimate of 100.
	border := PoolRequest{InputTokens: 900, OutputTokens: 200, EstimatedOutput: 100, Category: workload.Prose, Label: "prose"}
	coder := border
	coder.Category, coder.Label = workload.Code, "code"
	for _, tc := range []struct {
		spec string
		req  PoolRequest
		load [2]float64
		u    float64
		want int
	}{
		{"length", short, [2]float64{}, 0, 0},
		{"length", long, [2]float64{}, 0, 1},
		{"length", border, [2]float64{}, 0, 1},
		{"length", huge, [2]float64{}, 0, -1},
		{"length:estimate=100", border, [2]float64{}, 0, 0}, // the estimate misroutes it
		{"length:estimate=100", long, [2]float64{}, 0, 1},
		{"compress-and-route", border, [2]float64{}, 0, 1}, // Route alone does not compress
		{"spillover:threshold=0.8", short, [2]float64{0.8, 0}, 0, 0},
		{"spillover:threshold=0.8", short, [2]float64{0.81, 0}, 0, 1},
		{"spillover:threshold=0.8", long, [2]float64{0, 5}, 0, 1},
		{"spillover:threshold=0.8", huge, [2]float64{0, 0}, 0, -1},
		{"least-loaded", short, [2]float64{0.5, 0.2}, 0, 1},
		{"least-loaded", short, [2]float64{0.2, 0.5}, 0, 0},
		{"least-loaded", short, [2]float64{0.3, 0.3}, 0, 0}, // a tie goes to the smaller pool
		{"least-loaded", long, [2]float64{0, 0.9}, 0, 1},    // only the long pool holds it
		{"random", short, [2]float64{}, 0.49, 0},
		{"random", short, [2]float64{}, 0.51, 1},
		{"random", long, [2]float64{}, 0.01, 1},
		{"random", huge, [2]float64{}, 0.5, -1},
		{"semantic:code=long,prose=short,fallback=long", short, [2]float64{}, 0, 0},
		{"semantic:code=long,prose=short,fallback=long", coder, [2]float64{}, 0, 1},
		{"semantic:code=long,prose=short,fallback=long", PoolRequest{Label: ""}, [2]float64{}, 0, 1},
		{"semantic:code=long,prose=short", PoolRequest{Label: "poetry"}, [2]float64{}, 0, 0}, // no fallback: the first pool
		{"model:small=short,big=long,fallback=long", PoolRequest{Model: "small"}, [2]float64{}, 0, 0},
		{"model:small=short,big=long,fallback=long", PoolRequest{Model: "big"}, [2]float64{}, 0, 1},
		{"model:small=short,big=long,fallback=long", PoolRequest{Model: "other"}, [2]float64{}, 0, 1},
	} {
		r := mustRouter(t, tc.spec)
		if got := r.Route(tc.req, twoPools(tc.load[0], tc.load[1]), tc.u); got != tc.want {
			t.Errorf("%s routes %+v (loads %v, u %v) to %d, want %d", tc.spec, tc.req, tc.load, tc.u, got, tc.want)
		}
	}
}

func TestCompressAndRouteBand(t *testing.T) {
	r := mustRouter(t, "compress-and-route:gamma=1.5").(*CompressAndRouteRouter)
	pools := twoPools(0, 0)
	for _, tc := range []struct {
		in, out int
		want    int // the shortened input; 0: not compressed
	}{
		{600, 100, 0},    // fits the short pool already
		{900, 200, 824},  // 1100 in (1024, 1536]: shortened to 1024 - 200
		{1200, 336, 688}, // 1536, the band's top
		{1200, 337, 0},   // 1537, above the band
		{1000, 1030, 0},  // the answer alone exceeds the short pool
	} {
		in, ok := r.Compress(PoolRequest{InputTokens: tc.in, OutputTokens: tc.out}, pools)
		if (tc.want == 0) == ok || (ok && in != tc.want) {
			t.Errorf("Compress(%d+%d) = %d, %v; want %d", tc.in, tc.out, in, ok, tc.want)
		}
	}
	if !r.Safe(workload.Prose) || !r.Safe(workload.RAG) || r.Safe(workload.Code) {
		t.Error("prose and rag are safe to compress, code is not")
	}
	// One pool: nothing to compress into.
	if _, ok := r.Compress(PoolRequest{InputTokens: 900, OutputTokens: 200}, pools[1:]); ok {
		t.Error("compressed with a single pool")
	}
}

func TestParsePoolRouter(t *testing.T) {
	for _, tc := range []struct {
		spec, name string
	}{
		{"length", "length"},
		{"length:estimate=mean", "length:estimate=mean"},
		{"length:estimate=300", "length:estimate=300"},
		{"compress-and-route", "compress-and-route:gamma=1.5,p=0.75,latency=100ms"},
		{"compress-and-route:gamma=2,latency=50ms,p=1", "compress-and-route:gamma=2,p=1,latency=50ms"},
		{"spillover:threshold=0.7", "spillover:threshold=0.7"},
		{"least-loaded", "least-loaded"},
		{"random", "random"},
		{"model:a=short,b=long,fallback=long", "model:a=short,b=long,fallback=long"},
		{"semantic:code=long,prose=short", "semantic:code=long,prose=short"},
	} {
		r, err := ParsePoolRouter(tc.spec)
		if err != nil || r.Name() != tc.name {
			t.Errorf("ParsePoolRouter(%q) = %v, %v; want %s", tc.spec, r, err, tc.name)
			continue
		}
		// A router's name reads back as the same router.
		if again, err := ParsePoolRouter(r.Name()); err != nil || again.Name() != r.Name() {
			t.Errorf("%s does not read back: %v", r.Name(), err)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"fastest", "unknown pool router"},
		{"length:estimate=soon", "estimate="},
		{"length:bogus=1", `unknown parameter "bogus"`},
		{"compress-and-route:gamma=0.5", "gamma="},
		{"compress-and-route:p=2", "p="},
		{"compress-and-route:latency=-1s", "latency="},
		{"spillover:threshold", "want key=value"},
		{"spillover:threshold=1,threshold=2", "given twice"},
		{"model", "MODEL=POOL"},
		{"semantic:fallback=long", "CATEGORY=POOL"},
		{"least-loaded:x=1", "unknown parameter"},
	} {
		if _, err := ParsePoolRouter(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePoolRouter(%q) = %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
	if err := CheckPoolRouter(mustRouter(t, "model:a=short,b=medium"), []string{"short", "long"}); err == nil || !strings.Contains(err.Error(), `"medium"`) {
		t.Errorf("a model router naming a missing pool: %v", err)
	}
	if err := CheckPoolRouter(mustRouter(t, "semantic:code=long,fallback=tiny"), []string{"short", "long"}); err == nil {
		t.Error("a semantic router falling back to a missing pool passed")
	}
}

func FuzzParsePoolRouter(f *testing.F) {
	for _, s := range []string{"length", "compress-and-route:gamma=1.5,p=0.75", "model:a=b,fallback=c", "spillover:threshold=", ":", "x:=,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		r, err := ParsePoolRouter(spec)
		if err != nil {
			return
		}
		pools := twoPools(0.5, 0.5)
		for _, req := range []PoolRequest{{InputTokens: 10, OutputTokens: 10}, {InputTokens: 1e6, OutputTokens: 1}} {
			if p := r.Route(req, pools, 0.5); p < -1 || p >= len(pools) {
				t.Fatalf("%s routed to %d", spec, p)
			}
		}
	})
}

// desRun runs one DES of fleet f with router r and returns the router as
// bound to the run, the requests and the result.
func desRun(t *testing.T, pl *Planner, f Fleet, lambda float64, r PoolRouter) (*desRouter, sim.Config, *sim.Result) {
	t.Helper()
	models, err := pl.ModelsWith(f, r)
	if err != nil {
		t.Fatal(err)
	}
	cfg, dr, _, err := pl.simConfig(context.Background(), f, models, lambda, 1, "least-request", r)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(context.Background(), cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return dr, cfg, res
}

func chatPlanner(t *testing.T, lambda float64, models []ModelShare) *Planner {
	t.Helper()
	w := Workload{CDF: readCDF(t, "chat-cdf.json"), Lambda: lambda, Models: models}
	o := DefaultOptions(2 * time.Second)
	o.Seeds = []uint64{1}
	o.Warmup, o.Measure = 5*time.Second, 60*time.Second
	pl, err := New(w, o)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func chatFleet(t *testing.T, short, long int) Fleet {
	return Fleet{Pools: []PoolSpec{{Name: "short", Profile: preset(t, "l4-llama3.1-8b"), MaxTokens: 1024, Instances: short},
		{Name: "long", Profile: preset(t, "h100-llama3.1-8b"), MaxTokens: 32768, Instances: long}}}
}

// TestDESCompressAndRoute: borderline prose and rag (total in (1024,
// 1536]) go to the short pool compressed and pay the compression latency;
// borderline code stays long; nothing outside the band is compressed.
func TestDESCompressAndRoute(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	f := chatFleet(t, 6, 4)
	r := mustRouter(t, "compress-and-route:gamma=1.5,latency=300ms")
	dr, cfg, res := desRun(t, pl, f, 10, r)
	orig, err := pl.w.Requests(10, pl.o.Warmup+pl.o.Measure, 1)
	if err != nil {
		t.Fatal(err)
	}
	var proseMoved, codeKept int
	for i, req := range cfg.Requests {
		m := dr.reqs[i]
		total := m.OutputTokens + req.InputTokens
		if dr.delay[i] > 0 {
			if m.Category == workload.Code {
				t.Fatalf("request %d: code was compressed", i)
			}
			if total > 1024 || dr.delay[i] != 300*time.Millisecond || len(req.BlockHashes) != 0 {
				t.Fatalf("request %d: compressed to %d tokens, delay %v", i, total, dr.delay[i])
			}
			if dr.picked[i] == 1 {
				t.Fatalf("request %d: compressed but sent to the long pool", i)
			}
			proseMoved++
			continue
		}
		if dr.picked[i] < 0 {
			continue
		}
		if total > 1024 && total <= 1536 && m.Category == workload.Code {
			codeKept++
			if dr.picked[i] != 1 {
				t.Fatalf("request %d: borderline code in pool %d", i, dr.picked[i])
			}
		}
	}
	if proseMoved == 0 || codeKept == 0 {
		t.Fatalf("moved %d borderline prose/rag, kept %d borderline code: the workload should have both", proseMoved, codeKept)
	}
	// The band holds as many compressed requests as the original workload
	// has borderline prose and rag (arrivals shifted by the latency aside).
	band := 0
	for _, req := range orig {
		if tot := req.InputTokens + max(req.OutputTokens, 1); tot > 1024 && tot <= 1536 && req.Category != workload.Code {
			band++
		}
	}
	if proseMoved > band || proseMoved < band-5 {
		t.Errorf("compressed %d requests, the band has %d prose and rag", proseMoved, band)
	}
	// The results count them apart and their TTFT includes the latency.
	e := pl.summarize(f, 10, "least-request", []sim.Config{cfg}, []*desRouter{dr}, []*sim.Result{res})
	if e.Compressed == 0 || float64(e.CompressedP99) < 0.3 {
		t.Errorf("compressed %d, their P99 %v s: want some, each at least the 0.3 s latency", e.Compressed, e.CompressedP99)
	}
	// The analytical model compresses a share p of the band, whatever the category.
	for _, p := range []float64{0, 0.75} {
		rp := &CompressAndRouteRouter{Gamma: 1.5, P: p, Delay: 300 * time.Millisecond}
		a := pl.assign(f, rp)
		c := pl.SizeWith(f, 10, rp)
		if p == 0 && a.compressed != 0 || p > 0 && !(a.compressed > 0.01) || c.Compressed != a.compressed {
			t.Errorf("p=%v: the analytical model compressed %v (candidate says %v)", p, a.compressed, c.Compressed)
		}
	}
}

// recorder wraps a pool router and keeps each decision with the loads it
// saw.
type recorder struct {
	PoolRouter
	seen []decision
}

type decision struct {
	req   PoolRequest
	pools []PoolView
	got   int
}

func (r *recorder) Route(req PoolRequest, pools []PoolView, u float64) int {
	p := r.PoolRouter.Route(req, pools, u)
	r.seen = append(r.seen, decision{req, append([]PoolView(nil), pools...), p})
	return p
}

// TestDESSpillover: short requests go to the long pool only while the
// short pool's pressure is above the threshold; an undersized short pool
// spills, a large one does not.
func TestDESSpillover(t *testing.T) {
	pl := chatPlanner(t, 20, nil)
	const threshold = 0.5
	for _, tc := range []struct {
		short     int
		wantSpill bool
	}{{1, true}, {8, false}} {
		rec := &recorder{PoolRouter: &SpilloverRouter{Threshold: threshold}}
		desRun(t, pl, chatFleet(t, tc.short, 4), 20, rec)
		spilled := 0
		for _, d := range rec.seen {
			if d.req.Total() > 1024 {
				if d.got != 1 {
					t.Fatalf("a long request went to pool %d", d.got)
				}
				continue
			}
			above := d.pools[0].Pressure() > threshold
			if above != (d.got == 1) {
				t.Fatalf("short request at short-pool pressure %.2f went to pool %d (threshold %v)", d.pools[0].Pressure(), d.got, threshold)
			}
			if above {
				spilled++
			}
		}
		if (spilled > 0) != tc.wantSpill {
			t.Errorf("%d short instances: %d short requests spilled, want spills: %v", tc.short, spilled, tc.wantSpill)
		}
	}
}

// TestDESLeastLoaded: every request goes to the least pressed pool that
// holds it, and short requests use both pools.
func TestDESLeastLoaded(t *testing.T) {
	pl := chatPlanner(t, 20, nil)
	rec := &recorder{PoolRouter: LeastLoadedRouter{}}
	desRun(t, pl, chatFleet(t, 2, 4), 20, rec)
	used := [2]int{}
	for _, d := range rec.seen {
		for i, p := range d.pools {
			if d.req.Total() <= p.MaxTokens && p.Pressure() < d.pools[d.got].Pressure() {
				t.Fatalf("sent to pool %d at pressure %.2f while pool %d had %.2f", d.got, d.pools[d.got].Pressure(), i, p.Pressure())
			}
		}
		if d.req.Total() <= 1024 {
			used[d.got]++
		}
	}
	if used[0] == 0 || used[1] == 0 {
		t.Errorf("short requests per pool %v: want both pools used", used)
	}
}

// TestDESRandom: short requests split about evenly, long ones all long,
// and the same seed gives the same split.
func TestDESRandom(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	split := func() [2]int {
		dr, cfg, _ := desRun(t, pl, chatFleet(t, 6, 6), 10, RandomRouter{})
		var n [2]int
		for i, req := range cfg.Requests {
			if p := dr.picked[i]; p >= 0 && req.InputTokens+dr.reqs[i].OutputTokens <= 1024 {
				n[p]++
			} else if p == 0 {
				t.Fatalf("a long request went to the short pool")
			}
		}
		return n
	}
	a, b := split(), split()
	if a != b {
		t.Errorf("same seed, different splits: %v and %v", a, b)
	}
	if share := float64(a[0]) / float64(a[0]+a[1]); share < 0.4 || share > 0.6 {
		t.Errorf("short requests in the short pool: %v, want about half", a)
	}
}

// TestDESModelRouter: each model's requests go to its pool; a model with
// no entry goes to the fallback; an answer too long for its pool is cut.
func TestDESModelRouter(t *testing.T) {
	pl := chatPlanner(t, 10, []ModelShare{{"small", 0.5}, {"big", 0.3}, {"other", 0.2}})
	r := mustRouter(t, "model:small=short,big=long,fallback=long")
	dr, cfg, res := desRun(t, pl, chatFleet(t, 6, 6), 10, r)
	want := map[string]int{"small": 0, "big": 1, "other": 1}
	seen := map[string]int{}
	for i, req := range cfg.Requests {
		m := dr.reqs[i]
		p := dr.picked[i]
		if p < 0 {
			if m.Model != "small" || req.InputTokens < 1024 {
				t.Fatalf("request %d (%s, %d prompt tokens) was rejected", i, m.Model, req.InputTokens)
			}
			continue
		}
		seen[m.Model]++
		if p != want[m.Model] {
			t.Fatalf("model %s went to pool %d", m.Model, p)
		}
		if dr.cut[i] != (p == 0 && req.InputTokens+m.OutputTokens > 1024) {
			t.Fatalf("request %d: cut %v", i, dr.cut[i])
		}
	}
	if len(seen) != 3 {
		t.Errorf("models seen %v, want all three", seen)
	}
	// The cut answers stop at the short pool's max context.
	for _, rec := range res.Records {
		i := int(rec.Session - 1)
		if dr.cut[i] && rec.Completed && rec.PromptTokens+rec.OutputTokens > 1024 {
			t.Fatalf("request %d: a cut answer of %d tokens after %d", i, rec.OutputTokens, rec.PromptTokens)
		}
	}
}

type fakeClassifier struct {
	calls int
	fail  workload.Category
}

func (c *fakeClassifier) Classify(_ context.Context, r PoolRequest) (string, error) {
	c.calls++
	if r.Category == c.fail {
		return "", errors.New("timeout")
	}
	return r.Category.String(), nil
}

// TestDESSemantic: the classifier's category picks the pool; requests it
// fails on go to the fallback; without a classifier the workload's own
// categories are used.
func TestDESSemantic(t *testing.T) {
	r := mustRouter(t, "semantic:prose=short,rag=short,code=long,fallback=long")
	for _, withClassifier := range []bool{false, true} {
		pl := chatPlanner(t, 10, nil)
		fc := &fakeClassifier{fail: workload.RAG}
		if withClassifier {
			pl.o.Classifier = fc
		}
		dr, cfg, _ := desRun(t, pl, Fleet{Pools: []PoolSpec{{Name: "short", Profile: preset(t, "h100-llama3.1-8b"), MaxTokens: 32768, Instances: 4},
			{Name: "long", Profile: preset(t, "h100-llama3.1-8b"), MaxTokens: 65536, Instances: 4}}}, 10, r)
		for i := range cfg.Requests {
			cat, p := dr.reqs[i].Category, dr.picked[i]
			want := 0
			if cat == workload.Code || (withClassifier && cat == workload.RAG) {
				want = 1
			}
			if p != want {
				t.Fatalf("classifier %v: %s request in pool %d, want %d", withClassifier, cat, p, want)
			}
		}
		if withClassifier && fc.calls != len(cfg.Requests) {
			t.Errorf("the classifier was asked %d times for %d requests", fc.calls, len(cfg.Requests))
		}
	}
}

// TestDESLengthEstimate: the oracle never cuts an answer; an estimate of
// a few output tokens puts requests in the short pool whose answers do
// not fit, and they are cut; a generous one sends more to the long pool.
func TestDESLengthEstimate(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	f := chatFleet(t, 6, 6)
	shortShare := func(spec string) (float64, int) {
		dr, _, _ := desRun(t, pl, f, 10, mustRouter(t, spec))
		var n, short, cut int
		for i, p := range dr.picked {
			if p >= 0 {
				n++
			}
			if p == 0 {
				short++
			}
			if dr.cut[i] {
				cut++
			}
		}
		return float64(short) / float64(n), cut
	}
	oracle, oracleCut := shortShare("length")
	low, lowCut := shortShare("length:estimate=10")
	high, highCut := shortShare("length:estimate=2000")
	if oracleCut != 0 || lowCut == 0 || highCut != 0 {
		t.Errorf("cut answers: oracle %d, low estimate %d, high estimate %d", oracleCut, lowCut, highCut)
	}
	if !(low > oracle && high < oracle) {
		t.Errorf("short share: oracle %.3f, low estimate %.3f, high estimate %.3f", oracle, low, high)
	}
}

func TestEstimateErrors(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	rs := []*LengthRouter{{}, {Estimate: EstimateMean}, {Estimate: EstimateFixed, Tokens: 0}}
	res, err := pl.EstimateErrors(rs, []int{1024})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].MAE != 0 || res[0].Thresholds[0].CutPct != 0 || res[0].Thresholds[0].WastePct != 0 {
		t.Errorf("the oracle has errors: %+v", res[0])
	}
	if res[1].Tokens != pl.stats.Mean || !(res[1].MAE > 0) {
		t.Errorf("the mean estimate: %+v (mean %d)", res[1], pl.stats.Mean)
	}
	// Estimating no output never overestimates: it cuts, never wastes.
	if th := res[2].Thresholds[0]; th.WastePct != 0 || !(th.CutPct > 0) {
		t.Errorf("a zero estimate: %+v", th)
	}
	if _, err := pl.EstimateErrors(rs, nil); err == nil {
		t.Error("no thresholds passed")
	}
}

// TestComparePoolRoutersShares: each router's pool shares add up to the
// requests that reached a pool, and a router changes them.
func TestComparePoolRoutersShares(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	evals, err := pl.ComparePoolRouters(context.Background(), chatFleet(t, 6, 6), []PoolRouter{&LengthRouter{}, RandomRouter{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		sum := 0.0
		for _, p := range e.Pools {
			sum += p.SharePct
		}
		if want := 100 * float64(e.Requests-e.TooLong) / float64(e.Requests); sum < want-0.01 || sum > want+0.01 {
			t.Errorf("%s: shares add up to %.2f%%, want %.2f%%", e.PoolRouter, sum, want)
		}
	}
	if evals[0].Pools[0].SharePct <= evals[1].Pools[0].SharePct {
		t.Errorf("length sends %.1f%% to the short pool, random %.1f%%: random should send fewer", evals[0].Pools[0].SharePct, evals[1].Pools[0].SharePct)
	}
}

// TestLoadBlindRoutersIgnoreLoad checks the loadBlind list the DES relies
// on to skip summing every backend's load: a blind router routes every
// request the same whatever the pools' loads, and the two routers that read
// loads are not listed and do change a route with them.
func TestLoadBlindRoutersIgnoreLoad(t *testing.T) {
	pools := func(a, q [3]int) []PoolView {
		return []PoolView{
			{Name: "short", MaxTokens: 1024, Slots: 10, Active: a[0], Queued: q[0]},
			{Name: "mid", MaxTokens: 4096, Slots: 10, Active: a[1], Queued: q[1]},
			{Name: "long", MaxTokens: 32768, Slots: 10, Active: a[2], Queued: q[2]},
		}
	}
	rng := rand.New(rand.NewPCG(7, 0))
	cats := []workload.Category{workload.Prose, workload.Code, workload.RAG}
	for _, spec := range []string{"length", "length:estimate=300", "compress-and-route", "random",
		"model:a=short,b=long,fallback=mid", "semantic:code=long,prose=short,fallback=mid",
		"spillover:threshold=0.5", "least-loaded"} {
		r := mustRouter(t, spec)
		blind := loadBlind(r)
		readers := spec == "least-loaded" || strings.HasPrefix(spec, "spillover")
		if blind == readers {
			t.Errorf("%s: loadBlind %v, want %v", spec, blind, !readers)
			continue
		}
		moved := 0
		for range 2000 {
			c := cats[rng.IntN(len(cats))]
			req := PoolRequest{InputTokens: 1 + rng.IntN(30000), OutputTokens: 1 + rng.IntN(2000),
				EstimatedOutput: 300, Category: c, Model: []string{"a", "b", "c"}[rng.IntN(3)], Label: c.String()}
			var a, q [3]int
			for i := range a {
				a[i], q[i] = rng.IntN(20), rng.IntN(20)
			}
			u := rng.Float64()
			if r.Route(req, pools(a, q), u) != r.Route(req, pools([3]int{}, [3]int{}), u) {
				moved++
			}
		}
		if blind && moved > 0 {
			t.Errorf("%s is listed load-blind but %d of 2000 routes moved with the loads", spec, moved)
		}
		if !blind && moved == 0 {
			t.Errorf("%s reads loads but no route of 2000 moved with them", spec)
		}
	}
}

// loadFed is a router the load-blind list does not name, so the DES sums
// and passes the pools' loads to it.
type loadFed struct{ PoolRouter }

// byLoad embeds a load-blind router but routes by load alone in its own
// Route: the least pressed pool, ties to the first (a prompt too long for
// it is refused).
type byLoad struct{ *LengthRouter }

func (byLoad) Route(_ PoolRequest, pools []PoolView, _ float64) int {
	best := 0
	for i, p := range pools {
		if p.Pressure() < pools[best].Pressure() {
			best = i
		}
	}
	return best
}

// TestEmbeddingARouterDoesNotInheritBlindness: a router that embeds a
// load-blind one is handed the loads it may read, and routes by them.
func TestEmbeddingARouterDoesNotInheritBlindness(t *testing.T) {
	r := byLoad{mustRouter(t, "length").(*LengthRouter)}
	if loadBlind(r) {
		t.Fatal("a router embedding *LengthRouter is taken as load-blind")
	}
	pl := chatPlanner(t, 10, nil)
	dr, _, res := desRun(t, pl, chatFleet(t, 3, 3), 10, r)
	if !dr.ReadsLoads() {
		t.Fatal("the DES would not hand the embedding router the pools' loads")
	}
	// Handed no loads, byLoad sends every request to the first pool; with
	// them it spreads.
	used := map[int]bool{}
	for _, p := range dr.picked {
		if p >= 0 { // -1: not routed, or refused
			used[p] = true
		}
	}
	if len(res.Records) == 0 || len(used) < 2 {
		t.Errorf("%d records over pools %v: want requests spread by load", len(res.Records), used)
	}
}

// TestDESLoadBlindSkipsOnlyTheSum runs the DES with blind routers as they
// are (no loads summed) and with the loads fed to it: the same picks and the
// same turn records, so skipping the sum changes nothing but its cost.
func TestDESLoadBlindSkipsOnlyTheSum(t *testing.T) {
	pl := chatPlanner(t, 10, nil)
	f := chatFleet(t, 3, 3)
	// (compress-and-route is left out: the wrapper would hide its Compressor.)
	for _, spec := range []string{"length", "random", "semantic:code=long,prose=short"} {
		r := mustRouter(t, spec)
		blind, _, blindRes := desRun(t, pl, f, 10, r)
		fed, _, fedRes := desRun(t, pl, f, 10, loadFed{r})
		if blind.ReadsLoads() || !fed.ReadsLoads() {
			t.Fatalf("%s: ReadsLoads %v as listed and %v wrapped", spec, blind.ReadsLoads(), fed.ReadsLoads())
		}
		if len(blindRes.Records) == 0 || !slices.Equal(blind.picked, fed.picked) || !slices.Equal(blindRes.Records, fedRes.Records) {
			t.Errorf("%s: %d records; picks or records differ with the loads fed", spec, len(blindRes.Records))
		}
	}
}
