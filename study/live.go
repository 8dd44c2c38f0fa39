package study

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/drive"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/sim"
)

// LiveOptions choose the live routing study: each run starts a fleet in this
// process and drives it over HTTP, and is matched by a simulator run of the
// same scaled configuration and seed.
type LiveOptions struct {
	// Fleets are fleet names or files; Policies the policies compared.
	Fleets   []string
	Policies []string
	// RPS is the full-scale nominal rate per fleet (by fleet name); missing
	// fleets use DefaultLiveRPS.
	RPS map[string]float64
	// Scale multiplies every backend's GPUs (rounded, at least 1) and the rate.
	Scale           float64
	Seed            uint64
	Warmup, Measure time.Duration
	// Log hears about each run as it starts and ends.
	Log func(msg string)
}

// DefaultLiveRPS is the live study's full-scale rate when a fleet has none.
const DefaultLiveRPS = 450

// DefaultLiveOptions are the documented live study: both study fleets at
// 450 req/s full scale, waw against pulsar-waw, scale 0.1 (about 30 GPUs and
// 45 req/s), seed 1, 150 s warm-up and 120 s measured.
func DefaultLiveOptions() LiveOptions {
	return LiveOptions{Fleets: []string{"hetero", "homo"}, Policies: []string{"waw", "pulsar-waw"},
		RPS: map[string]float64{"hetero": 450, "homo": 450}, Scale: 0.1, Seed: 1,
		Warmup: 150 * time.Second, Measure: 120 * time.Second}
}

// LivePair is one live run and its simulator twin.
type LivePair struct {
	Fleet  string          `json:"fleet"`
	Policy string          `json:"policy"`
	Scale  float64         `json:"scale"`
	GPUs   int             `json:"gpus"`
	RPS    float64         `json:"rps"`
	Live   metrics.Summary `json:"live"`
	Sim    metrics.Summary `json:"sim"`
	// Added is the mean time a live turn took beyond its simulated twin,
	// over the turns both measured and placed on the same backend: what
	// the live fleet's hops, and its wait for cores, add to every turn.
	// SimAdded is the simulator run again with that much more client
	// latency (half of it each way), zero when too few turns matched.
	Added    time.Duration   `json:"added_ns,omitempty"`
	SimAdded metrics.Summary `json:"sim_added"`
	// Load is the machine's one-minute load average as the live run ended;
	// CPURun and CPUWait are the cores this process used over the live run
	// and the seconds per second its threads were runnable but waiting for
	// a core (Linux; zero elsewhere). The wait is what the machine's other
	// work costs the live fleet: each wake-up of a goroutine's thread waits
	// that much longer for a core.
	Load    float64 `json:"load,omitempty"`
	CPURun  float64 `json:"cpu_run_cores,omitempty"`
	CPUWait float64 `json:"cpu_wait_s_per_s,omitempty"`
	// LiveRecords and SimRecords are the measured turns of each side, with
	// Backend the index into the fleet's backends on both.
	LiveRecords []metrics.TurnRecord `json:"-"`
	SimRecords  []metrics.TurnRecord `json:"-"`
}

// ScaleConfig shrinks cfg to scale: every backend keeps at least one GPU,
// every region keeps one router, and the rate scales with the GPUs it
// really kept, so that load per GPU stays the full-scale one.
func ScaleConfig(cfg *sim.Config, scale float64) error {
	if !(scale > 0) || scale > 1 {
		return fmt.Errorf("scale must be in (0, 1], got %v", scale)
	}
	before, after := 0, 0
	for i := range cfg.Backends {
		b := &cfg.Backends[i]
		before += b.Workers
		b.Workers = max(1, int(math.Round(float64(b.Workers)*scale)))
		after += b.Workers
	}
	for i := range cfg.Regions {
		cfg.Regions[i].Routers = 1
	}
	cfg.RPS *= float64(after) / float64(before)
	return nil
}

// LiveRouting runs the live routing study.
func LiveRouting(ctx context.Context, reg *policy.Registry, opts LiveOptions) ([]LivePair, error) {
	if opts.Warmup < 0 || opts.Measure <= 0 {
		return nil, fmt.Errorf("%w: warm-up must be >= 0 and measure > 0", ErrInvalidRun)
	}
	var pairs []LivePair
	for _, name := range opts.Fleets {
		fl, err := config.Load(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
		}
		rps := opts.RPS[fl.Name]
		if rps == 0 {
			rps = DefaultLiveRPS
		}
		for _, pol := range opts.Policies {
			cfg, err := fl.SimConfig(config.Run{Policy: pol, RPS: rps, Seed: opts.Seed, Warmup: opts.Warmup, Measure: opts.Measure}, reg)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
			}
			if err := ScaleConfig(&cfg, opts.Scale); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
			}
			p, err := livePair(ctx, reg, fl.Name, cfg, opts)
			if err != nil {
				return nil, err
			}
			pairs = append(pairs, p)
		}
	}
	return pairs, nil
}

