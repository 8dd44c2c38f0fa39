package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Candidate is a fleet sized by the analytical model.
type Candidate struct {
	Fleet Fleet   `json:"fleet"`
	Cost  float64 `json:"cost_per_hr"`
	// Threshold is the short pool's max tokens (0 for one pool).
	Threshold int `json:"threshold"`
	// ShortShare is the share of requests in the short pool.
	ShortShare float64 `json:"short_share"`
	// P99 is the analytical P99 TTFT of the worst pool; Util the highest
	// pool utilization.
	P99  Sec     `json:"analytic_ttft_p99_s"`
	Util float64 `json:"max_util"`
	// PoolRouter is the router the sizes assume; Compressed is the share
	// of requests it compresses (compress-and-route).
	PoolRouter string  `json:"pool_router"`
	Compressed float64 `json:"compressed_share,omitempty"`
	// Err says why no size meets the target (the fleet is then empty).
	Err string `json:"error,omitempty"`

	router PoolRouter
}

// PoolChoice is the pool layouts to search: profiles for a single pool or
// the long pool, profiles for the short pool, the short pool's candidate
// thresholds (nil: the workload's breakpoints) and the long pool's max
// tokens (0: the workload's largest request).
type PoolChoice struct {
	Short, Long []*Profile
	Thresholds  []int
	LongMax     int
	// SingleOnly and TwoOnly restrict the layouts.
	SingleOnly, TwoOnly bool
	// Routers are the pool routers to size two-pool layouts with (nil: the
	// planner's); a single pool is sized with the first.
	Routers []PoolRouter
}

func (pl *Planner) longMax(c PoolChoice) int {
	if c.LongMax > 0 {
		return c.LongMax
	}
	return pl.w.MaxTokens()
}

// Size sizes every pool of fleet f analytically at rate lambda (the
// instance counts of f are ignored) with the planner's pool router.
func (pl *Planner) Size(f Fleet, lambda float64) Candidate {
	return pl.SizeWith(f, lambda, pl.o.PoolRouter)
}

// SizeWith is Size with pool router r.
func (pl *Planner) SizeWith(f Fleet, lambda float64, r PoolRouter) Candidate {
	c := Candidate{Fleet: Fleet{Pools: slices.Clone(f.Pools)}, PoolRouter: r.Name(), router: r}
	if len(f.Pools) == 2 {
		c.Threshold = f.Pools[0].MaxTokens
	}
	models, err := pl.ModelsWith(f, r)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	if err := f.validate(); err == nil {
		a := pl.assign(f, r)
		c.Compressed = a.compressed
		if a.tooLong > 0.01 {
			c.Err = fmt.Sprintf("%.1f%% of requests are longer than every pool's max context (%d tokens) or the prompt than the pool the %s router picks: they are rejected, so no size meets a P99 target",
				100*a.tooLong, f.Pools[len(f.Pools)-1].MaxTokens, r.Name())
			return c
		}
	}
	if len(models) == 2 {
		c.ShortShare = models[0].Share
	}
	for i, m := range models {
		n, err := m.Size(lambda, pl.o.SLO, pl.o.UtilCap, pl.o.MaxInstances)
		if err != nil {
			c.Err = err.Error()
			return c
		}
		if m.Empty() {
			n = 1 // a pool the samples never reach still needs an instance to exist
		}
		c.Fleet.Pools[i].Instances = n
		if !m.Empty() {
			c.P99 = max(c.P99, Sec(m.TTFT99(n, lambda)))
			c.Util = max(c.Util, m.Queue(n, lambda).Utilization())
		}
	}
	c.Cost = c.Fleet.Cost()
	return c
}

