package study

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
)

// The overlap study's fleet: one backend of OverlapWorkers half-scale GPUs
// behind one router, and a waiting bound of OverlapMaxWaiting requests at
// the gateway whatever the slots per worker (as max_waiting_requests bounds
// waiting separately from the slots in the live gateway).
const (
	OverlapWorkers    = 4
	OverlapMaxWaiting = 400
)

// OverlapSlots are the max_inflight_per_worker settings compared: one and
// two submissions per worker, and the default (the engine's 25 sequences).
var OverlapSlots = []int{1, 2, gateway.DefaultSlotsConfig().MaxInflightPerWorker}

// OverlapClients are the closed-loop client counts: from one client per
// worker to 2.5 times what the default admits (25 x 4 = 100).
var OverlapClients = []int{4, 8, 16, 32, 64, 128, 256}

// OverlapOptions choose how much of the study to run.
type OverlapOptions struct {
	// Quick runs one seed with 20 s of warm-up and 40 s measured.
	Quick    bool
	Seeds    int   // 0: 3 (1 when Quick)
	Clients  []int // nil: OverlapClients
	Slots    []int // nil: OverlapSlots
	Warmup   time.Duration
	Measure  time.Duration // 0: 30 s warm-up and 60 s measured (see Quick)
	Parallel int
	Progress Progress
}

// ErrBadOverlapOptions marks options the overlap study cannot run with.
var ErrBadOverlapOptions = errors.New("bad overlap study options")

// OverlapFleet is the study's fleet with slots submissions per worker: one
// region, one router, one backend ("b0") of OverlapWorkers half-scale GPUs;
// the routing study's sessions and client, except that a client sends its
// next turn as soon as the previous one ends (no think time), as the
// closed-loop clients of a load test do.
func OverlapFleet(slots int) *config.Fleet {
	f, _ := config.Preset("homo") // the defaults every fleet file starts from
	f.Name = fmt.Sprintf("overlap-%dslots", slots)
	f.Regions = []config.RegionSpec{{Name: "local", Routers: 1, RTTms: map[string]float64{"local": 1},
		Backends: []config.BackendFileSpec{{Name: "b0", GPUs: OverlapWorkers}}}}
	f.Gateway.SlotsPerWorker = slots
	f.Gateway.MaxWaitingFactor = float64(OverlapMaxWaiting) / float64(slots*OverlapWorkers)
	f.Workload.ThinkTimeMean = 0
	return f
}

// OverlapSpecs expands the study into runs: every slot setting at every
// client count with the same seeds, so the settings see the same sessions.
func OverlapSpecs(opts OverlapOptions) ([]RunSpec, error) {
	seeds, warm, meas := opts.Seeds, 30*time.Second, 60*time.Second
	if opts.Quick {
		warm, meas = 20*time.Second, 40*time.Second
		if seeds == 0 {
			seeds = 1
		}
	}
	if seeds == 0 {
		seeds = 3
	}
	if opts.Measure > 0 {
		warm, meas = opts.Warmup, opts.Measure
	}
	clients, slots := opts.Clients, opts.Slots
	if clients == nil {
		clients = OverlapClients
	}
	if slots == nil {
		slots = OverlapSlots
	}
	var errs []error
	if seeds < 1 {
		errs = append(errs, fmt.Errorf("seeds must be >= 1, got %d", seeds))
	}
	for _, c := range clients {
		if c < 1 {
			errs = append(errs, fmt.Errorf("client counts must be >= 1, got %d", c))
		}
	}
	for _, s := range slots {
		if s < 1 {
			errs = append(errs, fmt.Errorf("slots per worker must be >= 1, got %d", s))
		}
	}
	if warm < 0 || meas <= 0 {
		errs = append(errs, fmt.Errorf("warm-up must be >= 0 and the measured window > 0, got %v and %v", warm, meas))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOverlapOptions, err)
	}
	var specs []RunSpec
	for _, c := range clients {
		for _, sl := range slots {
			f := OverlapFleet(sl)
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				specs = append(specs, RunSpec{FleetName: f.Name, Fleet: f, Policy: "round-robin", Clients: c, Seed: seed,
					Warmup: warm, Measure: meas, KeepRecords: true})
			}
		}
	}
	return specs, nil
}

// Overlap runs the study in the simulator.
func Overlap(ctx context.Context, reg *policy.Registry, opts OverlapOptions) (*OverlapResults, error) {
	specs, err := OverlapSpecs(opts)
	if err != nil {
		return nil, err
	}
	runs, err := RunAll(ctx, specs, reg, opts.Parallel, opts.Progress)
	if err != nil {
		return nil, err
	}
	res := &OverlapResults{Study: "overlap", Quick: opts.Quick, Workers: OverlapWorkers, MaxWaiting: OverlapMaxWaiting,
		Warmup: specs[0].Warmup.Seconds(), Measure: specs[0].Measure.Seconds()}
	for i, rr := range runs {
		res.Runs = append(res.Runs, MeasureOverlap(specs[i].Fleet.Gateway.SlotsPerWorker, rr))
	}
	return res, nil
}

