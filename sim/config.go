package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/workload"
)

// Bounds that keep a mistyped fleet file from allocating without limit.
const (
	MaxRoutersPerRegion  = 1000
	MaxWorkersPerBackend = 4096
	MaxRPS               = 100_000
	MaxSimulated         = 24 * time.Hour
	MaxClients           = 1_000_000
)

// Region is a place with router replicas and backends.
type Region struct {
	Name    string
	Routers int
}

// BackendSpec is one backend: a gateway in front of Workers engine workers.
type BackendSpec struct {
	Name    string
	Region  int
	Workers int
	Profile engine.Profile
	// MaxModelLen is what the backend's /v1/models reports (prompt plus
	// output tokens); zero means unknown and unlimited.
	MaxModelLen int
	// Pool is the backend's index in Config.Pools (0 without pools).
	Pool int
	// Models are the models the backend serves (none: every model). When
	// any backend names models, each session asks for one of all the
	// models named, by its key, and the routers place it by model
	// (router.Serves); otherwise sessions name none and nothing changes.
	Models []string
}

// Pool is a set of backends that take requests up to a length. With pools,
// a router first picks the pool by the request's total tokens (prompt plus
// output, known to the simulator: an oracle a live router can only
// estimate): the pool of smallest MaxTokens that holds it, unless
// Config.PoolRouter picks it. A request longer
// than every pool's MaxTokens fails at once (client.TooLong). Inside the
// pool the router's policy places it among the pool's backends.
type Pool struct {
	Name      string
	MaxTokens int
}

// PoolRouter, set in Config.PoolRouter, picks the pool of each request of
// Config.Requests in place of the length rule (PoolFor). It is called once
// per attempt, at the router, with each pool's load at that instant (nil
// loads for a router whose ReadsLoads, see PoolLoadReader, is false); it must
// be deterministic and is used by one run only.
type PoolRouter interface {
	// Pool is the pool of request i of Config.Requests, sent as turn t, with
	// loads[p] pool p's load (the slice is the simulator's, good for the
	// call only); -1 fails the request at once as too long. The
	// returned output, if positive and below t's, replaces it: the pool's
	// engines stop the answer at their max context (a truncated answer).
	Pool(now time.Duration, i int, t workload.Turn, loads []PoolLoad) (pool, output int)
}

// PoolLoadReader is a PoolRouter that says whether Pool reads its loads.
// For one that does not, the simulator passes nil loads instead of summing
// every backend's load for each request (a pass over the fleet). A
// PoolRouter without this method gets the loads.
type PoolLoadReader interface {
	ReadsLoads() bool
}

// PoolLoad is a pool's load as its gateways see it: requests running on
// its engines and requests queued at its gateways.
type PoolLoad struct {
	Active, Queued int
}

// Config is everything one simulation run needs.
type Config struct {
	Regions []Region
	// Latency[i][j] is the one-way network latency from region i to region j.
	Latency [][]time.Duration
	// ClientLatency is the one-way latency between a client and its router.
	ClientLatency time.Duration
	Backends      []BackendSpec

	Gateway  gateway.Config
	Policy   string
	Params   policy.Params
	Workload workload.Config
	Client   client.Config
	Engine   engine.Options

	// Class, when set, replaces the session model (Workload) with a
	// workload class's open loop at RPS requests/s: requests arrive on the
	// class's schedule whatever the fleet does with them. A class with a
	// Lead runs that long before the warm-up (the windows and records are
	// shifted by it).
	Class *workload.Class

	RPS  float64
	Seed uint64

	// Clients, when > 0, replaces the Poisson session arrivals with a closed
	// loop of that many clients (RPS is unused): each client runs one session
	// at a time, sends a turn when its previous turn ended and the think time
	// (Workload.ThinkTimeMean, exponential; zero sends at once) has passed,
	// and starts its next session after a think time when a session ends,
	// whether by its last turn or by a turn that failed. Each client's first
	// session starts at an instant drawn uniformly in the first second.
	// Engine figures then cover the measured window only, and the result's
	// Closed part adds gateway queue times and degraded completions.
	Clients int

	// Pools, when set, split the backends by request length (see Pool).
	Pools []Pool
	// PoolRouter, when set with Pools and Requests, picks each request's
	// pool instead of the length rule.
	PoolRouter PoolRouter
	// Requests, when set, replace the sessions: each request is one turn
	// sent at its arrival time (open loop; RPS and Workload are unused).
	// Requests that arrive in [Warmup, Warmup+Measure) are measured, by
	// start; none arrive after the window, and the run goes on until every
	// measured turn has ended. A request with block hash ids uses the
	// engine's block cache (BlockSize tokens per id); one without uses no
	// cache. An output of 0 tokens is served as 1.
	Requests  []workload.TraceRequest
	BlockSize int
	Warmup    time.Duration
	Measure   time.Duration
	// Cooldown, if positive, runs the fleet on for this long after the
	// measured window, and the metrics cover the turns that started in the
	// window (not those that ended in it); turns still running at the end
	// are reported as unfinished.
	Cooldown time.Duration

	// KeepRecords keeps every measured turn's record in the result.
	KeepRecords bool

	// LiveSessionKeys keys every session of the session model as a live
	// router keys a request whose X-Session-ID is the session's id
	// (router.SessionIDKey of its decimal id) rather than by the id itself,
	// so that a live run playing the same sessions (SessionPlan) places
	// them alike; the records then name sessions by id.
	LiveSessionKeys bool

	// Router configures every router's liveness and capability tracking.
	Router router.Config
	// RouterAttempts is how many backends a router tries for one request
	// before its first byte, as the live router does: a refused connection
	// (killed backend), a gateway's overload answer or a context-length
	// refusal (while another backend fits) goes back to the router, which
	// places it again, excluding the backends tried. 0 means
	// router.DefaultMaxAttempts; 1 leaves every retry to the client.
	RouterAttempts int
	// Telemetry turns on heartbeats with signals and router probes.
	Telemetry Telemetry
	// Faults are injected at their times (see Fault).
	Faults []Fault
	// RecordDispatches keeps every dispatch in the result.
	RecordDispatches bool
	// RecordSignals keeps every telemetry report of every backend in the
	// result (Result.Signals), as its gateway assembled it.
	RecordSignals bool
}

