package study

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// RunSpec is one simulation run.
type RunSpec struct {
	FleetName string
	Fleet     *config.Fleet
	Policy    string
	RPS       float64
	Seed      uint64
	Engine    string // engine profile name; empty keeps the fleet's
	Warmup    time.Duration
	Measure   time.Duration
	Cooldown  time.Duration
	// Class, if set, names the workload class whose open loop replaces the
	// fleet's sessions.
	Class       string
	KeepRecords bool
	// Clients, when > 0, runs a closed loop of that many clients instead
	// of sessions arriving at RPS.
	Clients int
	// Requests, when set, replace the fleet's sessions with an open-loop
	// request list (a trace replay); BlockSize is its tokens per block id.
	Requests  []workload.TraceRequest
	BlockSize int

	// Telemetry, faults and router liveness, for the resilience study; the
	// zero values leave a run as the routing study runs it.
	Telemetry        sim.Telemetry
	Router           router.Config
	Faults           []sim.Fault
	MaxModelLen      int // every backend's /v1/models limit (0: unknown)
	RecordDispatches bool
	// RecordSignals keeps every backend's telemetry reports (RunResult.Signals).
	RecordSignals bool
}

// RunResult is what one run measured, in the shape of the JSON output.
type RunResult struct {
	Fleet  string  `json:"fleet"`
	Policy string  `json:"policy"`
	RPS    float64 `json:"rps"`
	Seed   uint64  `json:"seed"`
	Engine string  `json:"engine"`
	Class  string  `json:"class,omitempty"`
	// Clients is the closed loop's client count (0: open arrivals).
	Clients int `json:"clients,omitempty"`
	metrics.Summary
	Events   uint64              `json:"events"`
	WallS    float64             `json:"wall_s"`
	Backends []sim.BackendResult `json:"backends"`
	// Records holds the measured turns when the spec asked to keep them.
	Records []metrics.TurnRecord `json:"-"`
	// Dispatches, Marks and Routers come from runs with telemetry or faults.
	Dispatches []sim.Dispatch  `json:"-"`
	Marks      []sim.Mark      `json:"-"`
	Routers    []sim.RouterEnd `json:"-"`
	// Signals are the backends' telemetry reports when the spec asked for them.
	Signals []sim.SignalSample `json:"-"`
	// Closed holds a closed-loop run's gateway queue, step and degraded figures.
	Closed *sim.ClosedResult `json:"closed,omitempty"`
}

// ErrInvalidRun marks a spec that cannot be simulated; RunAll checks every
// spec before it starts any run.
var ErrInvalidRun = errors.New("invalid run")

// Progress hears about finished runs.
type Progress interface {
	Done(finished, total int)
}

// RunAll runs every spec, at most parallel at a time (0: one per CPU), and
// returns the results in the specs' order. The first error stops the rest.
func RunAll(ctx context.Context, specs []RunSpec, reg *policy.Registry, parallel int, progress Progress) ([]RunResult, error) {
	cfgs := make([]sim.Config, len(specs))
	for i, s := range specs {
		cfg, err := s.Fleet.SimConfig(config.Run{Policy: s.Policy, RPS: s.RPS, Seed: s.Seed,
			Warmup: s.Warmup, Measure: s.Measure, Cooldown: s.Cooldown, Engine: s.Engine, Class: s.Class, Clients: s.Clients}, reg)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidRun, s.Label(), err)
		}
		cfg.KeepRecords = s.KeepRecords
		if s.Requests != nil {
			cfg.Requests, cfg.BlockSize = s.Requests, s.BlockSize
		}
		cfg.Telemetry, cfg.Faults, cfg.RecordDispatches = s.Telemetry, s.Faults, s.RecordDispatches
		cfg.RecordSignals = s.RecordSignals
		if s.Router != (router.Config{}) { // else the fleet file's
			cfg.Router = s.Router
		}
		for b := range cfg.Backends {
			cfg.Backends[b].MaxModelLen = s.MaxModelLen
		}
		if err := cfg.Validate(reg); err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidRun, s.Label(), err)
		}
		cfgs[i] = cfg
	}
	results := make([]RunResult, len(specs))
	err := forEach(ctx, len(specs), parallel, progress, func(ctx context.Context, i int) error {
		start := time.Now()
		res, err := sim.Run(ctx, cfgs[i], reg)
		if err != nil {
			return fmt.Errorf("run %s: %w", specs[i].Label(), err)
		}
		s := specs[i]
		results[i] = RunResult{Fleet: s.FleetName, Policy: s.Policy, RPS: s.RPS, Seed: s.Seed,
			Engine: engineName(s), Class: s.Class, Clients: s.Clients, Summary: res.Summary, Events: res.Events,
			WallS: time.Since(start).Seconds(), Backends: res.Backends, Records: res.Records,
			Dispatches: res.Dispatches, Marks: res.Marks, Routers: res.Routers, Closed: res.Closed, Signals: res.Signals}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// forEach calls job(ctx, i) for i in [0, n), at most parallel at a time (0:
// one per CPU), telling progress as each one finishes. The first error
// cancels the rest and is returned.
func forEach(ctx context.Context, n, parallel int, progress Progress, job func(ctx context.Context, i int) error) error {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	done := make(chan struct{}, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error {
			if err := job(gctx, i); err != nil {
				return err
			}
			done <- struct{}{}
			return nil
		})
	}
	finished := make(chan error, 1)
	go func() { finished <- g.Wait() }()
	count := 0
	for {
		select {
		case <-done:
			count++
			if progress != nil {
				progress.Done(count, n)
			}
		case err := <-finished:
			if err != nil {
				return err
			}
			for ; count < n; count++ {
				<-done
				if progress != nil {
					progress.Done(count+1, n)
				}
			}
			return nil
		}
	}
}

// engineName is the run's engine profile: the one asked for, else the fleet's
// default (backends with their own profile keep it either way).
func engineName(s RunSpec) string {
	if s.Engine != "" {
		return s.Engine
	}
	return s.Fleet.Engine
}

// Label names a run in messages and file names.
func (s RunSpec) Label() string {
	if s.Clients > 0 {
		return fmt.Sprintf("%s-%s-%dclients-seed%d", s.FleetName, s.Policy, s.Clients, s.Seed)
	}
	if s.Class != "" {
		return fmt.Sprintf("%s-%s-%s-%g-seed%d", s.FleetName, s.Class, s.Policy, s.RPS, s.Seed)
	}
	return fmt.Sprintf("%s-%s-%g-seed%d", s.FleetName, s.Policy, s.RPS, s.Seed)
}
