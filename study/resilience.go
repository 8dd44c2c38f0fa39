package study

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/telemetry"
)

// ResiliencePolicies are the resilience study's arms, in report order: the
// telemetry-aware policy first, then the baselines.
var ResiliencePolicies = []string{"pressure", "pulsar-waw", "least-request", "round-robin"}

// PressureNoNet is the wan-jitter phase's ablation: pressure with the
// weights of the network signals (RTT and jitter) at zero, every other weight
// at its default, so that the phase shows TTFT with and without them.
const PressureNoNet = "pressure-no-net"

// ResilienceRegistry is the built-in policies and PressureNoNet.
func ResilienceRegistry() *policy.Registry {
	reg := policy.NewRegistry()
	reg.Register(PressureNoNet, func(p policy.Params, b []policy.Backend, _ *rand.Rand) (policy.Policy, error) {
		pp := p.PressureParams()
		pp.Weights[telemetry.SigRTT], pp.Weights[telemetry.SigJitter] = 0, 0
		return policy.NewPressure(p, pp, b)
	})
	return reg
}

// ResilienceRPS is the study's nominal rate on ResilienceFleet, fixed before
// the pressure policy was measured: at 45 req/s the fleet's GPUs are about
// 65% busy under pulsar-waw and 83% under least-request (which loses most
// prefix-cache reuse) with no fault.
const ResilienceRPS = 45

// The failing backend of the single-backend phases (central-1), and the site
// of the WAN jitter phase (west).
const (
	faultyBackend = 4
	contextLimit  = 16384
)

var westSite = []int{6, 7, 8}

// cellExporterDown is how long each backend's exporter stays down in the
// telemetry-loss-each phase, and the time between two deaths: the nine fit
// in the quick study's 30 s after the onset, and the deaths fall at
// different points of the 500 ms report cycle (the onset is on it).
const cellExporterDown = 3100 * time.Millisecond

// Phase is one of the resilience study's failure phases: faults injected at
// the onset, on the same workload and fleet for every policy.
type Phase struct {
	Name string
	// Faulty lists the backends the phase's fault hits (none: the phase
	// hits the whole fleet or nothing).
	Faulty []int
	// Limit is the context limit the phase imposes (capability phase).
	Limit int
	// Extra are policies the phase runs besides the study's arms when no
	// policy is chosen (the wan-jitter phase's PressureNoNet).
	Extra []string
	// Faults builds the phase's faults for an onset.
	Faults func(onset time.Duration) []sim.Fault
	// Describe says what the phase does, for the report.
	Describe string
	// Base, if set, is the phase whose measures this one takes (a variant of
	// it under other settings): "failover" for failover-ttl500.
	Base string
	// HeartbeatTTL, if set, replaces the routers' heartbeat TTL
	// (router.DefaultHeartbeatTTL) in this phase.
	HeartbeatTTL time.Duration
	// Stagger, in telemetry-loss phases, is the time between one backend's
	// fault and the next's (backend i's starts at the onset + i x Stagger);
	// zero: all at the onset.
	Stagger time.Duration
	// SimOnly phases are left out of a live study (the live fleet does not
	// take the phase's settings).
	SimOnly bool
	// Load, if > 0, scales the study's rate in this phase (the network
	// sub-phases' near-idle and saturation).
	Load float64
	// Arms, if set, are the phase's policies when none is chosen, instead
	// of the study's (the network sub-phases' three arms).
	Arms []string
	// Optional phases run only when named (--phase), not in the whole study.
	Optional bool
}

// kind is the phase whose measures this one takes.
func (p Phase) kind() string {
	if p.Base != "" {
		return p.Base
	}
	return p.Name
}

// SolyxHeartbeatTTL is the Solyx AI Grid paper's heartbeat TTL: a cell whose
// last heartbeat is older than one 500 ms interval is Failed.
const SolyxHeartbeatTTL = 500 * time.Millisecond

