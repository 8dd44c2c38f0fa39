package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// View is a router's picture of one backend at pick time.
//
// Its field order follows the access pattern at thousands of backends,
// where another backend's view is rarely in cache: what a stats message
// writes (Capacity, Active, Waiting, Pending, MaxInputTPS, Signals, State,
// Eligible) and what a pick reads first (those and Key) are its first 64
// bytes (TestViewLayout), so a message touches one or two of the view's
// cache lines, where those fields spread over 96 bytes touched two or
// three. (Padding the view to 192 bytes, so that the 64 bytes are always
// one line, measured no better: the views then take a third more memory,
// and scans over them read more.)
type View struct {
	// Capacity is the backend's maximum engine concurrency.
	Capacity int
	// Active and Waiting come from the backend's latest stats.
	Active, Waiting int
	// Pending counts this router's dispatches the latest stats do not include.
	Pending int
	// MaxInputTPS is the backend's measured maximum input tokens/s (0 if none yet).
	MaxInputTPS float64
	// Signals is the backend's latest telemetry report, nil if none.
	Signals *telemetry.Signals
	// Key is a stable hash of the backend's name, used by hashing policies.
	Key uint64
	// Eligible is false for a backend that must not take new requests.
	Eligible bool
	// State is the backend's lifecycle state (zero: not tracked, Ready);
	// filled, like the fields below, by a router that tracks telemetry
	// (policies that do not use them ignore them).
	State telemetry.State

	// Index is the backend's position in the views slice.
	Index int
	// Queued counts requests waiting at this router for this backend.
	Queued int
	// CacheTokens is how many prompt tokens the backend's engines can keep
	// cached in all (GPU KV and host tier, every GPU); zero: unknown. The
	// prefix policy sizes its index by it.
	CacheTokens int
	// MaxModelLen is the longest request (prompt plus output tokens) the
	// backend is known to accept, from its report or learned from its
	// context-length errors; zero means unknown.
	MaxModelLen int
	// ErrorRate is the share of this router's recent requests to the
	// backend that failed (overload refusals and context-length errors
	// excluded).
	ErrorRate float64
	// Overload is the share of this router's recent answers from the
	// backend that were overload refusals (503 or 429 before the first
	// byte), decayed as ErrorRate is: a signal the router has the moment
	// the answer arrives, before any report shows the backend's queue.
	Overload float64
	// Path is this router's estimate of the network path to the backend.
	Path telemetry.Path
}

// Free reports whether the backend has a free engine slot.
func (v *View) Free() bool { return v.Active+v.Pending < v.Capacity }

// Outstanding is the number of requests the backend holds or will hold.
func (v *View) Outstanding() int { return v.Active + v.Pending + v.Waiting }

// Utilization is Outstanding over Capacity.
func (v *View) Utilization() float64 {
	return float64(v.Outstanding()) / float64(max(v.Capacity, 1))
}

// Request is what a policy knows about the request it places.
type Request struct {
	// Session is the hash of the request's session key.
	Session uint64
	// Arrived is when the request reached the router.
	Arrived time.Duration
	// QueuedAt is the backend the request is waiting for at this router, or -1.
	QueuedAt int
	// Exclude lists backends that already refused this request.
	Exclude []int
	// Arrival marks the request's first pick at this router: the router
	// core sets it on Route's pick of a new request only, not on the later
	// picks of a request that waits nor on a retry after a refusal
	// (router.Ask.Again). The burst detector (BurstParams) counts arrivals
	// by it.
	Arrival bool
	// Tokens is the request's prompt plus requested output tokens; zero
	// means unknown.
	Tokens int
	// Blocks are the prompt's chained block hashes, each naming its whole
	// prefix (see package prefix), of BlockTokens tokens each; nil when
	// unknown. Only the prefix policy reads them.
	Blocks      []uint64
	BlockTokens int
}

func (r *Request) excluded(b int) bool { return slices.Contains(r.Exclude, b) }

// Kind is what a Decision asks the router to do.
type Kind uint8

// Decision kinds.
const (
	Dispatch Kind = iota + 1
	Wait
	Reject
)