// Telemetry configures the signals of the simulation.
type Telemetry struct {
	// Enabled: each gateway attaches a telemetry report (Signals, with mock
	// DCGM values from its workers' state) to its stats every Interval, and
	// each router probes every backend every ProbeInterval; routers also
	// hear how each attempt ended.
	Enabled       bool
	Interval      time.Duration
	ProbeInterval time.Duration
	// TTFTWindow is the span of the gateway's p95 TTFT; ErrorHalfLife that
	// of its error rate.
	TTFTWindow    time.Duration
	ErrorHalfLife time.Duration
}

// DefaultTelemetry is on with 500 ms heartbeats and probes, a 10 s TTFT
// window and a 5 s error half-life.
func DefaultTelemetry() Telemetry {
	return Telemetry{Enabled: true, Interval: 500 * time.Millisecond, ProbeInterval: 500 * time.Millisecond,
		TTFTWindow: 10 * time.Second, ErrorHalfLife: 5 * time.Second}
}

// Validate reports what is wrong with a configuration.
func (c *Config) Validate(reg *policy.Registry) error {
	var errs []error
	if len(c.Regions) == 0 {
		errs = append(errs, errors.New("no regions"))
	}
	routers := 0
	for _, r := range c.Regions {
		if r.Routers < 0 || r.Routers > MaxRoutersPerRegion {
			errs = append(errs, fmt.Errorf("region %q: routers must be 0-%d, got %d", r.Name, MaxRoutersPerRegion, r.Routers))
		}
		routers += r.Routers
	}
	if len(c.Regions) > 0 && routers == 0 {
		errs = append(errs, errors.New("no routers in any region"))
	}
	if len(c.Latency) != len(c.Regions) {
		errs = append(errs, fmt.Errorf("latency matrix has %d rows for %d regions", len(c.Latency), len(c.Regions)))
	}
	for i, row := range c.Latency {
		if len(row) != len(c.Regions) {
			errs = append(errs, fmt.Errorf("latency row %d has %d entries for %d regions", i, len(row), len(c.Regions)))
		}
		for j, d := range row {
			if d < 0 {
				errs = append(errs, fmt.Errorf("latency[%d][%d] = %v is negative", i, j, d))
			}
		}
	}
	if c.RouterAttempts < 0 {
		errs = append(errs, fmt.Errorf("RouterAttempts must be >= 0 (0: %d), got %d", router.DefaultMaxAttempts, c.RouterAttempts))
	}
	if c.ClientLatency < 0 {
		errs = append(errs, fmt.Errorf("client latency %v is negative", c.ClientLatency))
	}
	if len(c.Backends) == 0 {
		errs = append(errs, errors.New("no backends"))
	}
	names := make(map[string]bool, len(c.Backends))
	for _, b := range c.Backends {
		if names[b.Name] {
			errs = append(errs, fmt.Errorf("backend name %q used twice", b.Name))
		}
		names[b.Name] = true
		if b.Region < 0 || b.Region >= len(c.Regions) {
			errs = append(errs, fmt.Errorf("backend %q: region index %d out of range", b.Name, b.Region))
		}
		if b.Workers < 1 || b.Workers > MaxWorkersPerBackend {
			errs = append(errs, fmt.Errorf("backend %q: workers (GPUs) must be 1-%d, got %d", b.Name, MaxWorkersPerBackend, b.Workers))
		}
		if err := b.Profile.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("backend %q: %w", b.Name, err))
		}
		for _, m := range b.Models {
			if m == "" {
				errs = append(errs, fmt.Errorf("backend %q: a model name is empty", b.Name))
			}
		}
	}
	if reg != nil && !reg.Has(c.Policy) {
		errs = append(errs, fmt.Errorf("unknown policy %q (known: %v)", c.Policy, reg.Names()))
	}
	for _, err := range []error{c.Gateway.Validate(), c.Params.Validate(), c.Workload.Validate(), c.Client.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Router.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Telemetry.Enabled && (c.Telemetry.Interval <= 0 || c.Telemetry.ProbeInterval <= 0 || c.Telemetry.TTFTWindow <= 0 || c.Telemetry.ErrorHalfLife <= 0) {
		errs = append(errs, fmt.Errorf("telemetry: interval, probe interval, TTFT window and error half-life must be > 0, got %+v", c.Telemetry))
	}
	for i, f := range c.Faults {
		if err := f.validate(len(c.Backends)); err != nil {
			errs = append(errs, fmt.Errorf("fault %d (%s): %w", i+1, f.Kind, err))
		}
	}
	for _, b := range c.Backends {
		if b.MaxModelLen < 0 {
			errs = append(errs, fmt.Errorf("backend %q: max_model_len must be >= 0, got %d", b.Name, b.MaxModelLen))
		}
	}
	if len(c.Pools) > 1 && (c.Telemetry.Enabled || len(c.Faults) > 0) {
		errs = append(errs, errors.New("pools cannot be combined with telemetry or faults yet; run them separately"))
	}
	for i, p := range c.Pools {
		if p.MaxTokens < 1 {
			errs = append(errs, fmt.Errorf("pool %q: max tokens must be >= 1, got %d", p.Name, p.MaxTokens))
		}
		n := 0
		for _, b := range c.Backends {
			if b.Pool == i {
				n++
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("pool %q has no backends", p.Name))
		}
	}
	for _, b := range c.Backends {
		if b.Pool < 0 || (b.Pool > 0 && b.Pool >= len(c.Pools)) {
			errs = append(errs, fmt.Errorf("backend %q: pool index %d out of range", b.Name, b.Pool))
		}
	}
	if c.Clients < 0 || c.Clients > MaxClients {
		errs = append(errs, fmt.Errorf("clients must be 0 (open arrivals) to %d, got %d", MaxClients, c.Clients))
	}
	switch {
	case c.Clients > 0 && (c.Requests != nil || c.Class != nil):
		errs = append(errs, errors.New("clients (a closed loop of sessions), a request list and a workload class each replace the sessions; use one"))
	case c.Requests != nil && c.Class != nil:
		errs = append(errs, errors.New("a request list and a workload class each replace the sessions; use one"))
	case c.Clients > 0: // a closed loop has no rate
	case c.Requests != nil:
		errs = append(errs, c.validateRequests()...)
	case !(c.RPS > 0) || c.RPS > MaxRPS:
		errs = append(errs, fmt.Errorf("rps must be > 0 and at most %d, got %v", MaxRPS, c.RPS))
	}
	var lead time.Duration
	if c.Class != nil {
		lead = c.Class.Lead
	}
	if c.Warmup < 0 || c.Measure <= 0 || c.Cooldown < 0 || max(c.Warmup, c.Measure, c.Cooldown) > MaxSimulated ||
		lead+c.Warmup+c.Measure+c.Cooldown > MaxSimulated {
		errs = append(errs, fmt.Errorf("warmup and cooldown must be >= 0 and measure > 0, together at most %v; got %v, %v and %v",
			MaxSimulated, c.Warmup, c.Measure, c.Cooldown))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sim config: %w", err)
	}
	return nil
}

// MaxRequests bounds an open-loop request list.
const MaxRequests = 20_000_000

func (c *Config) validateRequests() []error {
	if len(c.Requests) > MaxRequests {
		return []error{fmt.Errorf("%d requests, at most %d", len(c.Requests), MaxRequests)}
	}
	var prev time.Duration
	for i, r := range c.Requests {
		if r.Arrival < prev || r.InputTokens < 1 || r.OutputTokens < 0 {
			return []error{fmt.Errorf("request %d: arrivals must not go back in time and input tokens must be >= 1 (got %+v)", i, r)}
		}
		prev = r.Arrival
		if len(r.BlockHashes) > 0 && (c.BlockSize < 1 || len(r.BlockHashes) != (r.InputTokens-1)/c.BlockSize+1) {
			return []error{fmt.Errorf("request %d: %d block hashes for %d input tokens do not fit block size %d", i, len(r.BlockHashes), r.InputTokens, c.BlockSize)}
		}
	}
	return nil
}