// ResiliencePhases are the Solyx AI Grid paper's seven phases as this study defines them.
func ResiliencePhases() []Phase {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	return append([]Phase{
		{Name: "baseline", Describe: "no fault",
			Faults: func(time.Duration) []sim.Fault { return nil }},
		{Name: "capability", Faulty: []int{faultyBackend}, Limit: contextLimit,
			Describe: fmt.Sprintf("backend %d starts refusing requests over %d tokens (HTTP 400, not retried) while /v1/models still reports 131072", faultyBackend, contextLimit),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultLimit, Backends: []int{faultyBackend}, At: at, Limit: contextLimit}}
			}},
		{Name: "failover", Faulty: []int{faultyBackend},
			Describe: fmt.Sprintf("backend %d is killed: what it holds fails at once, later requests are refused, its heartbeats stop", faultyBackend),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultKill, Backends: []int{faultyBackend}, At: at}}
			}},
		{Name: "failover-ttl500", Base: "failover", Faulty: []int{faultyBackend}, HeartbeatTTL: SolyxHeartbeatTTL, SimOnly: true,
			Describe: fmt.Sprintf("failover with the Solyx AI Grid paper's heartbeat TTL of %v instead of our %v (heartbeats still every 500 ms)", SolyxHeartbeatTTL, router.DefaultHeartbeatTTL),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultKill, Backends: []int{faultyBackend}, At: at}}
			}},
		{Name: "wan-jitter", Faulty: westSite, Extra: []string{PressureNoNet},
			Describe: "the path to the west site's three backends gains an exponential delay of mean 20 ms each way (the Solyx AI Grid paper's 20 ms jitter induction)",
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultPath, Backends: westSite, At: at, Jitter: 20 * time.Millisecond}}
			}},
		{Name: "telemetry-loss",
			Describe: "every backend's DCGM exporter dies; reports carry no hardware signals",
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultExporter, Backends: all, At: at}}
			}},
		{Name: "telemetry-loss-each", Base: "telemetry-loss", Stagger: cellExporterDown, SimOnly: true,
			Describe: fmt.Sprintf("each backend's DCGM exporter dies on its own (the Solyx AI Grid paper kills each cell's exporter separately): backend i's at the onset + %v x i, back %v later, one down at a time", cellExporterDown, cellExporterDown),
			Faults: func(at time.Duration) []sim.Fault {
				var fs []sim.Fault
				for _, b := range all {
					start := at + time.Duration(b)*cellExporterDown
					fs = append(fs, sim.Fault{Kind: sim.FaultExporter, Backends: []int{b}, At: start, Until: start + cellExporterDown})
				}
				return fs
			}},
		{Name: "burst",
			Describe: "50 new sessions arrive at once at the onset and every 30 s after it (the Solyx AI Grid paper's 50-request bursts every 30 s)",
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultBurst, At: at, Every: 30 * time.Second, Count: 50}}
			}},
		{Name: "thermal", Faulty: []int{faultyBackend},
			Describe: fmt.Sprintf("backend %d's GPUs heat by 25 C over 20 s; from 10 s its clock throttles to 40%% at 20 s, and every step costs 1/clock", faultyBackend),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultThermal, Backends: []int{faultyBackend}, At: at, PeakC: 25, Ramp: 20 * time.Second, MinClock: 0.4}}
			}},
		pciePhase(),
	}, append(lifecyclePhases(), networkPhases()...)...)
}

// PhaseSpec is one run of the study: a phase, a policy, a seed.
type PhaseSpec struct {
	Phase  Phase
	Policy string
	Seed   uint64
	RPS    float64
	// Onset is when the phase's faults start; Pre is the fault-free span
	// before it that serves as the reference; Post the span measured after.
	Onset, Pre, Post time.Duration
	// Scale shrinks ResilienceFleet (see ResilienceFleetAt; 0 or 1: full
	// scale); RPS is then already the scaled rate.
	Scale float64
	// Mode labels the run in the report: "" for the simulator study,
	// "sim" and "live" for the two halves of a live study.
	Mode string
	// Fleet, if set, replaces ResilienceFleet (ResilienceOptions.Fleet).
	Fleet *config.Fleet
}

// PhaseRun is what one run produced, in the shape both a simulated and a
// live run can give: the turns that ended in [Onset-Pre, Onset+Post), every
// dispatch, and the marks (fault onsets, telemetry fallbacks).
type PhaseRun struct {
	Spec       PhaseSpec
	SLO        time.Duration
	Records    []metrics.TurnRecord
	Dispatches []sim.Dispatch
	Marks      []sim.Mark
	// RouterFailedAt is, per router, when its lifecycle marked the faulty
	// backend Failed (negative: never).
	RouterFailedAt []time.Duration
	WallS          float64
	// MaxOutput is the workload's longest output: a turn whose prompt is
	// longer than the phase's limit less MaxOutput is a long prompt (the
	// limited backend may refuse it).
	MaxOutput int
	// Signals are the backends' telemetry reports, in the phases that
	// measure the Solyx AI Grid paper's lead time (leadPhase; simulator
	// only: nil in a live run).
	Signals []sim.SignalSample
}