func (k Kind) String() string {
	switch k {
	case Dispatch:
		return "dispatch"
	case Wait:
		return "wait"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Decision is a policy's answer.
type Decision struct {
	Kind Kind
	// Backend is where to dispatch, or which backend's queue to wait in.
	Backend int
	// Until is when to ask again at the latest (Wait only).
	Until time.Duration
	// Reason says why a request was rejected.
	Reason string
}

// Policy places requests. Implementations are not safe for concurrent use
// unless they say so; a router owns its own instance.
type Policy interface {
	Name() string
	Pick(now time.Duration, r *Request, views []View) Decision
}

// ErrUnknownPolicy is returned by Registry.New for a name it does not know.
var ErrUnknownPolicy = errors.New("policy: unknown policy")

// Params are the tunables of the built-in policies.
type Params struct {
	AffinityWait time.Duration `yaml:"affinity_wait" json:"affinity_wait"`
	BandStep     time.Duration `yaml:"band_step" json:"band_step"`
	MaxWait      time.Duration `yaml:"max_wait" json:"max_wait"`
	MaxQueued    int           `yaml:"max_queued" json:"max_queued"`
	VirtualNodes int           `yaml:"virtual_nodes" json:"virtual_nodes"`
	// Weight is pulsar-waw's weight source: "max-input-tps" or "capacity".
	Weight string `yaml:"weight" json:"weight"`
	// Prefix are the prefix policy's tunables (see PrefixParams).
	Prefix PrefixParams `yaml:"prefix" json:"prefix"`
	// Pressure, if set, is the pressure policy's scoring (from a fleet
	// file's pressure section or a router's --pressure file); nil means
	// DefaultPressureParams.
	Pressure *PressureParams `yaml:"-" json:"pressure,omitempty"`
}

// PressureParams returns the pressure policy's scoring: p.Pressure, or the
// defaults.
func (p Params) PressureParams() PressureParams {
	if p.Pressure != nil {
		return *p.Pressure
	}
	return DefaultPressureParams()
}

// DefaultParams are DESIGN's values.
func DefaultParams() Params {
	return Params{AffinityWait: 300 * time.Millisecond, BandStep: 300 * time.Millisecond,
		MaxWait: 4 * time.Second, MaxQueued: 4, VirtualNodes: 150, Weight: WeightCapacity,
		Prefix: DefaultPrefixParams()}
}

// Weight sources for pulsar-waw.
const (
	WeightMaxInputTPS = "max-input-tps"
	WeightCapacity    = "capacity"
)

// Validate reports what is wrong with the parameters.
func (p Params) Validate() error {
	var errs []error
	if p.AffinityWait < 0 || p.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("affinity_wait and max_wait must be >= 0, got %v and %v", p.AffinityWait, p.MaxWait))
	}
	if p.BandStep <= 0 {
		errs = append(errs, fmt.Errorf("band_step must be > 0, got %v", p.BandStep))
	}
	if p.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("max_queued must be >= 0, got %d", p.MaxQueued))
	}
	if p.VirtualNodes < 1 {
		errs = append(errs, fmt.Errorf("virtual_nodes must be >= 1, got %d", p.VirtualNodes))
	}
	if p.Weight != WeightMaxInputTPS && p.Weight != WeightCapacity {
		errs = append(errs, fmt.Errorf("weight must be %q or %q, got %q", WeightMaxInputTPS, WeightCapacity, p.Weight))
	}
	errs = append(errs, p.Prefix.validate()...)
	if p.Pressure != nil {
		errs = append(errs, p.Pressure.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("policy params: %w", err)
	}
	return nil
}

// Backend is what a policy learns about a backend when it is built.
type Backend struct {
	Name string
	Key  uint64
}

// Factory builds a policy for a router over the given backends.
type Factory func(p Params, backends []Backend, rng *rand.Rand) (Policy, error)

