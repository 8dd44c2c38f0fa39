package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// PoolSpec is one pool of a planned fleet: Instances identical backends of
// one engine worker each (one instance of Profile), taking the requests
// whose total tokens are at most MaxTokens and more than the next smaller
// pool's.
type PoolSpec struct {
	Name      string   `json:"name"`
	Profile   *Profile `json:"-"`
	MaxTokens int      `json:"max_tokens"`
	Instances int      `json:"instances"`
}

// MarshalJSON names the profile instead of spelling it out.
func (p PoolSpec) MarshalJSON() ([]byte, error) {
	type plain PoolSpec
	return jsonMarshal(struct {
		plain
		Profile string `json:"profile"`
	}{plain(p), p.Profile.Name})
}

// Fleet is a set of pools.
type Fleet struct {
	Pools []PoolSpec `json:"pools"`
}

// Cost is the fleet's hourly cost.
func (f Fleet) Cost() float64 {
	c := 0.0
	for _, p := range f.Pools {
		c += float64(p.Instances) * p.Profile.Cost()
	}
	return c
}

// Instances is the number of instances of every pool.
func (f Fleet) Instances() int {
	n := 0
	for _, p := range f.Pools {
		n += p.Instances
	}
	return n
}

func (f Fleet) String() string {
	parts := make([]string, len(f.Pools))
	for i, p := range f.Pools {
		parts[i] = fmt.Sprintf("%s:%s:%d:%d", p.Name, p.Profile.Name, p.MaxTokens, p.Instances)
	}
	return strings.Join(parts, ",")
}

// with returns a copy of f with pool i resized to n.
func (f Fleet) with(i, n int) Fleet {
	g := Fleet{Pools: slices.Clone(f.Pools)}
	g.Pools[i].Instances = n
	return g
}

func (f Fleet) key() string {
	var b strings.Builder
	for _, p := range f.Pools {
		fmt.Fprintf(&b, "%d,", p.Instances)
	}
	return b.String()
}

// validate checks that pools are named, have a profile and come by
// increasing MaxTokens.
func (f Fleet) validate() error {
	if len(f.Pools) == 0 {
		return errors.New("plan: a fleet needs at least one pool")
	}
	seen := map[string]bool{}
	for i, p := range f.Pools {
		if p.Profile == nil || p.MaxTokens < 1 || p.Instances < 0 || p.Name == "" || seen[p.Name] {
			return fmt.Errorf("plan: pool %d (%q) needs a unique name, a profile, max tokens >= 1 and instances >= 0", i+1, p.Name)
		}
		seen[p.Name] = true
		if i > 0 && p.MaxTokens <= f.Pools[i-1].MaxTokens {
			return fmt.Errorf("plan: pools must be listed by increasing max tokens (%s: %d after %d)", p.Name, p.MaxTokens, f.Pools[i-1].MaxTokens)
		}
	}
	return nil
}

// Runner runs simulations, perhaps in parallel; the results are in the
// configurations' order.
type Runner func(ctx context.Context, cfgs []sim.Config) ([]*sim.Result, error)

// Options are the planner's settings.
type Options struct {
	// SLO is the P99 TTFT target.
	SLO time.Duration
	// UtilCap is the highest planned utilization (DefaultUtilizationCap).
	UtilCap float64
	// Policy places requests among a pool's backends in the DES.
	Policy string
	// Seeds of the DES runs; their spread gives a confidence interval.
	Seeds []uint64
	// Warmup is left out of every DES figure; requests that arrive in the
	// Measure window after it are measured, each to its end.
	Warmup, Measure time.Duration
	// MaxInstances bounds a pool's size.
	MaxInstances int
	// Registry holds the policies; Run runs the DES (sequentially if nil).
	Registry *policy.Registry
	Run      Runner
	// Seed draws the analytical model's samples.
	Seed uint64
	// PoolRouter picks each request's pool (nil: the length router with
	// the oracle's total tokens).
	PoolRouter PoolRouter
	// Classifier answers the semantic router's categories (nil: the
	// workload's own categories).
	Classifier Classifier
}

