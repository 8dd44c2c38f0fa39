package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/plan/poolpick"
	"github.com/stargate-llm/stargate/workload"
)

// PoolRequest is what a pool router knows of a request.
type PoolRequest struct {
	InputTokens int
	// OutputTokens is the answer's real length: the planner knows it, a
	// live router does not (see LengthRouter's estimate).
	OutputTokens int
	// EstimatedOutput is the output estimate a live router would have at
	// request time (set by the planner from the router's estimate).
	EstimatedOutput int
	Category        workload.Category
	Model           string
	// Label is the semantic classifier's answer ("" if it was not asked,
	// failed or timed out).
	Label string
}

// Total is input plus output tokens (the oracle's length).
func (r PoolRequest) Total() int { return r.InputTokens + r.OutputTokens }

// PoolView is one pool as a pool router sees it: pools come by increasing
// MaxTokens.
type PoolView struct {
	Name      string
	MaxTokens int
	// Slots is the sequences the pool runs at once (instances x sequences
	// per instance); Active and Queued are its running and queued requests.
	Slots          int
	Active, Queued int
}

// Pressure is the pool's active plus queued requests per slot.
func (p PoolView) Pressure() float64 {
	if p.Slots <= 0 {
		return math.Inf(1)
	}
	return float64(p.Active+p.Queued) / float64(p.Slots)
}

// PoolRouter picks a pool for each request before any placement inside
// it. Route must be pure: the same request, pools and u give the same pool.
type PoolRouter interface {
	// Name is the router and its parameters as ParsePoolRouter reads them.
	Name() string
	// Route is the index in pools of req's pool, or -1 to reject it; u is
	// a uniform draw in [0, 1) for routers that randomize.
	Route(req PoolRequest, pools []PoolView, u float64) int
}

// loadBlind reports whether r is one of this package's routers whose Route
// never reads a pool's Active or Queued. The DES fills those for every
// other router, which costs a pass over every backend of the fleet per
// request; TestLoadBlindRoutersIgnoreLoad checks each router listed. The
// list names exact types, not a method a router has: a type that embeds
// one of these and routes by load in its own Route would inherit such a
// method, and the DES would hand it no loads.
func loadBlind(r PoolRouter) bool {
	switch r.(type) {
	case *LengthRouter, *CompressAndRouteRouter, RandomRouter, *RandomRouter, *ModelRouter, *SemanticRouter:
		return true
	}
	return false
}

// Compressor is a pool router that shortens some requests' prompts before
// routing them (compress-and-route).
type Compressor interface {
	// Compress is the input req would be shortened to, if it may be.
	Compress(req PoolRequest, pools []PoolView) (input int, ok bool)
	// Safe reports whether requests of a category may be compressed (the
	// DES's rule).
	Safe(c workload.Category) bool
	// Probability is the share of compressible requests the analytical
	// model compresses.
	Probability() float64
	// Latency is what compressing one prompt adds to its TTFT.
	Latency() time.Duration
}

// Classifier answers a category for a request (the semantic router's
// input). The planner calls it once per request before a DES run, in order;
// an error means no answer (the router falls back).
type Classifier interface {
	Classify(ctx context.Context, req PoolRequest) (string, error)
}

// poolChecker is a router that names pools: it checks the names against a
// fleet.
type poolChecker interface {
	checkPools(names []string) error
}

// estimator is a router that uses an output estimate known at request time.
type estimator interface {
	estimate(stats OutputStats) int
}

// OutputStats are a workload's output lengths, for output estimates.
type OutputStats struct{ Mean, Median int }

// CheckPoolRouter reports whether router r can route over pools named
// names (the model and semantic routers name pools).
func CheckPoolRouter(r PoolRouter, names []string) error {
	if c, ok := r.(poolChecker); ok {
		return c.checkPools(names)
	}
	return nil
}

// ----- the seven routers -----

// EstimateKind is how LengthRouter knows a request's output length.
type EstimateKind uint8

