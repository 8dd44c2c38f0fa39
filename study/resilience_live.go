package study

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/drive"
	"github.com/stargate-llm/stargate/internal/wait"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/sim"
)

// LivePhaseRunner runs phase specs on live in-process fleets, one at a time:
// each run starts the spec's fleet (serve/fleet) at its scale, drives it
// with the sessions workload over HTTP (drive), injects the phase's faults
// on the running fleet at the onset, and records what a simulated run
// records:
//
//   - Records are the driver's turns; their clock starts with the driver,
//     and the onset is on that clock.
//   - Dispatches are every attempt a router sent (router hooks), with
//     Misroute set when the backend could not serve it then: killed, hung,
//     or the request over the limit the fault imposed.
//   - Marks are the faults' onsets and, per backend, "fallback" when a
//     router first took its report without hardware signals after the
//     onset.
//   - RouterFailedAt is, per router, when a poll of its backends (every
//     50 ms) first saw a faulty backend Failed.
//
// The faults map to the live fleet as follows: kill stops the backend's
// gateway and engine (fleet.KillBackend); hang, errors, limit, thermal and
// exporter are the engine's faults (engine.Faults; thermal with MinClock,
// the simulator's shape); path adds exponential jitter to every message
// between the backend's gateway and the routers (fleet.SetPathJitter; an
// added RTT is not offered live); burst starts sessions at once in the
// driver (drive.Bursts). Faults with an end (Until) are not offered live.
//
// The live routers keep their own heartbeat TTL (1.5 s, three heartbeats;
// the simulator uses 0.75 s), since a busy two-core machine delays
// heartbeats by more than the simulator's margin.
type LivePhaseRunner struct {
	Registry *policy.Registry
	// Log hears about each run as it starts and ends.
	Log func(msg string)
}

// RunPhases implements PhaseRunner.
func (r LivePhaseRunner) RunPhases(ctx context.Context, specs []PhaseSpec, progress Progress) ([]PhaseRun, error) {
	reg := r.Registry
	if reg == nil {
		reg = ResilienceRegistry()
	}
	out := make([]PhaseRun, 0, len(specs))
	for i, sp := range specs {
		if r.Log != nil {
			r.Log(fmt.Sprintf("run %d/%d: %s %s seed %d at %.2f req/s", i+1, len(specs), sp.Phase.Name, sp.Policy, sp.Seed, sp.RPS))
		}
		pr, err := runLivePhase(ctx, reg, sp)
		if err != nil {
			return nil, fmt.Errorf("study: live %s %s seed %d: %w", sp.Phase.Name, sp.Policy, sp.Seed, err)
		}
		out = append(out, pr)
		if r.Log != nil {
			m := Measure(pr)
			r.Log(fmt.Sprintf("run %d/%d: success %.2f%%, TTFT p95 %.2f s, %d turns, %d dispatches, %.0f s", i+1, len(specs),
				m.SuccessPct, m.P95S, m.Turns, len(pr.Dispatches), pr.WallS))
		}
		if progress != nil {
			progress.Done(i+1, len(specs))
		}
	}
	return out, nil
}

// liveRecorder collects a live run's dispatches, marks and router states.
type liveRecorder struct {
	spec     PhaseSpec
	backends map[string]int

	mu         sync.Mutex
	t0         time.Time // the driver's time zero; zero until it starts
	dispatches []sim.Dispatch
	marks      []sim.Mark
	fellBack   map[int]bool
	// Fault state for misroutes, from each fault's onset.
	deadAt, hungAt map[int]time.Duration
	limit          map[int]int
	limitAt        time.Duration
}

func (lr *liveRecorder) since(at time.Time) (time.Duration, bool) {
	if lr.t0.IsZero() {
		return 0, false
	}
	return at.Sub(lr.t0), true
}