// PhaseRunner runs phase specs: the simulator here, a live fleet later.
type PhaseRunner interface {
	RunPhases(ctx context.Context, specs []PhaseSpec, progress Progress) ([]PhaseRun, error)
}

// SimPhaseRunner runs phases in the simulator, Parallel at a time, through RunAll.
type SimPhaseRunner struct {
	Registry *policy.Registry
	Parallel int
}

// Every arm runs with the router's heartbeat lifecycle (TTL 750 ms, 1.5 heartbeat
// intervals) and the simulator's telemetry; the capability filter, error rate,
// signals and path estimates are there for every policy, and only the policy
// decides whether to use them.
func resilienceRunSpec(ps PhaseSpec) RunSpec {
	fl, _ := ResilienceFleetAt(ps.Scale)
	if ps.Fleet != nil {
		fl = ps.Fleet
	}
	ttl := router.DefaultHeartbeatTTL
	if ps.Phase.HeartbeatTTL > 0 {
		ttl = ps.Phase.HeartbeatTTL
	}
	return RunSpec{FleetName: "sites", Fleet: fl, Policy: ps.Policy, RPS: ps.RPS, Seed: ps.Seed,
		Warmup: ps.Onset - ps.Pre, Measure: ps.Pre + ps.Post, KeepRecords: true,
		Telemetry: sim.DefaultTelemetry(), Router: router.Config{HeartbeatTTL: ttl},
		Faults: ps.Phase.Faults(ps.Onset), MaxModelLen: 131072, RecordDispatches: true, RecordSignals: leadPhase(ps.Phase)}
}

// RunPhases implements PhaseRunner.
func (r SimPhaseRunner) RunPhases(ctx context.Context, specs []PhaseSpec, progress Progress) ([]PhaseRun, error) {
	rs := make([]RunSpec, len(specs))
	for i, ps := range specs {
		rs[i] = resilienceRunSpec(ps)
	}
	reg := r.Registry
	if reg == nil {
		reg = ResilienceRegistry()
	}
	res, err := RunAll(ctx, rs, reg, r.Parallel, progress)
	if err != nil {
		return nil, err
	}
	out := make([]PhaseRun, len(specs))
	for i, rr := range res {
		pr := PhaseRun{Spec: specs[i], SLO: rs[i].Fleet.Client.TTFTSLO, Records: rr.Records, Dispatches: rr.Dispatches,
			Marks: rr.Marks, WallS: rr.WallS, MaxOutput: rs[i].Fleet.Workload.OutputTokensMax, Signals: rr.Signals}
		for _, re := range rr.Routers {
			at := time.Duration(-1)
			for _, b := range specs[i].Phase.Faulty {
				if b < len(re.Backends) && re.Backends[b].StateName == "failed" {
					at = re.Backends[b].Since
				}
			}
			pr.RouterFailedAt = append(pr.RouterFailedAt, at)
		}
		out[i] = pr
	}
	return out, nil
}

// ResilienceOptions choose how much of the study to run.
type ResilienceOptions struct {
	// Quick runs 2 replicates with a 120 s onset and 30 s measured after it.
	Quick      bool
	Replicates int // 0: 5 (2 when Quick)
	// Seeds, if set, are the seeds run (at least 2, distinct) instead of
	// 1..Replicates: held-out seeds other than 1-5 that the pressure
	// tuning (training seeds 11-30) never saw, such as 1-10 and 31-40.
	// Replicates, if also set, must equal their number.
	Seeds []uint64
	// Post, if set, is the span measured after the onset instead of the
	// default 60 s (30 s when Quick).
	Post     time.Duration
	Phases   []string
	Policies []string
	Progress Progress
	Runner   PhaseRunner
	// Fleet, if set, runs the study on another fleet (simulator only;
	// every phase's backends must exist in it), at RPS, or by default at
	// the study's rate per GPU (ResilienceRPS over ResilienceFleet's GPUs).
	Fleet *config.Fleet
	RPS   float64
	// Live, when set, makes a live study: every spec runs at LiveScale on
	// Live and, as its twin, on Runner (the simulator), with LivePolicies
	// by default and the live windows (see ResilienceSpecs).
	Live PhaseRunner
}