// The output estimates: the real output (an oracle), a fixed number of
// tokens, or the workload's mean or median output.
const (
	EstimateOracle EstimateKind = iota
	EstimateFixed
	EstimateMean
	EstimateMedian
)

// LengthRouter sends a request to the pool of smallest max context that
// holds its tokens (poolpick.ByLength): with the oracle estimate (the
// default, and the Fleet Sim model's) its total tokens, which no live
// router knows before generation; with any other estimate the prompt's
// tokens plus an output estimate, which a live router can do. A request
// the estimate puts in too small a pool gets its answer cut at the pool's
// max context (counted as truncated); one longer than every pool is
// rejected.
type LengthRouter struct {
	Estimate EstimateKind
	// Tokens is the fixed estimate, or the workload's mean or median once
	// the planner bound it.
	Tokens int
}

// Name implements PoolRouter.
func (r *LengthRouter) Name() string {
	switch r.Estimate {
	case EstimateFixed:
		return "length:estimate=" + strconv.Itoa(r.Tokens)
	case EstimateMean:
		return "length:estimate=mean"
	case EstimateMedian:
		return "length:estimate=median"
	}
	return "length"
}

// Tokens is the length r routes req by.
func (r *LengthRouter) tokens(req PoolRequest) int {
	if r.Estimate == EstimateOracle {
		return req.Total()
	}
	return req.InputTokens + req.EstimatedOutput
}

// Route implements PoolRouter.
func (r *LengthRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	return byLength(pools, r.tokens(req))
}

func (r *LengthRouter) estimate(s OutputStats) int {
	switch r.Estimate {
	case EstimateFixed:
		return r.Tokens
	case EstimateMean:
		return s.Mean
	case EstimateMedian:
		return s.Median
	}
	return 0
}

func byLength(pools []PoolView, tokens int) int {
	maxes := make([]int, len(pools))
	for i, p := range pools {
		maxes[i] = p.MaxTokens
	}
	return poolpick.ByLength(maxes, tokens)
}

// Defaults of the compress-and-route router (the Fleet Sim model's gamma
// of compare-routers and its effective compression probability).
const (
	DefaultGamma               = 1.5
	DefaultCompressProbability = 0.75
	DefaultCompressLatency     = 100 * time.Millisecond
)

// CompressAndRouteRouter compresses a request whose total tokens lie in
// (B, Gamma x B], with B the max context of the pool below the one its
// length picks, shortening its prompt so that prompt plus output fit B,
// and sends it to that smaller pool. In the DES prose and rag are safe to
// compress and code is not; the analytical model compresses a share P of
// the band instead (the Fleet Sim model's effective probability). Each
// compressed request pays Latency before it reaches the router; every
// other request is routed by length (the oracle).
type CompressAndRouteRouter struct {
	Gamma, P float64
	Delay    time.Duration
}

// Name implements PoolRouter.
func (r *CompressAndRouteRouter) Name() string {
	return fmt.Sprintf("compress-and-route:gamma=%g,p=%g,latency=%v", r.Gamma, r.P, r.Delay)
}

// Route implements PoolRouter: by length (a compressed request is short).
func (r *CompressAndRouteRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	return byLength(pools, req.Total())
}

// Compress implements Compressor.
func (r *CompressAndRouteRouter) Compress(req PoolRequest, pools []PoolView) (int, bool) {
	i := byLength(pools, req.Total())
	if i <= 0 {
		return 0, false
	}
	b := 0 // the largest max context below pool i's
	for _, p := range pools {
		if p.MaxTokens < pools[i].MaxTokens {
			b = max(b, p.MaxTokens)
		}
	}
	if b == 0 || float64(req.Total()) > r.Gamma*float64(b) || req.OutputTokens >= b {
		return 0, false
	}
	return b - req.OutputTokens, true
}

// Safe implements Compressor: prose and rag, not code.
func (r *CompressAndRouteRouter) Safe(c workload.Category) bool { return c != workload.Code }

// Probability implements Compressor.
func (r *CompressAndRouteRouter) Probability() float64 { return r.P }