// DefaultOptions are 3 seeds, 30 s of warm-up and 120 s measured, the
// least-request policy inside pools and a utilization cap of 0.85.
func DefaultOptions(slo time.Duration) Options {
	return Options{SLO: slo, UtilCap: DefaultUtilizationCap, Policy: "least-request", Seeds: []uint64{1, 2, 3},
		Warmup: 30 * time.Second, Measure: 120 * time.Second, MaxInstances: 2000, Seed: 1}
}

// Planner sizes fleets for one workload.
type Planner struct {
	w       Workload
	o       Options
	samples []Sample
	stats   OutputStats
	memo    map[string]*Eval
}

// New returns a planner; it checks the workload and options.
func New(w Workload, o Options) (*Planner, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	var errs []error
	if o.SLO <= 0 {
		errs = append(errs, fmt.Errorf("the P99 TTFT target must be > 0, got %v", o.SLO))
	}
	if !(o.UtilCap > 0 && o.UtilCap <= 1) {
		errs = append(errs, fmt.Errorf("the utilization cap must be in (0, 1], got %v", o.UtilCap))
	}
	if len(o.Seeds) == 0 {
		errs = append(errs, errors.New("give at least one seed"))
	}
	if o.Warmup < 0 || o.Measure <= 0 || o.Warmup+o.Measure > sim.MaxSimulated {
		errs = append(errs, fmt.Errorf("warm-up must be >= 0 and the measured window > 0, together at most %v", sim.MaxSimulated))
	}
	if o.MaxInstances < 1 {
		errs = append(errs, fmt.Errorf("max instances must be >= 1, got %d", o.MaxInstances))
	}
	if o.Registry == nil {
		o.Registry = policy.NewRegistry()
	}
	if o.PoolRouter == nil {
		o.PoolRouter = &LengthRouter{}
	}
	if !o.Registry.Has(o.Policy) {
		errs = append(errs, fmt.Errorf("unknown policy %q (known: %s)", o.Policy, strings.Join(o.Registry.Names(), ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if o.Run == nil {
		o.Run = func(ctx context.Context, cfgs []sim.Config) ([]*sim.Result, error) {
			out := make([]*sim.Result, len(cfgs))
			for i := range cfgs {
				r, err := sim.Run(ctx, cfgs[i], o.Registry)
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x73616d70))
	pl := &Planner{w: w, o: o, samples: w.Samples(AnalyticSamples, rng), memo: map[string]*Eval{}}
	// Categories and models come from their own stream, so that the
	// samples' lengths do not depend on them.
	rng = rand.New(rand.NewPCG(o.Seed, 0x636174))
	for i := range pl.samples {
		if w.CDF != nil {
			pl.samples[i].Cat = drawCategory(w.Mix, rng.Float64())
		}
		pl.samples[i].Model = drawModel(w.Models, rng.Float64())
	}
	pl.stats = outputStats(pl.everySample())
	return pl, nil
}

// PoolRouter is the planner's pool router.
func (pl *Planner) PoolRouter() PoolRouter { return pl.o.PoolRouter }

// Workload is the planner's workload, with its defaults filled in.
func (pl *Planner) Workload() Workload { return pl.w }

// Models are the analytical models of a fleet's pools, with the requests
// the planner's pool router sends to each.
func (pl *Planner) Models(f Fleet) ([]*PoolModel, error) {
	return pl.ModelsWith(f, pl.o.PoolRouter)
}

// ModelsWith are the analytical models of a fleet's pools with the
// requests pool router r sends to each (see assign).
func (pl *Planner) ModelsWith(f Fleet, r PoolRouter) ([]*PoolModel, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if err := CheckPoolRouter(r, poolNames(f)); err != nil {
		return nil, err
	}
	a := pl.assign(f, r)
	out := make([]*PoolModel, len(f.Pools))
	for i, p := range f.Pools {
		m, err := poolModelOf(p.Name, p.Profile, a.pools[i], len(pl.samples), p.MaxTokens)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

func poolNames(f Fleet) []string {
	names := make([]string, len(f.Pools))
	for i, p := range f.Pools {
		names[i] = p.Name
	}
	return names
}

// SimConfig is the DES of fleet f at rate lambda with seed: one region,
// one router, no network latency, every instance a backend of one worker
// behind a gateway admitting as many requests as the engine runs
// sequences; one attempt per request (a rejection is a failure and counts
// against the SLO), 10 minutes before an attempt times out.
func (pl *Planner) SimConfig(f Fleet, models []*PoolModel, lambda float64, seed uint64, pol string) (sim.Config, error) {
	cfg, _, _, err := pl.simConfig(context.Background(), f, models, lambda, seed, pol, pl.o.PoolRouter)
	return cfg, err
}

// simConfig is SimConfig with pool router r, which it returns bound to
// the run's requests, and the number of requests the classifier failed.
func (pl *Planner) simConfig(ctx context.Context, f Fleet, models []*PoolModel, lambda float64, seed uint64, pol string,
	r PoolRouter) (sim.Config, *desRouter, int, error) {
	for _, p := range f.Pools {
		if p.Instances < 1 {
			return sim.Config{}, nil, 0, fmt.Errorf("plan: pool %s has no instances", p.Name)
		}
	}
	span := pl.o.Warmup + pl.o.Measure
	reqs, err := pl.w.Requests(lambda, span, seed)
	if err != nil {
		return sim.Config{}, nil, 0, err
	}
	reqs, dr, failed, err := pl.routeRequests(ctx, f, models, reqs, span, seed, r)
	if err != nil {
		return sim.Config{}, nil, 0, err
	}
	gw := gateway.DefaultConfig()
	gw.SlotsPerWorker = 1
	gw.MaxEstimatedWait = max(gw.MaxEstimatedWait, 2*pl.o.SLO)
	cfg := sim.Config{Regions: []sim.Region{{Name: "plan", Routers: 1}}, Latency: [][]time.Duration{{0}},
		Gateway: gw, Policy: pol, Params: policy.DefaultParams(), Workload: workload.DefaultConfig(),
		Client: client.Config{TTFTSLO: pl.o.SLO, AttemptTimeout: 10 * time.Minute, MaxAttempts: 1},
		Seed:   seed, Warmup: pl.o.Warmup, Measure: pl.o.Measure, KeepRecords: true,
		Requests: reqs, BlockSize: pl.w.BlockSize, PoolRouter: dr}
	for i, p := range f.Pools {
		cfg.Pools = append(cfg.Pools, sim.Pool{Name: p.Name, MaxTokens: p.MaxTokens})
		prof := models[i].Engine
		if models[i].Empty() {
			prof = p.Profile.EngineFor(PoolShape{MeanInput: 1, MeanContext: 1, MaxTokens: p.MaxTokens})
		}
		gw.SlotsPerWorker = max(gw.SlotsPerWorker, prof.MaxSeqs)
		for k := range p.Instances {
			cfg.Backends = append(cfg.Backends, sim.BackendSpec{Name: fmt.Sprintf("%s-%d", p.Name, k), Workers: 1, Profile: prof, Pool: i})
		}
	}
	cfg.Gateway = gw
	return cfg, dr, failed, nil
}

// Sec is a time in seconds that is +Inf when requests failed beyond the
// quantile; it is written as null in JSON.
type Sec float64

// MarshalJSON writes null for an infinite or undefined time.
func (s Sec) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(s), 0) || math.IsNaN(float64(s)) {
		return []byte("null"), nil
	}
	return jsonMarshal(math.Round(float64(s)*1e4) / 1e4)
}

func (s Sec) String() string {
	if math.IsInf(float64(s), 1) {
		return "inf"
	}
	if math.IsNaN(float64(s)) {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(s))
}

// Eval is what the DES measured for a fleet over every seed: requests that
// arrived in the measured window, each followed to its end. A request that
// failed (rejected, too long) counts as infinitely slow in every TTFT
// quantile and against the SLO.
type Eval struct {
	Fleet  Fleet   `json:"fleet"`
	Cost   float64 `json:"cost_per_hr"`
	Lambda float64 `json:"lambda"`
	Policy string  `json:"policy"`
	// PoolRouter picked each request's pool.
	PoolRouter string `json:"pool_router"`
	Seeds      int    `json:"seeds"`
	// P99 is over every seed's requests pooled; P99Lo and P99Hi are a 95%
	// confidence interval of the per-seed P99 (Student's t).
	P50           Sec     `json:"ttft_p50_s"`
	P99           Sec     `json:"ttft_p99_s"`
	P99Lo         Sec     `json:"ttft_p99_ci_lo_s"`
	P99Hi         Sec     `json:"ttft_p99_ci_hi_s"`
	Requests      int     `json:"requests"`
	Completed     int     `json:"completed"`
	Rejected      int     `json:"rejected"`
	TooLong       int     `json:"too_long"`
	SLOPct        float64 `json:"slo_pct"`
	ReusePct      float64 `json:"reuse_pct"`
	ThroughputRPS float64 `json:"throughput_rps"`
	// Compressed requests (compress-and-route) and their P99 TTFT,
	// compression latency included; Truncated requests went to a pool too
	// small for their answer, which was cut at its max context;
	// ClassifierErrors are requests the semantic classifier did not answer
	// (routed to the fallback).
	Compressed       int            `json:"compressed"`
	CompressedP99    Sec            `json:"compressed_ttft_p99_s"`
	Truncated        int            `json:"truncated"`
	ClassifierErrors int            `json:"classifier_errors"`
	Pools            []PoolEval     `json:"pools"`
	Categories       []CategoryEval `json:"categories"`
	Pass             bool           `json:"meets_slo"`
}

// PoolEval is one pool's share of an Eval.
type PoolEval struct {
	Name      string `json:"name"`
	Instances int    `json:"instances"`
	Requests  int    `json:"requests"`
	// SharePct is the pool's share of the measured requests (those
	// rejected before any pool took them count in the denominator).
	SharePct float64 `json:"share_pct"`
	P99      Sec     `json:"ttft_p99_s"`
	SLOPct   float64 `json:"slo_pct"`
	BusyPct  float64 `json:"busy_pct"`
	ReusePct float64 `json:"reuse_pct"`
}

// CategoryEval is one request category's share of an Eval.
type CategoryEval struct {
	Name     string `json:"name"`
	Requests int    `json:"requests"`
	P99      Sec    `json:"ttft_p99_s"`
}

// Evaluate runs the DES of fleet f at rate lambda for every seed with the
// given policy ("" for the planner's) and the planner's pool router.
func (pl *Planner) Evaluate(ctx context.Context, f Fleet, lambda float64, pol string) (*Eval, error) {
	return pl.EvaluateWith(ctx, f, lambda, pol, nil)
}

// EvaluateWith is Evaluate with pool router r (nil: the planner's).
func (pl *Planner) EvaluateWith(ctx context.Context, f Fleet, lambda float64, pol string, r PoolRouter) (*Eval, error) {
	if pol == "" {
		pol = pl.o.Policy
	}
	if r == nil {
		r = pl.o.PoolRouter
	}
	key := fmt.Sprintf("%s|%g|%s|%s", f, lambda, pol, r.Name())
	if e, ok := pl.memo[key]; ok {
		return e, nil
	}
	models, err := pl.ModelsWith(f, r)
	if err != nil {
		return nil, err
	}
	cfgs := make([]sim.Config, len(pl.o.Seeds))
	routers := make([]*desRouter, len(pl.o.Seeds))
	failed := 0
	for i, seed := range pl.o.Seeds {
		var n int
		if cfgs[i], routers[i], n, err = pl.simConfig(ctx, f, models, lambda, seed, pol, r); err != nil {
			return nil, err
		}
		failed += n
	}
	res, err := pl.o.Run(ctx, cfgs)
	if err != nil {
		return nil, fmt.Errorf("plan: simulating %s: %w", f, err)
	}
	e := pl.summarize(f, lambda, pol, cfgs, routers, res)
	e.PoolRouter, e.ClassifierErrors = r.Name(), failed
	pl.memo[key] = e
	return e, nil
}

func (pl *Planner) summarize(f Fleet, lambda float64, pol string, cfgs []sim.Config, routers []*desRouter, res []*sim.Result) *Eval {
	e := &Eval{Fleet: f, Cost: f.Cost(), Lambda: lambda, Policy: pol, Seeds: len(res)}
	var all, compressed []metrics.TurnRecord
	byPool := make([][]metrics.TurnRecord, len(f.Pools))
	var byCat [3][]metrics.TurnRecord
	var perSeed []float64
	var prompt, cached int64
	poolPrompt := make([]int64, len(f.Pools))
	poolCached := make([]int64, len(f.Pools))
	busy := make([]float64, len(f.Pools))
	window := 0.0
	for i, r := range res {
		reqs := cfgs[i].Requests
		window += cfgs[i].Measure.Seconds()
		dr := routers[i]
		from := len(all)
		for _, rec := range r.Records {
			idx := int(rec.Session - 1)
			req := reqs[idx]
			if d := dr.delay[idx]; d > 0 { // the compression latency is part of its TTFT
				rec.Start -= d
				compressed = append(compressed, rec)
			}
			if dr.cut[idx] {
				e.Truncated++
			}
			all = append(all, rec)
			byCat[req.Category] = append(byCat[req.Category], rec)
			switch rec.Reason {
			case "too_long":
				e.TooLong++
			case "":
			default:
				e.Rejected++
			}
			p := dr.picked[idx]
			if p >= 0 {
				byPool[p] = append(byPool[p], rec)
			}
			if rec.Completed {
				e.Completed++
				prompt += int64(rec.PromptTokens)
				cached += int64(rec.CachedTokens)
				if p >= 0 {
					poolPrompt[p] += int64(rec.PromptTokens)
					poolCached[p] += int64(rec.CachedTokens)
				}
			}
		}
		perSeed = append(perSeed, metrics.TTFTQuantile(all[from:], 0.99))
		for b, be := range r.Backends {
			busy[cfgs[i].Backends[b].Pool] += be.BusyPct / float64(f.Pools[cfgs[i].Backends[b].Pool].Instances) / float64(len(res))
		}
	}
	e.Requests = len(all)
	e.Compressed, e.CompressedP99 = len(compressed), Sec(metrics.TTFTQuantile(compressed, 0.99))
	e.P50, e.P99 = Sec(metrics.TTFTQuantile(all, 0.5)), Sec(metrics.TTFTQuantile(all, 0.99))
	lo, hi := confidence(perSeed)
	e.P99Lo, e.P99Hi = Sec(lo), Sec(hi)
	e.SLOPct = sloPct(all, pl.o.SLO)
	e.ReusePct = pct(float64(cached), float64(prompt))
	if window > 0 {
		e.ThroughputRPS = float64(e.Completed) / window
	}
	for i, p := range f.Pools {
		e.Pools = append(e.Pools, PoolEval{Name: p.Name, Instances: p.Instances, Requests: len(byPool[i]), SharePct: pct(float64(len(byPool[i])), float64(len(all))),
			P99: Sec(metrics.TTFTQuantile(byPool[i], 0.99)), SLOPct: sloPct(byPool[i], pl.o.SLO), BusyPct: busy[i],
			ReusePct: pct(float64(poolCached[i]), float64(poolPrompt[i]))})
	}
	for c, recs := range byCat {
		if len(recs) > 0 {
			e.Categories = append(e.Categories, CategoryEval{Name: workload.Category(c).String(), Requests: len(recs),
				P99: Sec(metrics.TTFTQuantile(recs, 0.99))})
		}
	}
	e.Pass = e.Requests > 0 && float64(e.P99) <= pl.o.SLO.Seconds()
	return e
}

func sloPct(recs []metrics.TurnRecord, slo time.Duration) float64 {
	good := 0
	for i := range recs {
		if recs[i].Good(slo) {
			good++
		}
	}
	return pct(float64(good), float64(len(recs)))
}

func pct(num, den float64) float64 {
	if den == 0 {
		return 0
	}
	return 100 * num / den
}

// t975 are Student's t quantiles at 0.975 for 1-30 degrees of freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
	2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// confidence is a 95% confidence interval of the mean of xs (Student's t),
// clipped at 0;
// with one value, or an infinite one, both ends are that value's bounds.
func confidence(xs []float64) (lo, hi float64) {
	n := len(xs)
	var sum, sum2 float64
	for _, x := range xs {
		if math.IsInf(x, 0) {
			return slices.Min(xs), math.Inf(1)
		}
		sum += x
		sum2 += x * x
	}
	mean := sum / float64(n)
	if n < 2 {
		return mean, mean
	}
	sd := math.Sqrt(math.Max(0, (sum2-float64(n)*mean*mean)/float64(n-1)))
	t := 1.96
	if n-1 <= len(t975) {
		t = t975[n-2]
	}
	h := t * sd / math.Sqrt(float64(n))
	return math.Max(0, mean-h), mean + h // a time is never negative
}