func livePair(ctx context.Context, reg *policy.Registry, name string, cfg sim.Config, opts LiveOptions) (LivePair, error) {
	gpus := 0
	for _, b := range cfg.Backends {
		gpus += b.Workers
	}
	p := LivePair{Fleet: name, Policy: cfg.Policy, Scale: opts.Scale, GPUs: gpus, RPS: cfg.RPS}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			opts.Log(fmt.Sprintf(format, args...))
		}
	}
	plan, err := sim.NewSessionPlan(cfg)
	if err != nil {
		return p, fmt.Errorf("study: %s %s: %w", name, cfg.Policy, err)
	}
	cfg.KeepRecords, cfg.LiveSessionKeys = true, true
	simRes, err := sim.Run(ctx, cfg, reg)
	if err != nil {
		return p, fmt.Errorf("study: sim %s %s: %w", name, cfg.Policy, err)
	}
	p.Sim, p.SimRecords = simRes.Summary, simRes.Records
	logf("%s %s: %d GPUs at %.1f req/s; sim goodput %.2f; starting the live fleet", name, cfg.Policy, gpus, cfg.RPS, p.Sim.GoodputRPS)
	f, err := fleet.Start(ctx, cfg, reg, fleet.Options{Seed: opts.Seed})
	if err != nil {
		return p, fmt.Errorf("study: live fleet %s %s: %w", name, cfg.Policy, err)
	}
	defer f.Stop()
	dc := driveConfig(f, &cfg)
	// The live clients play the simulator's own sessions, at the same
	// instants and through the same routers: the pair differs by the fleet,
	// not by a draw of the workload.
	dc.Plan = func() drive.Planned {
		ps := plan.Next()
		return drive.Planned{At: ps.At, Session: ps.Session, Target: ps.Router}
	}
	cpu0, cpuOK := readCPUTimes()
	began := time.Now()
	res, err := drive.Run(ctx, dc)
	if err != nil {
		return p, fmt.Errorf("study: driving %s %s: %w", name, cfg.Policy, err)
	}
	if cpu1, ok := readCPUTimes(); ok && cpuOK {
		el := time.Since(began).Seconds()
		p.CPURun, p.CPUWait = (cpu1.Run-cpu0.Run).Seconds()/el, (cpu1.Wait-cpu0.Wait).Seconds()/el
	}
	p.Load, _ = loadAverage()
	p.Live, p.LiveRecords = res.Summary, backendsByConfig(res, cfg.Backends)
	if add, ok := addedLatency(p.SimRecords, p.LiveRecords); ok {
		cal := cfg
		cal.KeepRecords = false
		cal.ClientLatency += add / 2
		calRes, err := sim.Run(ctx, cal, reg)
		if err != nil {
			return p, fmt.Errorf("study: sim %s %s with the live fleet's added latency: %w", name, cfg.Policy, err)
		}
		p.Added, p.SimAdded = add, calRes.Summary
	}
	logf("%s %s: live goodput %.2f, sim %.2f; load %.1f, the fleet on %.2f cores and waiting %.2f s/s for one", name, cfg.Policy,
		p.Live.GoodputRPS, p.Sim.GoodputRPS, p.Load, p.CPURun, p.CPUWait)
	return p, nil
}

// minMatched is how many turns both sides must have measured on the same
// backend for their difference to calibrate the simulator.
const minMatched = 50

// addedLatency is the mean of how much longer each turn took live than
// simulated (from its start to its end), over the completed turns both
// measured on the same backend; ok is false with fewer than minMatched
// such turns. It is never below zero.
func addedLatency(simRecs, liveRecs []metrics.TurnRecord) (time.Duration, bool) {
	type key struct {
		session uint64
		turn    int
	}
	byKey := make(map[key]*metrics.TurnRecord, len(simRecs))
	for i := range simRecs {
		if r := &simRecs[i]; r.Completed {
			byKey[key{r.Session, r.Turn}] = r
		}
	}
	var sum time.Duration
	n := 0
	for i := range liveRecs {
		l := &liveRecs[i]
		s, ok := byKey[key{l.Session, l.Turn}]
		if !ok || !l.Completed || l.Backend != s.Backend {
			continue
		}
		sum += (l.End - l.Start) - (s.End - s.Start)
		n++
	}
	if n < minMatched {
		return 0, false
	}
	return max(sum/time.Duration(n), 0), true
}

