package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// ModelShare is one model of a workload's model mix and its share of the
// requests (for the model router).
type ModelShare struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
}

// ParseModels reads "llama-8b=0.7,llama-70b=0.3"; the shares must add up
// to 1.
func ParseModels(s string) ([]ModelShare, error) {
	var out []ModelShare
	sum := 0.0
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || name == "" || err != nil || !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("model mix %q: want name=share pairs with shares in [0, 1], like llama-8b=0.7,llama-70b=0.3", s)
		}
		if slices.ContainsFunc(out, func(m ModelShare) bool { return m.Name == name }) {
			return nil, fmt.Errorf("model mix: %q given twice", name)
		}
		out = append(out, ModelShare{name, v})
		sum += v
	}
	if math.Abs(sum-1) > 1e-6 {
		return nil, fmt.Errorf("model mix: shares add up to %v, want 1", sum)
	}
	return out, nil
}

// drawModel picks a model of the mix for a uniform draw u ("" without a mix).
func drawModel(models []ModelShare, u float64) string {
	for _, m := range models {
		if u < m.Share {
			return m.Name
		}
		u -= m.Share
	}
	if len(models) == 0 {
		return ""
	}
	return models[len(models)-1].Name
}

// drawCategory picks a category of the mix for a uniform draw u.
func drawCategory(m workload.Mix, u float64) workload.Category {
	for c := range len(m) - 1 {
		if u < m[c] {
			return workload.Category(c)
		}
		u -= m[c]
	}
	return workload.Category(len(m) - 1)
}

// outputStats are the mean and median output of samples.
func outputStats(samples []Sample) OutputStats {
	if len(samples) == 0 {
		return OutputStats{}
	}
	outs := make([]int, len(samples))
	sum := 0
	for i, s := range samples {
		outs[i] = s.Out
		sum += s.Out
	}
	slices.Sort(outs)
	return OutputStats{Mean: int(math.Round(float64(sum) / float64(len(outs)))), Median: outs[len(outs)/2]}
}

func (pl *Planner) estimateFor(r PoolRouter) int {
	if e, ok := r.(estimator); ok {
		return e.estimate(pl.stats)
	}
	return 0
}

// everySample is every request of a trace, or the analytical samples of a
// CDF.
func (pl *Planner) everySample() []Sample {
	if pl.w.Trace == nil {
		return pl.samples
	}
	out := make([]Sample, len(pl.w.Trace))
	for i, r := range pl.w.Trace {
		out[i] = Sample{In: r.InputTokens, Out: max(r.OutputTokens, 1), Cat: r.Category}
	}
	return out
}

// idleViews are f's pools with no load (the analytical model's view).
func idleViews(f Fleet) []PoolView {
	v := make([]PoolView, len(f.Pools))
	for i, p := range f.Pools {
		v[i] = PoolView{Name: p.Name, MaxTokens: p.MaxTokens, Slots: max(1, p.Instances)}
	}
	return v
}

// assignment is how a pool router splits the analytical samples.
type assignment struct {
	pools                        [][]Sample
	tooLong, compressed, trimmed float64 // shares of all samples
}

// assign routes every analytical sample with r over f's pools, idle: the
// load-aware routers (spillover, least-loaded) then route by length, as
// the Fleet Sim model's analytical sizing does. A compressor compresses a
// share Probability() of the requests it may compress; a request sent to
// a pool too small for its answer has the answer cut at the pool's max.
func (pl *Planner) assign(f Fleet, r PoolRouter) assignment {
	views := idleViews(f)
	a := assignment{pools: make([][]Sample, len(f.Pools))}
	comp, _ := r.(Compressor)
	est := pl.estimateFor(r)
	rng := rand.New(rand.NewPCG(pl.o.Seed, 0x726f757465))
	n := float64(len(pl.samples))
	for _, s := range pl.samples {
		req := PoolRequest{InputTokens: s.In, OutputTokens: s.Out, EstimatedOutput: est, Category: s.Cat, Model: s.Model, Label: s.Cat.String()}
		u1, u2 := rng.Float64(), rng.Float64()
		if comp != nil {
			if in, ok := comp.Compress(req, views); ok && u1 < comp.Probability() {
				req.InputTokens = in
				s.In, s.Delay = in, comp.Latency()
				a.compressed++
			}
		}
		p := r.Route(req, views, u2)
		if p < 0 || p >= len(views) || s.In >= views[p].MaxTokens {
			a.tooLong++
			continue
		}
		if s.Total() > views[p].MaxTokens {
			s.Out = views[p].MaxTokens - s.In
			a.trimmed++
		}
		a.pools[p] = append(a.pools[p], s)
	}
	a.tooLong /= n
	a.compressed /= n
	a.trimmed /= n
	return a
}