// Latency implements Compressor.
func (r *CompressAndRouteRouter) Latency() time.Duration { return r.Delay }

// DefaultSpillThreshold is the spillover router's default pressure.
const DefaultSpillThreshold = 1.0

// SpilloverRouter routes by length, but sends a request to the next larger
// pool when the pool its length picks has a pressure (active plus queued
// requests per slot) above Threshold: 1 spills once requests queue.
type SpilloverRouter struct{ Threshold float64 }

// Name implements PoolRouter.
func (r *SpilloverRouter) Name() string { return fmt.Sprintf("spillover:threshold=%g", r.Threshold) }

// Route implements PoolRouter.
func (r *SpilloverRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	i := byLength(pools, req.Total())
	if i < 0 || pools[i].Pressure() <= r.Threshold {
		return i
	}
	next := -1
	for j, p := range pools {
		if p.MaxTokens > pools[i].MaxTokens && (next < 0 || p.MaxTokens < pools[next].MaxTokens) {
			next = j
		}
	}
	if next < 0 {
		return i
	}
	return next
}

// LeastLoadedRouter sends a request to the pool of lowest pressure (active
// plus queued requests per slot) among those that hold its total tokens;
// ties go to the smaller pool. (The Fleet Sim model's also considers pools
// too small for the request.)
type LeastLoadedRouter struct{}

// Name implements PoolRouter.
func (LeastLoadedRouter) Name() string { return "least-loaded" }

// Route implements PoolRouter.
func (LeastLoadedRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	best := -1
	for i, p := range pools {
		if req.Total() > p.MaxTokens {
			continue
		}
		if best < 0 || p.Pressure() < pools[best].Pressure() ||
			(p.Pressure() == pools[best].Pressure() && p.MaxTokens < pools[best].MaxTokens) {
			best = i
		}
	}
	return best
}

// RandomRouter sends a request to a pool drawn uniformly among those that
// hold its total tokens (a baseline).
type RandomRouter struct{}

// Name implements PoolRouter.
func (RandomRouter) Name() string { return "random" }

// Route implements PoolRouter.
func (RandomRouter) Route(req PoolRequest, pools []PoolView, u float64) int {
	var fit []int
	for i, p := range pools {
		if req.Total() <= p.MaxTokens {
			fit = append(fit, i)
		}
	}
	if len(fit) == 0 {
		return -1
	}
	return fit[min(len(fit)-1, int(u*float64(len(fit))))]
}

// ModelRouter sends a request to the pool its model maps to
// (poolpick.ByModel), or to Fallback ("" for the first pool). A pool too
// small for the request cuts its answer or, if even the prompt does not
// fit, rejects it.
type ModelRouter struct {
	// Models maps a model name to a pool name.
	Models   map[string]string
	Fallback string
}

// Name implements PoolRouter.
func (r *ModelRouter) Name() string { return "model:" + tableString(r.Models, r.Fallback) }

// Route implements PoolRouter.
func (r *ModelRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	return byTable(r.Models, r.Fallback, req.Model, pools)
}

func (r *ModelRouter) checkPools(names []string) error {
	return checkTable(r.Models, r.Fallback, names)
}

// SemanticRouter sends a request to the pool its category maps to: the
// classifier's answer (Label) when the planner has a classifier, else the
// workload's own category (a perfect classifier); an unknown or missing
// answer goes to Fallback ("" for the first pool). The analytical sizing
// uses the workload's own categories.
type SemanticRouter struct {
	// Categories maps a category to a pool name.
	Categories map[string]string
	Fallback   string
}

// Name implements PoolRouter.
func (r *SemanticRouter) Name() string { return "semantic:" + tableString(r.Categories, r.Fallback) }

// Route implements PoolRouter.
func (r *SemanticRouter) Route(req PoolRequest, pools []PoolView, _ float64) int {
	return byTable(r.Categories, r.Fallback, req.Label, pools)
}

