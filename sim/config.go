package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// Bounds that keep a mistyped fleet file from allocating without limit.
const (
	MaxRoutersPerRegion  = 1000
	MaxWorkersPerBackend = 4096
	MaxRPS               = 100_000
	MaxSimulated         = 24 * time.Hour
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

	RPS     float64
	Seed    uint64
	Warmup  time.Duration
	Measure time.Duration
	// Cooldown, if positive, runs the fleet on for this long after the
	// measured window, and the metrics cover the turns that started in the
	// window (not those that ended in it); turns still running at the end
	// are reported as unfinished.
	Cooldown time.Duration

	// KeepRecords keeps every measured turn's record in the result.
	KeepRecords bool
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
	}
	if reg != nil && !reg.Has(c.Policy) {
		errs = append(errs, fmt.Errorf("unknown policy %q (known: %v)", c.Policy, reg.Names()))
	}
	for _, err := range []error{c.Gateway.Validate(), c.Params.Validate(), c.Workload.Validate(), c.Client.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if !(c.RPS > 0) || c.RPS > MaxRPS {
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