// backendsByConfig returns a live run's records with Backend the index of
// the backend in backends (the driver numbers backends as they first
// answer), -1 for a name not there.
func backendsByConfig(res *drive.Result, backends []sim.BackendSpec) []metrics.TurnRecord {
	index := make(map[string]int, len(backends))
	for i, b := range backends {
		index[b.Name] = i
	}
	out := slices.Clone(res.Records)
	for i := range out {
		if b := out[i].Backend; b >= 0 && b < len(res.Backends) {
			j, ok := index[res.Backends[b]]
			if !ok {
				j = -1
			}
			out[i].Backend = j
		}
	}
	return out
}

// driveConfig drives fleet f with the traffic of cfg, the configuration it
// was started from: the same arrivals (sessions at RPS, a class's open
// loop, or a closed loop of clients), windows, seed, workload and client.
func driveConfig(f *fleet.Fleet, cfg *sim.Config) drive.Config {
	return drive.Config{Targets: f.RouterURLs, TargetRegion: f.RouterRegion, RPS: cfg.RPS, Class: cfg.Class, Clients: cfg.Clients,
		Warmup: cfg.Warmup, Measure: cfg.Measure, Cooldown: cfg.Cooldown, Seed: cfg.Seed,
		Workload: cfg.Workload, Client: cfg.Client, Model: engined.DefaultModel}
}

// LiveTable shows live and sim side by side.
func LiveTable(pairs []LivePair) report.Table {
	t := report.Table{Title: "live routing study (live fleet and its simulator twin)", Headers: []string{"fleet", "policy", "gpus", "rps", "live goodput", "sim goodput", "gap %",
		"live slo%", "sim slo%", "live reuse%", "sim reuse%", "live p50 s", "sim p50 s", "live p99 s", "sim p99 s",
		"added ms", "sim+added goodput", "gap to sim+added %", "load", "cpu wait s/s"}}
	for _, p := range pairs {
		gap, gapAdded := math.NaN(), math.NaN()
		if p.Sim.GoodputRPS > 0 {
			gap = 100 * (p.Live.GoodputRPS - p.Sim.GoodputRPS) / p.Sim.GoodputRPS
		}
		if p.SimAdded.GoodputRPS > 0 {
			gapAdded = 100 * (p.Live.GoodputRPS - p.SimAdded.GoodputRPS) / p.SimAdded.GoodputRPS
		}
		t.Rows = append(t.Rows, []string{p.Fleet, p.Policy, fmt.Sprint(p.GPUs), f1(p.RPS), f2(p.Live.GoodputRPS), f2(p.Sim.GoodputRPS),
			f1(gap), f1(p.Live.SLOPct), f1(p.Sim.SLOPct), f1(p.Live.ReusePct), f1(p.Sim.ReusePct),
			f2(p.Live.TTFTP50S), f2(p.Sim.TTFTP50S), f2(p.Live.TTFTP99S), f2(p.Sim.TTFTP99S),
			f0(float64(p.Added) / float64(time.Millisecond)), f2(p.SimAdded.GoodputRPS), f1(gapAdded), f1(p.Load), f2(p.CPUWait)})
	}
	return t
}

// RankAgreement reports, per fleet, whether live and sim order the policies
// the same way by goodput.
func RankAgreement(pairs []LivePair) (map[string]bool, error) {
	by := map[string][]LivePair{}
	for _, p := range pairs {
		by[p.Fleet] = append(by[p.Fleet], p)
	}
	out := map[string]bool{}
	for fleetName, ps := range by {
		if len(ps) < 2 {
			return nil, errors.New("study: ranking needs two policies per fleet")
		}
		agree := true
		for i := range ps {
			for j := range ps {
				if (ps[i].Live.GoodputRPS > ps[j].Live.GoodputRPS) != (ps[i].Sim.GoodputRPS > ps[j].Sim.GoodputRPS) {
					agree = false
				}
			}
		}
		out[fleetName] = agree
	}
	return out, nil
}

// WriteLiveRecords writes each pair's measured turns, one JSON object a
// line (metrics.WriteNDJSON), as dir/records/FLEET-POLICY-live.ndjson and
// -sim.ndjson: the per-turn evidence behind a gap.
func WriteLiveRecords(dir string, pairs []LivePair) error {
	dir = filepath.Join(dir, "records")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	for _, p := range pairs {
		for side, recs := range map[string][]metrics.TurnRecord{"live": p.LiveRecords, "sim": p.SimRecords} {
			name := fmt.Sprintf("%s-%s-%s.ndjson", p.Fleet, p.Policy, side)
			if err := WriteFile(dir, name, func(w io.Writer) error { return metrics.WriteNDJSON(w, recs) }); err != nil {
				return err
			}
		}
	}
	return nil
}