func (r *SemanticRouter) checkPools(names []string) error {
	return checkTable(r.Categories, r.Fallback, names)
}

func byTable(table map[string]string, fallback, key string, pools []PoolView) int {
	idx := make(map[string]int, len(table))
	fb := 0
	for i, p := range pools {
		for k, name := range table {
			if name == p.Name {
				idx[k] = i
			}
		}
		if p.Name == fallback {
			fb = i
		}
	}
	if len(pools) == 0 {
		return -1
	}
	return poolpick.ByModel(idx, key, fb)
}

func checkTable(table map[string]string, fallback string, names []string) error {
	for k, p := range table {
		if !slices.Contains(names, p) {
			return fmt.Errorf("plan: pool router maps %q to pool %q, which the fleet does not have (pools: %s)", k, p, strings.Join(names, ", "))
		}
	}
	if fallback != "" && !slices.Contains(names, fallback) {
		return fmt.Errorf("plan: pool router falls back to pool %q, which the fleet does not have (pools: %s)", fallback, strings.Join(names, ", "))
	}
	return nil
}

func tableString(table map[string]string, fallback string) string {
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		parts = append(parts, k+"="+table[k])
	}
	if fallback != "" {
		parts = append(parts, "fallback="+fallback)
	}
	return strings.Join(parts, ",")
}

// ----- the registry -----

// PoolRouterFactory builds a pool router from its parameters.
type PoolRouterFactory func(p *RouterParams) (PoolRouter, error)

type routerEntry struct {
	doc string
	new PoolRouterFactory
}

// PoolRouterRegistry maps pool router names to their factories.
type PoolRouterRegistry struct{ m map[string]routerEntry }

// NewPoolRouterRegistry holds the seven pool routers.
func NewPoolRouterRegistry() *PoolRouterRegistry {
	r := &PoolRouterRegistry{m: map[string]routerEntry{}}
	r.Register("length", "smallest pool that holds the request; estimate=oracle (total tokens, default), mean, median or N output tokens",
		func(p *RouterParams) (PoolRouter, error) {
			lr := &LengthRouter{}
			switch e := p.String("estimate", "oracle"); e {
			case "oracle":
			case "mean":
				lr.Estimate = EstimateMean
			case "median":
				lr.Estimate = EstimateMedian
			default:
				n, err := strconv.Atoi(e)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("estimate=%q: want oracle, mean, median or a whole number of output tokens >= 0", e)
				}
				lr.Estimate, lr.Tokens = EstimateFixed, n
			}
			return lr, nil
		})
	r.Register("compress-and-route", fmt.Sprintf("compress prose and rag in (B, gamma x B] into the smaller pool; gamma=%g, p=%g (analytical share compressed), latency=%v",
		DefaultGamma, DefaultCompressProbability, DefaultCompressLatency),
		func(p *RouterParams) (PoolRouter, error) {
			return &CompressAndRouteRouter{Gamma: p.Float("gamma", DefaultGamma, 1, 100), P: p.Float("p", DefaultCompressProbability, 0, 1),
				Delay: p.Duration("latency", DefaultCompressLatency)}, nil
		})
	r.Register("spillover", fmt.Sprintf("by length, to the next larger pool when the pool's (active+queued)/slots exceeds threshold=%g", DefaultSpillThreshold),
		func(p *RouterParams) (PoolRouter, error) {
			return &SpilloverRouter{Threshold: p.Float("threshold", DefaultSpillThreshold, 0, 1000)}, nil
		})
	r.Register("least-loaded", "the pool of lowest (active+queued)/slots among those that hold the request",
		func(*RouterParams) (PoolRouter, error) { return LeastLoadedRouter{}, nil })
	r.Register("model", "MODEL=POOL,...,fallback=POOL: the request's model picks the pool",
		func(p *RouterParams) (PoolRouter, error) {
			fb, table := p.Table("fallback")
			if len(table) == 0 {
				return nil, errors.New("give at least one MODEL=POOL")
			}
			return &ModelRouter{Models: table, Fallback: fb}, nil
		})
	r.Register("semantic", "CATEGORY=POOL,...,fallback=POOL: the classifier's category (default: the workload's) picks the pool",
		func(p *RouterParams) (PoolRouter, error) {
			fb, table := p.Table("fallback")
			if len(table) == 0 {
				return nil, errors.New("give at least one CATEGORY=POOL (categories: prose, code, rag)")
			}
			return &SemanticRouter{Categories: table, Fallback: fb}, nil
		})
	r.Register("random", "a pool drawn uniformly among those that hold the request",
		func(*RouterParams) (PoolRouter, error) { return RandomRouter{}, nil })
	return r
}