// LiveScale is the live study's scale: one GPU per backend (9 GPUs) and a
// quarter of the rate, 11.25 req/s, which two cores can serve in-process.
const LiveScale = 0.25

// LivePolicies are the live study's arms: pressure, least-request and round-robin.
var LivePolicies = []string{"pressure", "least-request", "round-robin"}

// ErrBadOptions marks options the study cannot run with.
var ErrBadOptions = errors.New("bad resilience study options")

// ResilienceSpecs expands the study into runs.
func ResilienceSpecs(opts ResilienceOptions) ([]PhaseSpec, error) {
	opts.Phases = expandPhaseGroups(opts.Phases)
	reps := opts.Replicates
	onset, pre, post := 180*time.Second, 30*time.Second, 60*time.Second
	if opts.Live != nil {
		// A live run costs its wall time: 120 s + 60 s, or 90 s + 30 s
		// quick (the onset doubles as the warm-up).
		onset = 120 * time.Second
	}
	if opts.Quick {
		onset, post = 120*time.Second, 30*time.Second
		if opts.Live != nil {
			onset = 90 * time.Second
		}
		if reps == 0 {
			reps = 2
		}
	}
	if reps == 0 {
		reps = 5
	}
	if opts.Post > 0 {
		post = opts.Post
	}
	if reps < 2 {
		return nil, fmt.Errorf("%w: at least 2 replicates are needed for confidence intervals, got %d", ErrBadOptions, reps)
	}
	seeds, err := studySeeds(opts.Seeds, opts.Replicates, reps)
	if err != nil {
		return nil, err
	}
	pols := opts.Policies
	if len(pols) == 0 {
		pols = ResiliencePolicies
		if opts.Live != nil {
			pols = LivePolicies
		}
	}
	rps, scale, modes := float64(ResilienceRPS), 0.0, []string{""}
	if opts.Live != nil {
		_, factor := ResilienceFleetAt(LiveScale)
		rps, scale, modes = ResilienceRPS*factor, LiveScale, []string{"sim", "live"}
	}
	var phases []Phase
	for _, ph := range ResiliencePhases() {
		if ph.SimOnly && opts.Live != nil {
			if slices.Contains(opts.Phases, ph.Name) {
				return nil, fmt.Errorf("%w: phase %q runs in the simulator only, not with --live", ErrBadOptions, ph.Name)
			}
			continue
		}
		if (len(opts.Phases) == 0 && !ph.Optional) || slices.Contains(opts.Phases, ph.Name) {
			phases = append(phases, ph)
		}
	}
	for _, name := range opts.Phases {
		if !slices.ContainsFunc(phases, func(p Phase) bool { return p.Name == name }) {
			return nil, fmt.Errorf("%w: unknown phase %q (phases: %s)", ErrBadOptions, name, phaseNames())
		}
	}
	if opts.Fleet != nil {
		if opts.Live != nil {
			return nil, fmt.Errorf("%w: a study on another fleet runs in the simulator only, not with --live", ErrBadOptions)
		}
		if rps, err = fleetRate(opts.Fleet, opts.RPS, phases); err != nil {
			return nil, err
		}
	}
	var specs []PhaseSpec
	for _, ph := range phases {
		phasePols := pols
		if len(opts.Policies) == 0 {
			phasePols = append(slices.Clip(pols), ph.Extra...)
			if len(ph.Arms) > 0 {
				phasePols = ph.Arms
			}
		}
		rps := rps
		if ph.Load > 0 {
			rps *= ph.Load
		}
		for _, pol := range phasePols {
			for _, seed := range seeds {
				for _, mode := range modes {
					specs = append(specs, PhaseSpec{Phase: ph, Policy: pol, Seed: seed, RPS: rps, Onset: onset, Pre: pre, Post: post,
						Scale: scale, Mode: mode, Fleet: opts.Fleet})
				}
			}
		}
	}
	return specs, nil
}