// Candidates sizes every layout of choice at rate lambda, cheapest first
// (those that cannot meet the target last).
func (pl *Planner) Candidates(choice PoolChoice, lambda float64) []Candidate {
	long := pl.longMax(choice)
	routers := choice.Routers
	if len(routers) == 0 {
		routers = []PoolRouter{pl.o.PoolRouter}
	}
	var out []Candidate
	if !choice.TwoOnly {
		for _, p := range choice.Long {
			out = append(out, pl.SizeWith(Fleet{Pools: []PoolSpec{{Name: "all", Profile: p, MaxTokens: long}}}, lambda, routers[0]))
		}
	}
	if !choice.SingleOnly {
		th := choice.Thresholds
		if th == nil {
			th = pl.w.Breakpoints()
		}
		for _, b := range th {
			if b >= long {
				continue
			}
			for _, ps := range choice.Short {
				for _, plong := range choice.Long {
					for _, r := range routers {
						out = append(out, pl.SizeWith(Fleet{Pools: []PoolSpec{{Name: "short", Profile: ps, MaxTokens: b},
							{Name: "long", Profile: plong, MaxTokens: long}}}, lambda, r))
					}
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if (a.Err == "") != (b.Err == "") {
			if a.Err == "" {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(a.Fleet.Instances(), b.Fleet.Instances()))
	})
	return out
}

// Verified is a candidate checked with the DES: the smallest sizes near the
// analytical ones that meet the target, and the evidence that one instance
// fewer in any pool does not.
type Verified struct {
	Candidate Candidate `json:"candidate"`
	// Eval is the DES of the verified fleet; nil if no size up to the
	// bound met the target (Note says why).
	Eval *Eval `json:"des"`
	// Smaller are the DES of the fleets with one instance fewer in one pool
	// (a pool of one instance has none).
	Smaller []*Eval `json:"smaller"`
	// Sims is how many fleets the search simulated.
	Sims int    `json:"fleets_simulated"`
	Note string `json:"note,omitempty"`
}

// MaxVerifySteps bounds the DES search of one candidate.
const MaxVerifySteps = 40

// Verify searches, with the DES at rate lambda, for the smallest fleet near
// candidate c's sizes that meets the P99 TTFT target: it grows the pool
// whose P99 is worst (by an eighth, at least one instance) until the fleet
// meets the target, then shrinks each pool, most expensive first, while the
// fleet still meets it (shrinkPool: one instance at a time up to 16, by
// doubling steps and a bisection above). The result meets the target and
// every fleet with one instance fewer in one pool misses it (both in the
// DES with the planner's seeds).
func (pl *Planner) Verify(ctx context.Context, c Candidate, lambda float64) (*Verified, error) {
	v := &Verified{Candidate: c}
	if c.Err != "" {
		v.Note = c.Err
		return v, nil
	}
	sims := map[string]bool{}
	eval := func(f Fleet, screen bool) (*Eval, error) {
		sims[f.key()] = true
		return pl.evaluate(ctx, f, lambda, "", c.router, true, screen)
	}
	f := c.Fleet
	e, err := eval(f, false)
	if err != nil {
		return nil, err
	}
	best, flat := float64(e.P99), 0
	for steps := 0; !e.Pass; steps++ {
		// More instances shorten the wait for a slot, not a request's own
		// prefill: a P99 that stops falling is the workload's floor.
		if p := float64(e.P99); p < best*0.98 {
			best, flat = p, 0
		} else if flat++; flat == 4 && !math.IsInf(p, 1) {
			v.Note = fmt.Sprintf("the DES P99 TTFT stays near %.2fs however many instances (up to %s): the longest requests' own prefill takes that long, so a %v target needs a faster profile or a smaller max context",
				best, f, pl.o.SLO)
			v.Sims = len(sims)
			return v, nil
		}
		if steps == MaxVerifySteps {
			v.Note = fmt.Sprintf("no fleet up to %s met a P99 TTFT of %v in the DES (P99 %s s, %d rejected, %d too long)",
				f, pl.o.SLO, e.P99, e.Rejected, e.TooLong)
			v.Sims = len(sims)
			return v, nil
		}
		if e.TooLong > 0 && float64(e.TooLong) > 0.01*float64(e.Requests) {
			v.Note = fmt.Sprintf("%d of %d requests are longer than every pool's max context and are rejected: no size meets a P99 target", e.TooLong, e.Requests)
			v.Sims = len(sims)
			return v, nil
		}
		worst := 0
		for i, p := range e.Pools {
			if p.P99 > e.Pools[worst].P99 || (p.P99 == e.Pools[worst].P99 && p.Requests > e.Pools[worst].Requests) {
				worst = i
			}
		}
		n := f.Pools[worst].Instances
		if n >= pl.o.MaxInstances {
			v.Note = fmt.Sprintf("pool %s reached the bound of %d instances without meeting the target", f.Pools[worst].Name, pl.o.MaxInstances)
			v.Sims = len(sims)
			return v, nil
		}
		f = f.with(worst, min(pl.o.MaxInstances, n+max(1, n/8)))
		if e, err = eval(f, false); err != nil {
			return nil, err
		}
	}
	// Shrink, most expensive pool first: each pool to the fewest
	// instances that still meet the target with the others fixed
	// (shrinkPool), then again from the top while any pool shrank. More
	// instances never raise the P99, the assumption the search above rests
	// on too. The last round tries one fewer in every pool and each
	// misses: those runs are the evidence in v.Smaller.
	shrinkEval := map[string]*Eval{}
	tryFleet := func(g Fleet) (*Eval, error) {
		if ge, ok := shrinkEval[g.key()]; ok {
			return ge, nil
		}
		ge, err := eval(g, true)
		if err == nil {
			shrinkEval[g.key()] = ge
		}
		return ge, err
	}
	for shrunk := true; shrunk; {
		shrunk = false
		order := make([]int, len(f.Pools))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return -cmp.Compare(float64(f.Pools[a].Instances)*f.Pools[a].Profile.Cost(), float64(f.Pools[b].Instances)*f.Pools[b].Profile.Cost())
		})
		v.Smaller = v.Smaller[:0]
		for _, i := range order {
			n := f.Pools[i].Instances
			if n <= 1 {
				continue
			}
			pass, passEval, missed, err := shrinkPool(n, e, func(m int) (*Eval, error) { return tryFleet(f.with(i, m)) })
			if err != nil {
				return nil, err
			}
			if missed != nil {
				v.Smaller = append(v.Smaller, missed)
			}
			if pass < n {
				f, e, shrunk = f.with(i, pass), passEval, true
				break
			}
		}
	}
	v.Eval = e
	v.Sims = len(sims)
	if len(v.Smaller) == 0 {
		v.Note = "every pool has one instance: there is no smaller fleet of this layout"
	}
	return v, nil
}

// shrinkPool is one pool's step of Verify's shrink. One fewer is tried
// first; above gallopAbove instances, while that passes the step doubles
// (n-1, then 2, 4, 8 ... fewer than the last count that passed) and a
// bisection between the last count that passed and the first that missed
// ends it, so a pool of thousands of instances costs a few DES runs, not
// one per instance. A pool of gallopAbove or
// fewer shrinks one at a time (Verify then starts again from the most
// expensive pool), as the planner always did. From n instances, whose
// fleet passed with e, it returns the fewest that try reports passing
// (try(m) evaluates the fleet with m instances in the pool) and that
// fleet's Eval, and missed, one fewer's Eval when that missed (nil if it
// passed).
func shrinkPool(n int, e *Eval, try func(m int) (*Eval, error)) (pass int, passEval, missed *Eval, err error) {
	pass, passEval, miss := n, e, 0 // miss 0: no count known to miss yet
	for step := 1; pass > 1; step *= 2 {
		m := max(1, pass-step)
		ge, err := try(m)
		if err != nil {
			return 0, nil, nil, err
		}
		if !ge.Pass {
			if pass == n {
				missed = ge
			}
			miss = m
			break
		}
		pass, passEval = m, ge
		if n <= gallopAbove {
			break // one at a time, from the top again
		}
	}
	for miss > 0 && pass-miss > 1 {
		m := miss + (pass-miss)/2
		ge, err := try(m)
		if err != nil {
			return 0, nil, nil, err
		}
		if ge.Pass {
			pass, passEval = m, ge
		} else {
			miss = m
		}
	}
	return pass, passEval, missed, nil
}

// gallopAbove is the pool size above which Verify's shrink doubles its
// step instead of taking one instance at a time.
const gallopAbove = 16

// Optimized is the result of Optimize.
type Optimized struct {
	Lambda     float64     `json:"lambda"`
	SLOS       float64     `json:"slo_s"`
	Candidates []Candidate `json:"candidates"`
	Verified   []*Verified `json:"verified"`
	// Best is the cheapest verified fleet (nil if none met the target).
	Best *Verified `json:"best"`
}

// Optimize ranks the layouts of choice by their analytical hourly cost at
// the workload's rate, verifies the cheapest topK with the DES (Verify) and
// recommends the cheapest verified fleet.
func (pl *Planner) Optimize(ctx context.Context, choice PoolChoice, topK int) (*Optimized, error) {
	if len(choice.Long) == 0 || (len(choice.Short) == 0 && !choice.SingleOnly) {
		return nil, errors.New("plan: give at least one profile for each pool")
	}
	lambda := pl.w.Lambda
	out := &Optimized{Lambda: lambda, SLOS: pl.o.SLO.Seconds(), Candidates: pl.Candidates(choice, lambda)}
	for i := 0; i < len(out.Candidates) && i < topK; i++ {
		if out.Candidates[i].Err != "" {
			break
		}
		c := out.Candidates[i]
		if out.Best != nil && c.Cost >= out.Best.Eval.Cost && !pl.o.AllSeeds {
			pruned, err := pl.prune(ctx, c, lambda, out.Best.Eval.Cost)
			if err != nil {
				return nil, err
			}
			if pruned != nil {
				out.Verified = append(out.Verified, pruned)
				continue
			}
		}
		v, err := pl.Verify(ctx, c, lambda)
		if err != nil {
			return nil, err
		}
		out.Verified = append(out.Verified, v)
		if v.Eval != nil && (out.Best == nil || v.Eval.Cost < out.Best.Eval.Cost) {
			out.Best = v
		}
	}
	return out, nil
}

// prune checks, with one DES run, whether candidate c can beat a verified
// fleet of hourly cost best: it simulates the probe fleet whose every pool
// has as many instances as it can while the other pools have one and the
// fleet costs less than best. Every fleet of c's layout that costs less
// than best has at most the probe's instances in every pool, so if the
// probe misses the target, none of them meets it (more instances never
// raise the P99, the assumption Verify's search rests on too) and prune
// returns the candidate's Verified with that evidence and no Eval; else nil.
func (pl *Planner) prune(ctx context.Context, c Candidate, lambda, best float64) (*Verified, error) {
	if c.Err != "" {
		return nil, nil
	}
	probe := Fleet{Pools: slices.Clone(c.Fleet.Pools)}
	ones := 0.0
	for _, p := range probe.Pools {
		ones += p.Profile.Cost()
	}
	for i := range probe.Pools {
		unit := probe.Pools[i].Profile.Cost()
		n := int(math.Ceil((best-ones)/unit - 1e-9)) // ones - unit + n unit < best
		if n < 1 {
			return &Verified{Candidate: c, Note: fmt.Sprintf("not verified: one instance in every pool costs $%.2f/hr, no less than the recommended $%.2f/hr", ones, best)}, nil
		}
		probe.Pools[i].Instances = min(n, pl.o.MaxInstances)
	}
	e, err := pl.evaluate(ctx, probe, lambda, "", c.router, true, true)
	if err != nil {
		return nil, err
	}
	if e.Pass {
		return nil, nil
	}
	return &Verified{Candidate: c, Smaller: []*Eval{e}, Sims: 1,
		Note: fmt.Sprintf("not verified: %s, as large as a fleet of this layout can be in every pool while costing less than the recommended $%.2f/hr, misses the target in the DES (P99 %s s)",
			probe, best, e.P99)}, nil
}

// ParetoPoint is one short-pool threshold's analytical sizing.
type ParetoPoint struct {
	Candidate
	// Dominated: another threshold is no worse in both cost and worst-pool
	// P99 and better in one.
	Dominated bool `json:"dominated"`
}

// Pareto sizes the two-pool layout (short profile, long profile) at every
// threshold of choice (the workload's breakpoints by default) whose short
// pool takes between 1% and 99% of requests, and marks the points not
// dominated in hourly cost and worst-pool analytical P99 TTFT.
func (pl *Planner) Pareto(choice PoolChoice) []ParetoPoint {
	choice.TwoOnly = true
	choice.Short, choice.Long = choice.Short[:1], choice.Long[:1]
	var pts []ParetoPoint
	for _, c := range pl.Candidates(choice, pl.w.Lambda) {
		if c.Err == "" && (c.ShortShare < 0.01 || c.ShortShare > 0.99) {
			continue
		}
		pts = append(pts, ParetoPoint{Candidate: c})
	}
	slices.SortStableFunc(pts, func(a, b ParetoPoint) int { return cmp.Compare(a.Threshold, b.Threshold) })
	for i := range pts {
		a := &pts[i]
		if a.Err != "" {
			a.Dominated = true
			continue
		}
		for j := range pts {
			b := &pts[j]
			if i != j && b.Err == "" && b.Cost <= a.Cost && b.P99 <= a.P99 && (b.Cost < a.Cost || b.P99 < a.P99) {
				a.Dominated = true
				break
			}
		}
	}
	return pts
}

// WhatIfPoint is one rate of a sweep.
type WhatIfPoint struct {
	Lambda float64 `json:"lambda"`
	// Best is the cheapest analytical layout at this rate.
	Best Candidate `json:"best"`
	// Fixed is the DES of the given fleet at this rate (if one was given).
	Fixed *Eval `json:"fixed,omitempty"`
}

// WhatIf sweeps the arrival rate: the cheapest analytical layout of choice
// at each rate and, if fixed has pools, the DES of that fleet at each rate.
func (pl *Planner) WhatIf(ctx context.Context, choice PoolChoice, rates []float64, fixed Fleet) ([]WhatIfPoint, error) {
	var out []WhatIfPoint
	for _, lambda := range rates {
		if !(lambda > 0) || math.IsInf(lambda, 0) {
			return nil, fmt.Errorf("plan: rate %v: want a finite number > 0", lambda)
		}
		pt := WhatIfPoint{Lambda: lambda}
		if cands := pl.Candidates(choice, lambda); len(cands) > 0 {
			pt.Best = cands[0]
		}
		if len(fixed.Pools) > 0 {
			e, err := pl.Evaluate(ctx, fixed, lambda, "")
			if err != nil {
				return nil, err
			}
			pt.Fixed = e
		}
		out = append(out, pt)
	}
	return out, nil
}

// ComparePoolRouters runs the DES of fleet f with each pool router picking
// the pools (the planner's policy placing requests inside them).
func (pl *Planner) ComparePoolRouters(ctx context.Context, f Fleet, routers []PoolRouter) ([]*Eval, error) {
	var out []*Eval
	for _, r := range routers {
		e, err := pl.EvaluateWith(ctx, f, pl.w.Lambda, "", r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ComparePolicies runs the DES of fleet f with each policy placing
// requests inside the pools (the planner's pool router picks the pool in
// every case).
func (pl *Planner) ComparePolicies(ctx context.Context, f Fleet, policies []string) ([]*Eval, error) {
	var out []*Eval
	for _, p := range policies {
		if !pl.o.Registry.Has(p) {
			return nil, fmt.Errorf("plan: unknown policy %q (known: %v)", p, pl.o.Registry.Names())
		}
		e, err := pl.Evaluate(ctx, f, pl.w.Lambda, p)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