func (lr *liveRecorder) dispatch(ri int, d routerd.DispatchEvent) {
	b, ok := lr.backends[d.Backend]
	if !ok {
		return
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	at, ok := lr.since(d.At)
	if !ok {
		return
	}
	mis := false
	if t, dead := lr.deadAt[b]; dead && at >= t {
		mis = true
	}
	if t, hung := lr.hungAt[b]; hung && at >= t {
		mis = true
	}
	if l := lr.limit[b]; l > 0 && at >= lr.limitAt && d.Tokens > l {
		mis = true
	}
	lr.dispatches = append(lr.dispatches, sim.Dispatch{At: at, Session: d.Session, Router: ri, Backend: b, Tokens: d.Tokens, Misroute: mis})
}

func (lr *liveRecorder) report(e routerd.ReportEvent) {
	b, ok := lr.backends[e.Backend]
	if !ok || !e.Signals || e.Hardware {
		return
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	at, ok := lr.since(e.At)
	if !ok || at < lr.spec.Onset || lr.fellBack[b] {
		return
	}
	lr.fellBack[b] = true
	lr.marks = append(lr.marks, sim.Mark{At: at, Backend: b, What: "fallback"})
}

// liveConfig is the spec's simulator configuration, as the simulator twin
// runs it.
func liveConfig(reg *policy.Registry, sp PhaseSpec) (sim.Config, *config.Fleet, error) {
	rs := resilienceRunSpec(sp)
	cfg, err := rs.Fleet.SimConfig(config.Run{Policy: rs.Policy, RPS: rs.RPS, Seed: rs.Seed, Warmup: rs.Warmup, Measure: rs.Measure}, reg)
	if err != nil {
		return cfg, nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
	}
	cfg.Faults = rs.Faults
	for _, f := range cfg.Faults {
		if f.Until != 0 {
			return cfg, nil, fmt.Errorf("%w: a %s fault with an end is not offered live", ErrInvalidRun, f.Kind)
		}
		if f.Kind == sim.FaultPath && f.RTT != 0 {
			return cfg, nil, fmt.Errorf("%w: a path fault's added RTT is not offered live (only its jitter)", ErrInvalidRun)
		}
	}
	return cfg, rs.Fleet, nil
}

func runLivePhase(ctx context.Context, reg *policy.Registry, sp PhaseSpec) (PhaseRun, error) {
	start := time.Now()
	cfg, fl, err := liveConfig(reg, sp)
	if err != nil {
		return PhaseRun{}, err
	}
	lr := &liveRecorder{spec: sp, backends: map[string]int{}, fellBack: map[int]bool{},
		deadAt: map[int]time.Duration{}, hungAt: map[int]time.Duration{}, limit: map[int]int{}}
	for i, b := range cfg.Backends {
		lr.backends[b.Name] = i
	}
	f, err := fleet.Start(ctx, cfg, reg, fleet.Options{Seed: sp.Seed, Hooks: func(ri int) routerd.Hooks {
		return routerd.Hooks{Dispatch: func(d routerd.DispatchEvent) { lr.dispatch(ri, d) }, Report: lr.report}
	}})
	if err != nil {
		return PhaseRun{}, fmt.Errorf("starting the fleet: %w", err)
	}
	defer f.Stop()

	dc := driveConfig(f, &cfg)
	for _, ft := range cfg.Faults {
		if ft.Kind == sim.FaultBurst {
			dc.Bursts = drive.Bursts{At: ft.At, Every: ft.Every, Count: ft.Count}
		}
	}
	started := make(chan struct{})
	dc.Started = func(t0 time.Time) {
		lr.mu.Lock()
		lr.t0 = t0
		lr.mu.Unlock()
		close(started)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	failedAt := make([]time.Duration, len(f.Routers))
	faultErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-started:
		case <-runCtx.Done():
			return
		}
		faultErr <- lr.inject(runCtx, f, cfg.Faults)
		lr.watchRouters(runCtx, f, failedAt)
	}()
	res, err := drive.Run(runCtx, dc)
	cancel()
	wg.Wait()
	if err != nil {
		return PhaseRun{}, fmt.Errorf("driving the fleet: %w", err)
	}
	select {
	case err := <-faultErr:
		if err != nil {
			return PhaseRun{}, fmt.Errorf("injecting the faults: %w", err)
		}
	default:
	}
	// The driver numbers backends as it meets them; the report uses the
	// fleet's order.
	recs := res.Records
	for i := range recs {
		if b := recs[i].Backend; b >= 0 && b < len(res.Backends) {
			if fb, ok := lr.backends[res.Backends[b]]; ok {
				recs[i].Backend = fb
			}
		}
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	// A dispatch names its session by the router's key of the X-Session-ID
	// the driver sent; a record, by the driver's session number.
	sessions := map[uint64]uint64{}
	for i := range recs {
		sessions[router.SessionIDKey(strconv.FormatUint(recs[i].Session, 10))] = recs[i].Session
	}
	for i := range lr.dispatches {
		lr.dispatches[i].Session = sessions[lr.dispatches[i].Session]
	}
	slices.SortStableFunc(lr.dispatches, func(a, b sim.Dispatch) int { return int(a.At - b.At) })
	slices.SortStableFunc(lr.marks, func(a, b sim.Mark) int { return int(a.At - b.At) })
	return PhaseRun{Spec: sp, SLO: cfg.Client.TTFTSLO, Records: recs, Dispatches: lr.dispatches, Marks: lr.marks,
		RouterFailedAt: failedAt, WallS: time.Since(start).Seconds(), MaxOutput: fl.Workload.OutputTokensMax}, nil
}

// inject waits for the onset on the driver's clock and applies the faults
// to the running fleet.
func (lr *liveRecorder) inject(ctx context.Context, f *fleet.Fleet, faults []sim.Fault) error {
	if len(faults) == 0 {
		return nil
	}
	lr.mu.Lock()
	t0 := lr.t0
	lr.mu.Unlock()
	onset := faults[0].At
	if !wait.Until(ctx, t0.Add(onset)) {
		return nil
	}
	at := time.Since(t0)
	engineFaults := make([]engined.Faults, len(f.Engines))
	lr.mu.Lock()
	for _, ft := range faults {
		if ft.Kind == sim.FaultBurst {
			// The driver starts every burst on its own clock (drive.Bursts):
			// this one now, the next ones Every apart.
			end := lr.spec.Onset + lr.spec.Post
			if ft.Until > 0 {
				end = min(end, ft.Until)
			}
			for t := at; t < end; t += ft.Every {
				lr.marks = append(lr.marks, sim.Mark{At: t, Backend: -1, What: "fault:burst"})
				if ft.Every <= 0 {
					break
				}
			}
			continue
		}
		for _, b := range ft.Backends {
			lr.marks = append(lr.marks, sim.Mark{At: at, Backend: b, What: "fault:" + string(ft.Kind)})
			switch ft.Kind {
			case sim.FaultKill:
				lr.deadAt[b] = at
			case sim.FaultHang:
				lr.hungAt[b] = at
			case sim.FaultLimit:
				lr.limit[b], lr.limitAt = ft.Limit, at
			}
		}
	}
	lr.mu.Unlock()
	for _, ft := range faults {
		for _, b := range ft.Backends {
			ef := &engineFaults[b]
			switch ft.Kind {
			case sim.FaultKill:
				if err := f.KillBackend(b); err != nil {
					return err
				}
			case sim.FaultPath:
				if err := f.SetPathJitter(b, ft.Jitter); err != nil {
					return err
				}
			case sim.FaultHang:
				ef.Hang = true
			case sim.FaultErrors:
				ef.ErrorRate = ft.Rate
			case sim.FaultLimit:
				ef.MaxModelLen = ft.Limit
			case sim.FaultThermal:
				ef.HeatC, ef.Ramp, ef.MinClock = ft.PeakC, ft.Ramp, ft.MinClock
			case sim.FaultExporter:
				ef.ExporterDead = true
			}
		}
	}
	for b, ef := range engineFaults {
		if ef != (engined.Faults{}) {
			if err := f.Engines[b].SetFaults(ef); err != nil {
				return err
			}
		}
	}
	return nil
}

// markWeights marks "weights" if router rs's policy weights differ from
// last (nil: not read yet), and returns them.
func (lr *liveRecorder) markWeights(rs *routerd.Server, last []int) []int {
	var ws []int
	for _, w := range rs.LastWeights() {
		ws = append(ws, w.Weight)
	}
	if last != nil && !slices.Equal(last, ws) {
		lr.mu.Lock()
		if at, ok := lr.since(time.Now()); ok {
			lr.marks = append(lr.marks, sim.Mark{At: at, Backend: -1, What: "weights"})
		}
		lr.mu.Unlock()
	}
	return ws
}

// watchRouters polls every router's view of its backends until ctx ends,
// noting when each first saw a faulty backend Failed after the onset.
func (lr *liveRecorder) watchRouters(ctx context.Context, f *fleet.Fleet, failedAt []time.Duration) {
	for i := range failedAt {
		failedAt[i] = -1
	}
	faulty := map[string]bool{}
	for name, b := range lr.backends {
		if slices.Contains(lr.spec.Phase.Faulty, b) {
			faulty[name] = true
		}
	}
	// In the burst phase, every change of a router's policy weights is a
	// "weights" mark, as in the simulator (to the poll's 50 ms).
	burst := lr.spec.Phase.Name == "burst"
	if len(faulty) == 0 && !burst {
		return
	}
	last := make([][]int, len(f.Routers))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for ri, rs := range f.Routers {
			if burst {
				last[ri] = lr.markWeights(rs, last[ri])
			}
		}
		for ri, rs := range f.Routers {
			if failedAt[ri] >= 0 {
				continue
			}
			for name, state := range rs.States() {
				if faulty[name] && state == "failed" {
					lr.mu.Lock()
					failedAt[ri], _ = lr.since(time.Now())
					lr.mu.Unlock()
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