// studySeeds is the study's seeds: the chosen ones, checked, or 1..reps.
func studySeeds(chosen []uint64, replicates, reps int) ([]uint64, error) {
	if len(chosen) == 0 {
		seeds := make([]uint64, reps)
		for i := range seeds {
			seeds[i] = uint64(i + 1)
		}
		return seeds, nil
	}
	if replicates != 0 && replicates != len(chosen) {
		return nil, fmt.Errorf("%w: %d replicates but %d seeds chosen; give one or the other", ErrBadOptions, replicates, len(chosen))
	}
	if len(chosen) < 2 {
		return nil, fmt.Errorf("%w: at least 2 seeds are needed for confidence intervals, got %v", ErrBadOptions, chosen)
	}
	for i, s := range chosen {
		if s == 0 || slices.Contains(chosen[:i], s) {
			return nil, fmt.Errorf("%w: seeds must be distinct and at least 1, got %v", ErrBadOptions, chosen)
		}
	}
	return chosen, nil
}

func phaseNames() string {
	var names []string
	for _, p := range ResiliencePhases() {
		names = append(names, p.Name)
	}
	return fmt.Sprint(names)
}

// Resilience runs the study.
func Resilience(ctx context.Context, opts ResilienceOptions) (*ResilienceResults, error) {
	specs, err := ResilienceSpecs(opts)
	if err != nil {
		return nil, err
	}
	runner := opts.Runner
	if runner == nil {
		runner = SimPhaseRunner{}
	}
	res := &ResilienceResults{Study: "resilience", Quick: opts.Quick, RPS: ResilienceRPS}
	if opts.Fleet != nil {
		res.RPS = specs[0].RPS
	}
	if opts.Live == nil {
		runs, err := runner.RunPhases(ctx, specs, opts.Progress)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			res.Runs = append(res.Runs, Measure(r))
		}
		return res, nil
	}
	// The simulator twins first (quick, in parallel), then the live runs
	// one at a time; the report lists them side by side.
	var simSpecs, liveSpecs []PhaseSpec
	for _, sp := range specs {
		if sp.Mode == "live" {
			liveSpecs = append(liveSpecs, sp)
		} else {
			simSpecs = append(simSpecs, sp)
		}
	}
	res.RPS, res.Scale = specs[0].RPS, LiveScale
	simRuns, err := runner.RunPhases(ctx, simSpecs, nil)
	if err != nil {
		return nil, err
	}
	liveRuns, err := opts.Live.RunPhases(ctx, liveSpecs, opts.Progress)
	if err != nil {
		return nil, err
	}
	for i := range liveRuns {
		res.Runs = append(res.Runs, Measure(simRuns[i]), Measure(liveRuns[i]))
	}
	return res, nil
}