// Registry maps policy names to factories. Build one with NewRegistry and pass
// it down; it is safe for concurrent reads once built.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns a registry holding the built-in policies.
func NewRegistry() *Registry {
	r := &Registry{factories: make(map[string]Factory)}
	r.Register("round-robin", func(Params, []Backend, *rand.Rand) (Policy, error) { return &RoundRobin{}, nil })
	r.Register("random", func(_ Params, _ []Backend, rng *rand.Rand) (Policy, error) { return &Random{rng: rng}, nil })
	r.Register("least-request", func(Params, []Backend, *rand.Rand) (Policy, error) { return &LeastRequest{}, nil })
	r.Register("power-of-two", func(_ Params, _ []Backend, rng *rand.Rand) (Policy, error) { return &PowerOfTwo{rng: rng}, nil })
	r.Register("waw", func(p Params, b []Backend, _ *rand.Rand) (Policy, error) { return NewWaW(p, b), nil })
	r.Register("pulsar-waw", func(p Params, b []Backend, _ *rand.Rand) (Policy, error) { return NewPulsarWaW(p, b), nil })
	r.Register("pulsar-waw-tps", func(p Params, b []Backend, _ *rand.Rand) (Policy, error) {
		p.Weight = WeightMaxInputTPS
		return &PulsarWaW{p: p, name: "pulsar-waw-tps"}, nil
	})
	r.Register(PrefixName, func(p Params, b []Backend, _ *rand.Rand) (Policy, error) { return NewPrefix(p, b) })
	r.Register("pressure", func(p Params, b []Backend, _ *rand.Rand) (Policy, error) {
		return NewPressure(p, p.PressureParams(), b)
	})
	return r
}

// Register adds or replaces a policy.
func (r *Registry) Register(name string, f Factory) { r.factories[name] = f }

// Names lists the registered policies, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Has reports whether a policy is registered.
func (r *Registry) Has(name string) bool { _, ok := r.factories[name]; return ok }

// New builds the named policy.
func (r *Registry) New(name string, p Params, backends []Backend, rng *rand.Rand) (Policy, error) {
	f, ok := r.factories[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownPolicy, name, strings.Join(r.Names(), ", "))
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(backends) == 0 {
		return nil, fmt.Errorf("policy %s: no backends", name)
	}
	return f(p, backends, rng)
}

// eligible reports whether views[i] may take the request; excluded backends
// count only when strict is false and nothing else is eligible.
func eligible(r *Request, v *View, strict bool) bool {
	return v.Eligible && (!strict || !r.excluded(v.Index))
}

// anyEligible reports whether some backend is eligible and not excluded.
func anyEligible(r *Request, views []View) bool {
	for i := range views {
		if eligible(r, &views[i], true) {
			return true
		}
	}
	return false
}

func reject(reason string) Decision { return Decision{Kind: Reject, Backend: -1, Reason: reason} }

func dispatch(b int) Decision { return Decision{Kind: Dispatch, Backend: b} }

// WeightKeeper is implemented by policies whose weights move with what they
// see (pressure). LastWeights appends the weights as their last pick or
// refresh left them, without recomputing them: watching them changes
// nothing, where WeightReporter.Weights steps their hysteresis.
type WeightKeeper interface {
	LastWeights(out []BackendWeight) []BackendWeight
}

// WeightsOf returns p's per-backend weights for views: its own if it is a
// WeightReporter, else weight 1 for every eligible backend and 0 for the rest
// (an equal share: what a policy without weights amounts to).
func WeightsOf(p Policy, views []View) []BackendWeight {
	if wr, ok := p.(WeightReporter); ok {
		return wr.Weights(views, nil)
	}
	out := make([]BackendWeight, len(views))
	for i := range views {
		if views[i].Eligible {
			out[i].Weight = 1
		}
	}
	return out
}

// CapabilityAware is implemented by policies that want the router to hide,
// for each request, the backends whose known max_model_len it exceeds (while
// another eligible backend fits it).
type CapabilityAware interface {
	CapabilityAware() bool
}

// Membership is implemented by policies that keep state per backend or build
// structures over the backend list (waw's ring, pressure's weights): a
// router tells them when its backends change instead of building the policy
// again, so the backends that stay keep their state. A policy with neither
// need not implement it.
type Membership interface {
	// SetBackends says the backends are now backends, in the views' new
	// order; from[i] is the position backend i had before, or -1 for one
	// that joined.
	SetBackends(backends []Backend, from []int)
}