// OverlapRun is one run's figures, over the turns that ended in the
// measured window.
type OverlapRun struct {
	Slots   int    `json:"max_inflight_per_worker"`
	Clients int    `json:"clients"`
	Seed    uint64 `json:"seed"`
	// RequestsPS counts completed turns, InputTPS their prompt tokens
	// (cached or not), per second of the window.
	RequestsPS float64 `json:"requests_per_s"`
	InputTPS   float64 `json:"input_tokens_per_s"`
	// Client latency: a turn's first send to its last token.
	ClientP50S float64 `json:"client_p50_s"`
	ClientP95S float64 `json:"client_p95_s"`
	TTFTP50S   float64 `json:"ttft_p50_s"`
	TTFTP95S   float64 `json:"ttft_p95_s"`
	// Gateway queue: arrival at the gateway to admission into the engine.
	QueueMeanS float64 `json:"gateway_queue_mean_s"`
	QueueP95S  float64 `json:"gateway_queue_p95_s"`
	StepMeanMS float64 `json:"engine_step_mean_ms"`
	MeanBatch  float64 `json:"mean_batch"`
	BusyPct    float64 `json:"busy_pct"`
	KVFillPct  float64 `json:"kv_fill_pct"`
	ReusePct   float64 `json:"reuse_pct"`
	Turns      int     `json:"turns"`
	Completed  int     `json:"completed"`
	Failures   int     `json:"failures"`
	Rejections int     `json:"rejections"`
	// Degraded completions: completed turns that missed the TTFT SLO
	// (Late) or were preempted and recomputed in the engine (Preempted).
	Degraded  int `json:"degraded"`
	Late      int `json:"late"`
	Preempted int `json:"preempted"`
	// FailedPct is failures over turns ended; DegradedPct degraded over
	// completed turns.
	FailedPct   float64 `json:"failed_pct"`
	DegradedPct float64 `json:"degraded_pct"`
	// Gateway accounting over the whole run: every request received is
	// completed, cancelled, rejected, or still active or waiting.
	GatewayReceived  uint64  `json:"gateway_received"`
	GatewayCompleted uint64  `json:"gateway_completed"`
	GatewayCancelled uint64  `json:"gateway_cancelled"`
	GatewayRejected  uint64  `json:"gateway_rejected"`
	GatewayOpen      int     `json:"gateway_open"` // active or waiting at the end
	WallS            float64 `json:"wall_s"`
}

// MeasureOverlap computes a closed-loop run's figures (it needs the run's
// records and its closed-loop result).
func MeasureOverlap(slots int, rr RunResult) OverlapRun {
	m := OverlapRun{Slots: slots, Clients: rr.Clients, Seed: rr.Seed, Turns: rr.Turns, Completed: rr.Completed,
		Failures: rr.Failures, Rejections: rr.Rejections, ReusePct: rr.ReusePct, WallS: rr.WallS}
	var lat, ttft []float64
	var prompt int64
	for i := range rr.Records {
		r := &rr.Records[i]
		if !r.Completed {
			continue
		}
		lat = append(lat, (r.End - r.Start).Seconds())
		ttft = append(ttft, r.TTFT().Seconds())
		prompt += int64(r.PromptTokens)
	}
	slices.Sort(lat)
	slices.Sort(ttft)
	m.ClientP50S, m.ClientP95S = metrics.Percentile(lat, 0.5), metrics.Percentile(lat, 0.95)
	m.TTFTP50S, m.TTFTP95S = metrics.Percentile(ttft, 0.5), metrics.Percentile(ttft, 0.95)
	if rr.WindowS > 0 {
		m.RequestsPS = float64(rr.Completed) / rr.WindowS
		m.InputTPS = float64(prompt) / rr.WindowS
	}
	var busy, workers float64
	for _, b := range rr.Backends {
		// Busy-weighted over backends (one in the study's fleet).
		w := b.BusyPct * float64(b.Workers)
		m.MeanBatch += b.MeanBatch * w
		m.KVFillPct += b.MeanKVFillPct * w
		busy += w
		workers += float64(b.Workers)
		m.GatewayReceived += b.GatewayReceived
		m.GatewayCompleted += b.GatewayCompleted
		m.GatewayCancelled += b.GatewayCancelled
		m.GatewayRejected += b.GatewayRejected
		m.GatewayOpen += b.GatewayActive + b.GatewayWaiting
	}
	if busy > 0 {
		m.MeanBatch /= busy
		m.KVFillPct /= busy
		m.BusyPct = busy / workers
	}
	if c := rr.Closed; c != nil {
		m.QueueMeanS, m.QueueP95S = c.GatewayQueueMeanS, c.GatewayQueueP95S
		m.StepMeanMS = 1000 * c.MeanStepS
		m.Degraded, m.Late, m.Preempted = c.Degraded, c.Late, c.Preempted
	}
	m.FailedPct = pct(m.Failures, m.Turns)
	m.DegradedPct = pct(m.Degraded, m.Completed)
	return m
}