// PhaseMetrics is what one run of a phase measured, over the turns that
// ended in [onset, onset+post).
type PhaseMetrics struct {
	Phase  string `json:"phase"`
	Policy string `json:"policy"`
	Seed   uint64 `json:"seed"`
	// Mode is "sim" or "live" in a live study, empty otherwise.
	Mode  string `json:"mode,omitempty"`
	Turns int    `json:"turns"`
	// SuccessPct is completed turns over turns that ended.
	SuccessPct float64 `json:"success_pct"`
	P50S       float64 `json:"ttft_p50_s"`
	P95S       float64 `json:"ttft_p95_s"`
	P99S       float64 `json:"ttft_p99_s"`
	// Misroutes counts attempts sent, from the onset on, to a backend that
	// could not serve them (killed, hung, or over its context limit).
	Misroutes int `json:"misroutes"`
	// LeakPct is misroutes over the dispatches of requests longer than the
	// phase's limit (capability phase; the Solyx AI Grid paper's leak rate).
	LeakPct float64 `json:"leak_pct"`
	// DetectS is the time to detect (see the package documentation); -1
	// when the phase has nothing to detect, and the whole measured span when
	// the fault was never detected (Detected false). In the burst phase it
	// is the routing reaction p95 (burstReaction).
	DetectS  float64 `json:"detect_s"`
	Detected bool    `json:"detected"`
	// RecoverS is the time from the onset until every later 5 s bin is
	// healthy (success >= 99% and p95 TTFT <= 1.5 x the pre-fault p95 +
	// 0.25 s); the whole span if the last bin is not.
	RecoverS float64 `json:"recover_s"`
	// RouterDetectS is when the routers' lifecycle marked the faulty
	// backend Failed, after the onset (the slowest router); -1 if none did.
	RouterDetectS float64 `json:"router_detect_s"`
	// LongSuccessPct is the success rate of long-prompt turns (capability
	// phase: prompts over the limit less the workload's longest output).
	LongSuccessPct float64 `json:"long_success_pct"`
	LongTurns      int     `json:"long_turns"`
	// Reroute* are the failover phase's reroute times (the Solyx AI Grid paper's "time
	// for traffic to be successfully rerouted to a healthy endpoint"), over
	// the turns the kill caught: those in flight on the killed backend at
	// the kill and those sent there after it. A turn's reroute time runs
	// from when the kill caught it (the kill, or its dispatch there if
	// later) to the dispatch to another backend that then served it,
	// through every retry between (the router's before the first byte, the
	// client's after it). RerouteTurns counts the caught turns that
	// completed, RerouteFailed those that did not; the percentiles are 0
	// when none completed.
	RerouteP50S   float64 `json:"reroute_p50_s"`
	RerouteP95S   float64 `json:"reroute_p95_s"`
	RerouteP99S   float64 `json:"reroute_p99_s"`
	RerouteTurns  int     `json:"reroute_turns"`
	RerouteFailed int     `json:"reroute_failed"`
	// Breaches counts turns that failed or missed the TTFT SLO; LeadS is,
	// in the thermal and pcie phases, the time from the detection (DetectS) to the
	// first breach, or to the end of the span if none came (-1: not
	// detected).
	Breaches int     `json:"breaches"`
	LeadS    float64 `json:"lead_s"`
	WallS    float64 `json:"wall_s"`
	// Extra holds the measures of the seeds' phases and checks (see
	// PhaseExtras); nil when the phase has none.
	Extra *PhaseExtras `json:"extra,omitempty"`
}

// Measure computes a run's metrics.
func Measure(r PhaseRun) PhaseMetrics {
	sp := r.Spec
	from, to := sp.Onset, sp.Onset+sp.Post
	m := PhaseMetrics{Phase: sp.Phase.Name, Policy: sp.Policy, Seed: sp.Seed, Mode: sp.Mode, DetectS: -1, RouterDetectS: -1, LeadS: -1, WallS: r.WallS}
	var ttfts, pre []float64
	completed, preDone, preTurns, longDone := 0, 0, 0, 0
	firstBreach := time.Duration(-1)
	for i := range r.Records {
		rec := &r.Records[i]
		switch {
		case rec.End >= from && rec.End < to:
			m.Turns++
			if rec.Completed {
				completed++
				ttfts = append(ttfts, rec.TTFT().Seconds())
			}
			if sp.Phase.Limit > 0 && rec.PromptTokens > sp.Phase.Limit-r.MaxOutput {
				m.LongTurns++
				if rec.Completed {
					longDone++
				}
			}
			if r.SLO > 0 && !rec.Good(r.SLO) {
				m.Breaches++
				if firstBreach < 0 || rec.End < firstBreach {
					firstBreach = rec.End
				}
			}
		case rec.End >= sp.Onset-sp.Pre && rec.End < from:
			preTurns++
			if rec.Completed {
				preDone++
				pre = append(pre, rec.TTFT().Seconds())
			}
		}
	}
	slices.Sort(ttfts)
	slices.Sort(pre)
	m.SuccessPct = pct(completed, m.Turns)
	m.LongSuccessPct = pct(longDone, m.LongTurns)
	if sp.Phase.kind() == "failover" {
		reroutes, failed := rerouteTimes(r.Records, r.Dispatches, sp.Phase.Faulty, from, to)
		slices.Sort(reroutes)
		m.RerouteTurns, m.RerouteFailed = len(reroutes), failed
		m.RerouteP50S, m.RerouteP95S, m.RerouteP99S = metrics.Percentile(reroutes, 0.5), metrics.Percentile(reroutes, 0.95), metrics.Percentile(reroutes, 0.99)
	}
	m.P50S, m.P95S, m.P99S = metrics.Percentile(ttfts, 0.5), metrics.Percentile(ttfts, 0.95), metrics.Percentile(ttfts, 0.99)

	long, lastMis := 0, time.Duration(-1)
	for _, d := range r.Dispatches {
		if d.At < from || d.At >= to {
			continue
		}
		if d.Misroute {
			m.Misroutes++
			lastMis = d.At
		}
		if sp.Phase.Limit > 0 && d.Tokens > sp.Phase.Limit {
			long++
		}
	}
	m.LeakPct = pct(m.Misroutes, long)

	span := sp.Post.Seconds()
	switch sp.Phase.kind() {
	case "capability", "failover":
		// Detected once misroutes stop: the last misroute, if it came more
		// than 5 s before the end of the span.
		m.DetectS, m.Detected = 0, true
		if lastMis >= 0 {
			m.DetectS = (lastMis - from).Seconds()
			if to-lastMis < 5*time.Second {
				m.DetectS, m.Detected = span, false
			}
		}
	case "thermal", "pcie", "wan-jitter":
		m.DetectS, m.Detected = shareDrop(r.Dispatches, sp.Phase.Faulty, sp.Onset-sp.Pre, from, to)
	case "burst":
		m.DetectS, m.Detected = burstReaction(r.Marks, from, to)
	case "telemetry-loss":
		for _, mk := range r.Marks {
			if mk.What == "fallback" && mk.At >= from {
				died := from + time.Duration(mk.Backend)*sp.Phase.Stagger
				m.DetectS, m.Detected = max(m.DetectS, (mk.At-died).Seconds()), true
			}
		}
	}
	for _, at := range r.RouterFailedAt {
		if at >= from {
			m.RouterDetectS = max(m.RouterDetectS, (at - from).Seconds())
		}
	}
	if leadPhase(sp.Phase) && m.Detected {
		end := to
		if firstBreach >= 0 {
			end = firstBreach
		}
		m.LeadS = (end - from).Seconds() - m.DetectS
	}
	m.RecoverS = recovery(r.Records, from, to, pre, preDone, preTurns)
	m.Extra = measureExtras(r)
	return m
}