// desRouter is a pool router bound to one DES run (it implements
// sim.PoolRouter): what the router knows of each request, each one's
// compression latency, and the pool it picked and whether its answer was
// cut (both filled in during the run).
type desRouter struct {
	r      PoolRouter
	views  []PoolView
	reqs   []PoolRequest
	delay  []time.Duration // compression latency, 0 if not compressed
	picked []int
	cut    []bool
	rng    *rand.Rand
}

// ReadsLoads implements sim.PoolLoadReader: a load-blind router (loadBlind)
// does not.
func (d *desRouter) ReadsLoads() bool { return !loadBlind(d.r) }

// Pool implements sim.PoolRouter; loads is nil for a load-blind router.
func (d *desRouter) Pool(_ time.Duration, i int, t workload.Turn, loads []sim.PoolLoad) (int, int) {
	for p := range loads {
		d.views[p].Active, d.views[p].Queued = loads[p].Active, loads[p].Queued
	}
	req := d.reqs[i]
	req.InputTokens, req.OutputTokens = t.PromptTokens, t.OutputTokens
	p := d.r.Route(req, d.views, d.rng.Float64())
	if p < 0 || p >= len(d.views) || t.PromptTokens >= d.views[p].MaxTokens {
		return -1, 0
	}
	d.picked[i] = p
	if t.PromptTokens+t.OutputTokens > d.views[p].MaxTokens {
		d.cut[i] = true
		return p, d.views[p].MaxTokens - t.PromptTokens
	}
	return p, 0
}

// routeRequests prepares the requests of a DES run for router r: it draws
// each request's model, asks the classifier (if r is semantic and the
// planner has one), compresses what a compressor compresses (its prompt
// shortened, its prefix blocks dropped, its arrival at the router later by
// the compression latency) and returns the requests, re-sorted by arrival
// and cut at span, with the router for the run.
func (pl *Planner) routeRequests(ctx context.Context, f Fleet, models []*PoolModel, reqs []workload.TraceRequest, span time.Duration,
	seed uint64, r PoolRouter) ([]workload.TraceRequest, *desRouter, int, error) {
	views := idleViews(f)
	for i := range views {
		views[i].Slots = max(1, f.Pools[i].Instances*max(1, models[i].Slots))
		if models[i].Empty() {
			views[i].Slots = f.Pools[i].Instances * max(1, f.Pools[i].Profile.EngineFor(PoolShape{MeanInput: 1, MeanContext: 1, MaxTokens: f.Pools[i].MaxTokens}).MaxSeqs)
		}
	}
	est := pl.estimateFor(r)
	_, semantic := r.(*SemanticRouter)
	comp, _ := r.(Compressor)
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	reqs = slices.Clone(reqs)
	meta := make([]PoolRequest, len(reqs))
	delay := make([]time.Duration, len(reqs))
	failed := 0
	for i := range reqs {
		q := &reqs[i]
		m := PoolRequest{InputTokens: q.InputTokens, OutputTokens: max(q.OutputTokens, 1), EstimatedOutput: est, Category: q.Category,
			Model: drawModel(pl.w.Models, rng.Float64()), Label: q.Category.String()}
		if semantic && pl.o.Classifier != nil {
			label, err := pl.o.Classifier.Classify(ctx, m)
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, nil, 0, ctxErr
			}
			if err != nil {
				failed++
			}
			m.Label = label
		}
		if comp != nil && comp.Safe(q.Category) {
			if in, ok := comp.Compress(m, views); ok {
				q.InputTokens, q.BlockHashes, q.Arrival = in, nil, q.Arrival+comp.Latency()
				m.InputTokens, delay[i] = in, comp.Latency()
			}
		}
		meta[i] = m
	}
	if comp != nil && comp.Latency() > 0 {
		order := make([]int, len(reqs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return int(reqs[a].Arrival - reqs[b].Arrival) })
		sorted, sm, sd := make([]workload.TraceRequest, 0, len(reqs)), make([]PoolRequest, 0, len(reqs)), make([]time.Duration, 0, len(reqs))
		for _, i := range order {
			if reqs[i].Arrival >= span {
				continue
			}
			sorted, sm, sd = append(sorted, reqs[i]), append(sm, meta[i]), append(sd, delay[i])
		}
		reqs, meta, delay = sorted, sm, sd
	}
	d := &desRouter{r: r, views: views, reqs: meta, delay: delay, picked: make([]int, len(reqs)), cut: make([]bool, len(reqs)),
		rng: rand.New(rand.NewPCG(seed, 0x706f6f6c))}
	for i := range d.picked {
		d.picked[i] = -1
	}
	return reqs, d, failed, nil
}