// Register adds or replaces a pool router.
func (r *PoolRouterRegistry) Register(name, doc string, f PoolRouterFactory) {
	r.m[name] = routerEntry{doc: doc, new: f}
}

// Names are the registered routers, sorted.
func (r *PoolRouterRegistry) Names() []string {
	out := make([]string, 0, len(r.m))
	for n := range r.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Doc is a router's one-line description and parameters.
func (r *PoolRouterRegistry) Doc(name string) string { return r.m[name].doc }

// Parse reads NAME[:key=value,...].
func (r *PoolRouterRegistry) Parse(spec string) (PoolRouter, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(spec), ":")
	e, ok := r.m[name]
	if !ok {
		return nil, fmt.Errorf("plan: unknown pool router %q (known: %s)", name, strings.Join(r.Names(), ", "))
	}
	p, err := parseParams(rest)
	if err != nil {
		return nil, fmt.Errorf("plan: pool router %q: %w", spec, err)
	}
	pr, err := e.new(p)
	if err == nil {
		err = p.finish()
	}
	if err != nil {
		return nil, fmt.Errorf("plan: pool router %q: %w", spec, err)
	}
	return pr, nil
}

// RouterParams are a router spec's key=value parameters; a factory reads
// them, and a key it did not read, or a value it could not, is an error.
type RouterParams struct {
	kv   map[string]string
	keys []string
	used map[string]bool
	errs []error
}

func parseParams(s string) (*RouterParams, error) {
	p := &RouterParams{kv: map[string]string{}, used: map[string]bool{}}
	if s == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("parameter %q: want key=value", part)
		}
		if _, dup := p.kv[k]; dup {
			return nil, fmt.Errorf("parameter %q given twice", k)
		}
		p.kv[k] = v
		p.keys = append(p.keys, k)
	}
	return p, nil
}

// String is key's value, or def.
func (p *RouterParams) String(key, def string) string {
	p.used[key] = true
	if v, ok := p.kv[key]; ok {
		return v
	}
	return def
}

// Float is key's value in [lo, hi], or def.
func (p *RouterParams) Float(key string, def, lo, hi float64) float64 {
	p.used[key] = true
	v, ok := p.kv[key]
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= lo && f <= hi) {
		p.errs = append(p.errs, fmt.Errorf("%s=%q: want a number in [%g, %g]", key, v, lo, hi))
		return def
	}
	return f
}

// Duration is key's value (a Go duration >= 0), or def.
func (p *RouterParams) Duration(key string, def time.Duration) time.Duration {
	p.used[key] = true
	v, ok := p.kv[key]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > time.Hour {
		p.errs = append(p.errs, fmt.Errorf("%s=%q: want a duration such as 100ms, in [0, 1h]", key, v))
		return def
	}
	return d
}

// Table reads every parameter as an entry of a table, except special,
// whose value it returns apart.
func (p *RouterParams) Table(special string) (string, map[string]string) {
	table := map[string]string{}
	for _, k := range p.keys {
		p.used[k] = true
		if k != special {
			table[k] = p.kv[k]
		}
	}
	return p.kv[special], table
}

func (p *RouterParams) finish() error {
	for _, k := range p.keys {
		if !p.used[k] {
			p.errs = append(p.errs, fmt.Errorf("unknown parameter %q", k))
		}
	}
	return errors.Join(p.errs...)
}