// rerouteTimes returns the reroute time, in seconds, of every turn ending in
// [from, to) that a fault on the faulty backends caught from `from` on (see
// PhaseMetrics.RerouteP99S) and that completed, and how many caught turns
// failed. A turn's dispatches are those of its session between its start and
// its end (a session's turns do not overlap).
func rerouteTimes(recs []metrics.TurnRecord, ds []sim.Dispatch, faulty []int, from, to time.Duration) (times []float64, failed int) {
	bySession := map[uint64][]sim.Dispatch{}
	for _, d := range ds {
		bySession[d.Session] = append(bySession[d.Session], d)
	}
	for i := range recs {
		rec := &recs[i]
		if rec.End < from || rec.End >= to {
			continue
		}
		var own []sim.Dispatch
		for _, d := range bySession[rec.Session] {
			if d.At >= rec.Start && d.At <= rec.End {
				own = append(own, d)
			}
		}
		// Caught: a dispatch to a faulty backend that did not serve the
		// turn, and whose failure came from `from` on (it was sent then, or
		// it was still the turn's latest dispatch then).
		caught := time.Duration(-1)
		for k, d := range own {
			last := k == len(own)-1
			if !slices.Contains(faulty, d.Backend) || (last && rec.Completed) {
				continue
			}
			if d.At >= from || last || own[k+1].At >= from {
				caught = max(d.At, from)
				break
			}
		}
		if caught < 0 {
			continue
		}
		served := own[len(own)-1]
		if !rec.Completed || slices.Contains(faulty, served.Backend) || served.At < caught {
			failed++
			continue
		}
		times = append(times, (served.At - caught).Seconds())
	}
	return times, failed
}

