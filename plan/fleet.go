package plan

import (
	"cmp"
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
	// AllSeeds runs every seed for every fleet Verify simulates; by
	// default Verify stops a fleet's seeds once its outcome is decided
	// (see Planner.decided). Batch is how many seeds run at once (Run may
	// run them in parallel); 0 means 1.
	AllSeeds bool
	Batch    int
	// KVReserve is how slots are sized from the KV cache (KVMean if
	// empty).
	KVReserve KVReserve
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
	// reqs caches the DES's arrivals by rate and seed: they do not depend
	// on the fleet (routeRequests copies them before changing any).
	reqs map[reqKey][]workload.TraceRequest
}

type reqKey struct {
	lambda float64
	seed   uint64
}

// requests are the DES's arrivals at rate lambda with seed (cached).
func (pl *Planner) requests(lambda float64, seed uint64) ([]workload.TraceRequest, error) {
	k := reqKey{lambda, seed}
	if r, ok := pl.reqs[k]; ok {
		return r, nil
	}
	r, err := pl.w.Requests(lambda, pl.o.Warmup+pl.o.Measure, seed)
	if err != nil {
		return nil, err
	}
	pl.reqs[k] = r
	return r, nil
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
	if kv, err := ParseKVReserve(string(o.KVReserve)); err != nil {
		errs = append(errs, err)
	} else {
		o.KVReserve = kv
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
	pl := &Planner{w: w, o: o, samples: w.Samples(AnalyticSamples, rng), memo: map[string]*Eval{},
		reqs: map[reqKey][]workload.TraceRequest{}}
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
		m, err := poolModelOf(p.Name, p.Profile, a.pools[i], len(pl.samples), p.MaxTokens, pl.o.KVReserve)
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
	reqs, err := pl.requests(lambda, seed)
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
	return pl.evaluate(ctx, f, lambda, pol, r, false, false)
}

// evaluate runs the DES of fleet f for the planner's seeds. With adaptive
// (Verify's runs, unless Options.AllSeeds), it runs them Options.Batch at
// a time and stops as soon as the outcome against the target is decided
// (see decided); the Eval then covers the seeds that ran. With screen (a
// fleet the search expects to miss the target) it first runs the first
// seed over a ScreenShare of the measured window and stops there if that
// run already decides a miss.
func (pl *Planner) evaluate(ctx context.Context, f Fleet, lambda float64, pol string, r PoolRouter, adaptive, screen bool) (*Eval, error) {
	if pol == "" {
		pol = pl.o.Policy
	}
	if r == nil {
		r = pl.o.PoolRouter
	}
	adaptive = adaptive && !pl.o.AllSeeds
	key := fmt.Sprintf("%s|%g|%s|%s", f, lambda, pol, r.Name())
	if e, ok := pl.memo[key]; ok {
		return e, nil
	}
	if adaptive {
		if e, ok := pl.memo["adaptive|"+key]; ok {
			return e, nil
		}
	}
	models, err := pl.ModelsWith(f, r)
	if err != nil {
		return nil, err
	}
	seeds := pl.o.Seeds
	batch := len(seeds)
	if adaptive {
		batch = max(1, pl.o.Batch)
	}
	// bound is an upper bound of the measured requests of every seed.
	bound := func() int {
		var late time.Duration // a compressed request arrives this much later
		if c, ok := r.(Compressor); ok {
			late = c.Latency()
		}
		n := 0
		for _, seed := range seeds {
			reqs, err := pl.requests(lambda, seed)
			if err != nil {
				return math.MaxInt // no sure miss then
			}
			n += arrivalsIn(reqs, pl.o.Warmup-late, pl.o.Warmup+pl.o.Measure)
		}
		return n
	}
	var cfgs []sim.Config
	var routers []*desRouter
	var res []*sim.Result
	failed := 0
	if adaptive && screen {
		cfg, dr, n, err := pl.simConfig(ctx, f, models, lambda, seeds[0], pol, r)
		if err != nil {
			return nil, err
		}
		cfg.Measure = time.Duration(float64(cfg.Measure) * ScreenShare)
		end, _ := slices.BinarySearchFunc(cfg.Requests, cfg.Warmup+cfg.Measure, func(q workload.TraceRequest, t time.Duration) int {
			return cmp.Compare(q.Arrival, t)
		})
		cfg.Requests = cfg.Requests[:end]
		part, err := pl.o.Run(ctx, []sim.Config{cfg})
		if err != nil {
			return nil, fmt.Errorf("plan: simulating %s: %w", f, err)
		}
		c := []sim.Config{cfg}
		d := []*desRouter{dr}
		// No sure miss from a screen (its requests are not the whole run's):
		// only its batch-means interval decides.
		if v, lo, hi := pl.decided(c, part, d, func() int { return math.MaxInt / 2 }); v < 0 {
			e := pl.summarize(f, lambda, pol, c, d, part)
			e.PoolRouter, e.ClassifierErrors, e.P99Lo, e.P99Hi = r.Name(), n, Sec(lo), Sec(hi)
			pl.memo["adaptive|"+key] = e
			return e, nil
		}
	}
	var lo, hi float64
	for len(res) < len(seeds) {
		from := len(res)
		for _, seed := range seeds[from:min(len(seeds), from+batch)] {
			cfg, dr, n, err := pl.simConfig(ctx, f, models, lambda, seed, pol, r)
			if err != nil {
				return nil, err
			}
			cfgs, routers, failed = append(cfgs, cfg), append(routers, dr), failed+n
		}
		part, err := pl.o.Run(ctx, cfgs[from:])
		if err != nil {
			return nil, fmt.Errorf("plan: simulating %s: %w", f, err)
		}
		res = append(res, part...)
		if adaptive && len(res) < len(seeds) {
			var v int
			if v, lo, hi = pl.decided(cfgs, res, routers, bound); v != 0 {
				break
			}
		}
	}
	e := pl.summarize(f, lambda, pol, cfgs, routers, res)
	e.PoolRouter, e.ClassifierErrors = r.Name(), failed
	if len(res) == 1 && len(seeds) > 1 { // the interval decided tells more than one seed's
		e.P99Lo, e.P99Hi = Sec(lo), Sec(hi)
	}
	if len(res) == len(seeds) {
		pl.memo[key] = e
	} else {
		pl.memo["adaptive|"+key] = e
	}
	return e, nil
}

// arrivalsIn is how many of reqs (by arrival) arrive in [from, to).
func arrivalsIn(reqs []workload.TraceRequest, from, to time.Duration) int {
	n := 0
	for i := range reqs {
		if reqs[i].Arrival >= from && reqs[i].Arrival < to {
			n++
		}
	}
	return n
}

// decided reports whether the seeds run so far (res, with their configs
// and pool routers, which know each request's compression latency) decide
// the fleet's outcome against the P99 TTFT target: -1 a miss, 1 a pass, 0
// not yet, with the 95% interval of the P99 it used. bound gives an
// upper bound of the measured requests of every seed's run:
//
//   - a sure miss: more requests already missed the target than the pooled
//     P99 of every seed allows (a share 1 - 0.99 of bound, nearest rank),
//     so the seeds still to run cannot bring it back;
//   - the 95% confidence interval (Student's t) of the P99 lies wholly on
//     one side of the target, and so does the pooled P99 of the seeds run.
//     With two seeds or more the interval is of the per-seed P99s; with one
//     seed it is of the P99s of BatchWindows equal parts of its measured
//     window (batch means), each of at least MinBatchRequests requests.
func (pl *Planner) decided(cfgs []sim.Config, res []*sim.Result, routers []*desRouter, bound func() int) (verdict int, lo, hi float64) {
	slo := pl.o.SLO.Seconds()
	bad := 0
	var samples, all []float64
	for i, r := range res {
		from := len(all)
		parts := make([]ttfts, BatchWindows)
		for k := range r.Records {
			rec := &r.Records[k]
			v := math.Inf(1)
			if rec.Completed {
				v = (rec.TTFT() + routers[i].delay[rec.Session-1]).Seconds()
			}
			if v > slo {
				bad++
			}
			all = append(all, v)
			if len(res) == 1 {
				at := float64(rec.Start-cfgs[i].Warmup) / float64(cfgs[i].Measure)
				parts[min(BatchWindows-1, max(0, int(at*BatchWindows)))].add(v, false)
			}
		}
		if len(res) > 1 {
			seed := ttfts{v: all[from:]}
			samples = append(samples, seed.quantile(0.99))
			continue
		}
		for _, p := range parts {
			samples = append(samples, p.quantile(0.99))
			if len(p.v) < MinBatchRequests {
				samples = nil // too few for batch means
				break
			}
		}
	}
	pooled := (&ttfts{v: all}).quantile(0.99)
	lo, hi = pooled, pooled
	if samples != nil {
		lo, hi = confidence(samples)
	}
	allowed := func(n int) int { return n - int(math.Ceil(0.99*float64(n))) }
	switch {
	case bad > allowed(len(all)) && bad > allowed(bound()):
		return -1, lo, hi
	case samples == nil:
		return 0, lo, hi
	case hi <= slo && pooled <= slo:
		return 1, lo, hi
	case lo > slo && pooled > slo:
		return -1, lo, hi
	}
	return 0, lo, hi
}

// BatchWindows and MinBatchRequests: how decided splits a single seed's
// measured window into batches.
// ScreenShare is the share of the measured window a screening run covers.
const (
	BatchWindows     = 5
	MinBatchRequests = 200
	ScreenShare      = 0.25
)

// ttfts are the TTFTs of a group of requests in seconds (+Inf for one that
// failed) and how many met the SLO; quantile sorts them.
type ttfts struct {
	v    []float64
	good int
}

func (t *ttfts) add(v float64, good bool) {
	t.v = append(t.v, v)
	if good {
		t.good++
	}
}

// quantile is metrics.TTFTQuantile's nearest-rank quantile (it sorts v).
func (t *ttfts) quantile(p float64) float64 {
	slices.Sort(t.v)
	return metrics.Percentile(t.v, p)
}

func (t *ttfts) sloPct() float64 { return pct(float64(t.good), float64(len(t.v))) }

// summarize folds the DES results of every seed into an Eval. It keeps one
// float a request (not its record), so that the cost of a summary stays a
// small part of the runs'.
func (pl *Planner) summarize(f Fleet, lambda float64, pol string, cfgs []sim.Config, routers []*desRouter, res []*sim.Result) *Eval {
	e := &Eval{Fleet: f, Cost: f.Cost(), Lambda: lambda, Policy: pol, Seeds: len(res)}
	n := 0
	for _, r := range res {
		n += len(r.Records)
	}
	all := ttfts{v: make([]float64, 0, n)}
	var compressed ttfts
	byPool := make([]ttfts, len(f.Pools))
	var byCat [3]ttfts
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
		from := len(all.v)
		for k := range r.Records {
			rec := &r.Records[k]
			idx := int(rec.Session - 1)
			req := reqs[idx]
			ttft, good := math.Inf(1), false
			d := dr.delay[idx] // the compression latency is part of its TTFT
			if rec.Completed {
				ttft = (rec.TTFT() + d).Seconds()
				good = rec.TTFT()+d <= pl.o.SLO
			}
			if d > 0 {
				compressed.add(ttft, good)
			}
			if dr.cut[idx] {
				e.Truncated++
			}
			all.add(ttft, good)
			byCat[req.Category].add(ttft, good)
			switch rec.Reason {
			case "too_long":
				e.TooLong++
			case "":
			default:
				e.Rejected++
			}
			p := dr.picked[idx]
			if p >= 0 {
				byPool[p].add(ttft, good)
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
		seed := ttfts{v: all.v[from:]}
		perSeed = append(perSeed, seed.quantile(0.99))
		for b, be := range r.Backends {
			busy[cfgs[i].Backends[b].Pool] += be.BusyPct / float64(f.Pools[cfgs[i].Backends[b].Pool].Instances) / float64(len(res))
		}
	}
	e.Requests = len(all.v)
	e.Compressed, e.CompressedP99 = len(compressed.v), Sec(compressed.quantile(0.99))
	e.P50, e.P99 = Sec(all.quantile(0.5)), Sec(all.quantile(0.99))
	lo, hi := confidence(perSeed)
	e.P99Lo, e.P99Hi = Sec(lo), Sec(hi)
	e.SLOPct = all.sloPct()
	e.ReusePct = pct(float64(cached), float64(prompt))
	if window > 0 {
		e.ThroughputRPS = float64(e.Completed) / window
	}
	for i, p := range f.Pools {
		e.Pools = append(e.Pools, PoolEval{Name: p.Name, Instances: p.Instances, Requests: len(byPool[i].v), SharePct: pct(float64(len(byPool[i].v)), float64(len(all.v))),
			P99: Sec(byPool[i].quantile(0.99)), SLOPct: byPool[i].sloPct(), BusyPct: busy[i],
			ReusePct: pct(float64(poolCached[i]), float64(poolPrompt[i]))})
	}
	for c := range byCat {
		if len(byCat[c].v) > 0 {
			e.Categories = append(e.Categories, CategoryEval{Name: workload.Category(c).String(), Requests: len(byCat[c].v),
				P99: Sec(byCat[c].quantile(0.99))})
		}
	}
	e.Pass = e.Requests > 0 && float64(e.P99) <= pl.o.SLO.Seconds()
	return e
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
