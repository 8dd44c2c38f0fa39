package study

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/drive"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/sim"
)

// LiveOverlapClients are the live study's default client counts: fewer than
// the simulator's, so that the whole study fits in about ten minutes here.
var LiveOverlapClients = []int{4, 16, 64, 128}

// LiveOverlap runs the overlap study on live fleets: each run starts the
// study's fleet (one engine of OverlapWorkers GPUs, its gateway with the
// run's max_inflight_per_worker, one router) in this process and drives it
// with closed-loop clients over HTTP. Every run is matched by a simulator
// run of the same spec, in the result's Sim. Defaults: one seed, 15 s of
// warm-up and 30 s measured, LiveOverlapClients.
func LiveOverlap(ctx context.Context, reg *policy.Registry, opts OverlapOptions) (*OverlapResults, error) {
	if opts.Measure == 0 {
		opts.Warmup, opts.Measure = 15*time.Second, 30*time.Second
	}
	if opts.Seeds == 0 {
		opts.Seeds = 1
	}
	if opts.Clients == nil {
		opts.Clients = LiveOverlapClients
	}
	specs, err := OverlapSpecs(opts)
	if err != nil {
		return nil, err
	}
	simOpts := opts
	simOpts.Progress = nil
	twin, err := Overlap(ctx, reg, simOpts)
	if err != nil {
		return nil, err
	}
	res := &OverlapResults{Study: "overlap", Live: true, Workers: OverlapWorkers, MaxWaiting: OverlapMaxWaiting,
		Warmup: specs[0].Warmup.Seconds(), Measure: specs[0].Measure.Seconds(), Sim: twin}
	for i, s := range specs {
		rr, err := liveOverlapRun(ctx, reg, s)
		if err != nil {
			return nil, fmt.Errorf("study: live overlap %s: %w", s.Label(), err)
		}
		res.Runs = append(res.Runs, MeasureOverlap(s.Fleet.Gateway.SlotsPerWorker, rr))
		if opts.Progress != nil {
			opts.Progress.Done(i+1, len(specs))
		}
	}
	return res, nil
}

// liveOverlapRun runs one spec on a live fleet and gathers what the
// simulator's closed-loop result holds: the turns, the gateway's queue
// times in the window, and the engine's counters over the window.
func liveOverlapRun(ctx context.Context, reg *policy.Registry, s RunSpec) (RunResult, error) {
	cfg, err := s.Fleet.SimConfig(config.Run{Policy: s.Policy, Seed: s.Seed, Warmup: s.Warmup, Measure: s.Measure, Clients: s.Clients}, reg)
	if err != nil {
		return RunResult{}, fmt.Errorf("%w: %w", ErrInvalidRun, err)
	}
	var (
		mu    sync.Mutex
		start time.Time
		queue []float64
	)
	observe := func(q time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if at := time.Since(start); !start.IsZero() && at >= s.Warmup && at < s.Warmup+s.Measure {
			queue = append(queue, q.Seconds())
		}
	}
	f, err := fleet.Start(ctx, cfg, reg, fleet.Options{Seed: s.Seed, ObserveQueue: observe})
	if err != nil {
		return RunResult{}, err
	}
	defer f.Stop()
	totals := func() [][]engine.Totals {
		out := make([][]engine.Totals, len(f.Engines))
		for b, e := range f.Engines {
			out[b] = e.Totals()
		}
		return out
	}
	var warm [][]engine.Totals
	var warmAt time.Time
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	timer := time.AfterFunc(s.Warmup, func() {
		t := totals()
		mu.Lock()
		warm, warmAt = t, time.Now()
		mu.Unlock()
	})
	defer timer.Stop()
	dres, err := drive.Run(ctx, driveConfig(f, &cfg))
	if err != nil {
		return RunResult{}, err
	}
	end, endAt := totals(), time.Now()
	mu.Lock()
	defer mu.Unlock()
	if warm == nil {
		return RunResult{}, fmt.Errorf("the warm-up's engine counters were never read")
	}
	rr := RunResult{Fleet: s.FleetName, Policy: s.Policy, Seed: s.Seed, Clients: s.Clients, Summary: dres.Summary,
		Records: dres.Records, WallS: time.Since(start).Seconds()}
	closed := &sim.ClosedResult{Clients: s.Clients, Admitted: len(queue)}
	span := endAt.Sub(warmAt).Seconds()
	var allBusy time.Duration
	for b, spec := range cfg.Backends {
		var sum engine.Totals
		for w := range end[b] {
			sum = sum.Plus(end[b][w].Minus(warm[b][w]))
		}
		br := sim.BackendResult{Name: spec.Name, Region: cfg.Regions[spec.Region].Name, Workers: spec.Workers}
		br.SetEngine(sum, span, spec.Profile.KVTokens)
		c := f.Gateways[b].Counts()
		br.GatewayReceived, br.GatewayCompleted = c.Accepted, c.Completed
		for _, n := range c.Failed {
			br.GatewayCancelled += n
		}
		for _, n := range c.Rejected {
			br.GatewayRejected += n
		}
		br.GatewayActive = int(c.Accepted - c.Ended())
		rr.Backends = append(rr.Backends, br)
		closed.Steps += sum.Steps
		closed.Preempted += int(sum.Preemptions)
		allBusy += sum.BusyTime
	}
	if closed.Steps > 0 {
		closed.MeanStepS = allBusy.Seconds() / float64(closed.Steps)
	}
	if len(queue) > 0 {
		for _, q := range queue {
			closed.GatewayQueueMeanS += q
		}
		closed.GatewayQueueMeanS /= float64(len(queue))
		slices.Sort(queue)
		closed.GatewayQueueP95S = metrics.Percentile(queue, 0.95)
	}
	for i := range dres.Records {
		if r := &dres.Records[i]; r.Completed && !r.Good(cfg.Client.TTFTSLO) {
			closed.Late++
		}
	}
	// The live engine does not tell which request it preempted: Preempted
	// counts the engine's preemptions in the window, and Degraded the late
	// turns plus those, at most every completed turn (an upper bound).
	closed.Degraded = min(closed.Late+closed.Preempted, dres.Summary.Completed)
	rr.Closed = closed
	return rr, nil
}