// ParsePoolRouter reads NAME[:key=value,...] with the built-in routers.
func ParsePoolRouter(spec string) (PoolRouter, error) { return NewPoolRouterRegistry().Parse(spec) }

// EstimateError is how well an output estimate known at request time
// stands in for the real output when a length router picks pools.
type EstimateError struct {
	Estimate string `json:"estimate"`
	// Tokens is the estimate's value; MAE and MedianAE the mean and
	// median absolute error of the output it estimates, in tokens.
	Tokens   int     `json:"tokens"`
	MAE      float64 `json:"mae_tokens"`
	MedianAE int     `json:"median_ae_tokens"`
	// At each threshold: the share of requests the estimate puts in the
	// short pool though their total does not fit (their answer is cut) and
	// the share it puts in the long pool though they would fit the short.
	Thresholds []ThresholdError `json:"thresholds"`
}

// ThresholdError is one short-pool threshold's misroutes.
type ThresholdError struct {
	Threshold int     `json:"threshold"`
	ShortPct  float64 `json:"short_pct"`
	CutPct    float64 `json:"cut_pct"`
	WastePct  float64 `json:"waste_pct"`
}

// EstimateErrors measures each length router's output estimate against
// the workload (every request of a trace, the analytical samples of a
// CDF) at each short-pool threshold. The mean and median estimates are
// the workload's own: what a live router would learn from history.
func (pl *Planner) EstimateErrors(routers []*LengthRouter, thresholds []int) ([]EstimateError, error) {
	if len(thresholds) == 0 {
		return nil, errors.New("plan: give at least one threshold")
	}
	var out []EstimateError
	for _, r := range routers {
		est := pl.estimateFor(r)
		e := EstimateError{Estimate: r.Name(), Tokens: est}
		samples := pl.everySample()
		errs := make([]int, len(samples))
		sum := 0.0
		for i, s := range samples {
			guess := est
			if r.Estimate == EstimateOracle {
				guess = s.Out
			}
			errs[i] = abs(guess - s.Out)
			sum += float64(errs[i])
		}
		slices.Sort(errs)
		e.MAE, e.MedianAE = sum/float64(len(errs)), errs[len(errs)/2]
		for _, th := range thresholds {
			var short, cut, waste int
			for _, s := range samples {
				guess := s.In + est
				if r.Estimate == EstimateOracle {
					guess = s.Total()
				}
				switch {
				case s.Total() <= th:
					short++
					if guess > th {
						waste++
					}
				case guess <= th:
					cut++
				}
			}
			n := float64(len(samples))
			e.Thresholds = append(e.Thresholds, ThresholdError{Threshold: th, ShortPct: 100 * float64(short) / n,
				CutPct: 100 * float64(cut) / n, WastePct: 100 * float64(waste) / n})
		}
		out = append(out, e)
	}
	return out, nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