func pct(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

// burstReaction is the routing reaction to the bursts that started in
// [from, to): the p95, over those bursts, of the time from a burst's onset
// to the first change of any router's policy weights ("weights" marks)
// before the next burst or `to`, and whether every burst saw one (a burst
// that saw none counts as the time to the end of its span). It is -1, not
// detected, when no router recorded weights (a policy without weights of
// its own).
func burstReaction(marks []sim.Mark, from, to time.Duration) (float64, bool) {
	var onsets, changes []time.Duration
	for _, mk := range marks {
		switch {
		case mk.What == "fault:burst" && mk.At >= from && mk.At < to:
			onsets = append(onsets, mk.At)
		case mk.What == "weights":
			changes = append(changes, mk.At)
		}
	}
	if len(onsets) == 0 || len(changes) == 0 {
		return -1, false
	}
	slices.Sort(onsets)
	slices.Sort(changes)
	all := true
	var times []float64
	for i, on := range onsets {
		end := to
		if i+1 < len(onsets) {
			end = onsets[i+1]
		}
		react := end - on
		k, _ := slices.BinarySearch(changes, on)
		if k < len(changes) && changes[k] < end {
			react = changes[k] - on
		} else {
			all = false
		}
		times = append(times, react.Seconds())
	}
	slices.Sort(times)
	return metrics.Percentile(times, 0.95), all
}

// shareDrop is the time from the onset to the start of the first 5 s span in
// which the faulty backends got less than half their pre-fault dispatch rate.
func shareDrop(ds []sim.Dispatch, faulty []int, preFrom, from, to time.Duration) (float64, bool) {
	if len(faulty) == 0 {
		return -1, false
	}
	var times []time.Duration
	preCount := 0
	for _, d := range ds {
		if !slices.Contains(faulty, d.Backend) {
			continue
		}
		if d.At >= preFrom && d.At < from {
			preCount++
		} else if d.At >= from && d.At < to {
			times = append(times, d.At)
		}
	}
	const win = 5 * time.Second
	expect := float64(preCount) / (from - preFrom).Seconds() * win.Seconds()
	if expect <= 0 {
		return -1, false
	}
	for t := from; t+win <= to; t += 100 * time.Millisecond {
		n := 0
		for _, at := range times {
			if at >= t && at < t+win {
				n++
			}
		}
		if float64(n) < expect/2 {
			return (t - from).Seconds(), true
		}
	}
	return (to - from).Seconds(), false
}

// recovery is the time from `from` until every later 5 s bin is healthy.
func recovery(recs []metrics.TurnRecord, from, to time.Duration, pre []float64, preDone, preTurns int) float64 {
	const bin = 5 * time.Second
	n := int((to - from) / bin)
	if n == 0 || preTurns == 0 {
		return 0
	}
	limit := 1.5*metrics.Percentile(pre, 0.95) + 0.25
	ended, done := make([]int, n), make([]int, n)
	ttfts := make([][]float64, n)
	for i := range recs {
		r := &recs[i]
		if r.End < from || r.End >= from+time.Duration(n)*bin {
			continue
		}
		k := int((r.End - from) / bin)
		ended[k]++
		if r.Completed {
			done[k]++
			ttfts[k] = append(ttfts[k], r.TTFT().Seconds())
		}
	}
	last := -1 // last unhealthy bin
	for k := range n {
		slices.Sort(ttfts[k])
		healthy := ended[k] == 0 || (float64(done[k]) >= 0.99*float64(ended[k]) && metrics.Percentile(ttfts[k], 0.95) <= limit)
		if !healthy {
			last = k
		}
	}
	return float64(last+1) * bin.Seconds()
}

// Stat is a mean over replicates with a 95% confidence interval.
type Stat struct {
	Mean float64 `json:"mean"`
	// Half is the half-width of the 95% interval (Student's t).
	Half float64 `json:"ci95"`
	N    int     `json:"n"`
	// Max is the largest value.
	Max float64 `json:"max"`
}

// Lo and Hi are the interval's ends.
func (s Stat) Lo() float64 { return s.Mean - s.Half }

// Hi is the interval's upper end.
func (s Stat) Hi() float64 { return s.Mean + s.Half }

// tQuantile975 is Student's t 0.975 quantile for 1..30 degrees of freedom.
var tQuantile975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// NewStat summarizes values.
func NewStat(vs []float64) Stat {
	n := len(vs)
	if n == 0 {
		return Stat{}
	}
	var sum float64
	for _, v := range vs {
		sum += v
	}
	mean, most := sum/float64(n), slices.Max(vs)
	if n == 1 {
		return Stat{Mean: mean, N: 1, Max: most}
	}
	var ss float64
	for _, v := range vs {
		ss += (v - mean) * (v - mean)
	}
	t := 1.96
	if n-1 <= len(tQuantile975) {
		t = tQuantile975[n-2]
	}
	return Stat{Mean: mean, Half: t * math.Sqrt(ss/float64(n-1)/float64(n)), N: n, Max: most}
}
