package routerd

import (
	"net/http"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// This file is the operator's read view of the router: the JSON of GET
// /v1/stargate/backends (AdminBackends), which the console (console.go) and
// `stargate admin backends` read too, and the one check that guards every
// admin read (guardInfo, security.go). It is built only from the Backends accessor, so
// that it does not depend on how the router keeps its backends.

// AdminBackends is the body of GET /v1/stargate/backends. Every field has a
// name and a unit; docs/admin-api.md documents each.
type AdminBackends struct {
	Router string `json:"router"`
	Policy string `json:"policy"`
	// Time is when the router took this view (RFC 3339, UTC).
	Time time.Time `json:"time"`
	// PressureWeights are the score's weight of each pressure signal, by
	// name (telemetry.DefaultWeights).
	PressureWeights PressureSet    `json:"pressure_weights"`
	Backends        []AdminBackend `json:"backends"`
}

// PressureSet is one number per pressure signal, by the signal's name, in
// telemetry.Signal order when marshalled.
type PressureSet struct {
	Queue   float64 `json:"queue"`
	TTFT    float64 `json:"ttft"`
	Errors  float64 `json:"errors"`
	KV      float64 `json:"kv"`
	GPU     float64 `json:"gpu"`
	Mem     float64 `json:"mem"`
	SM      float64 `json:"sm"`
	DRAM    float64 `json:"dram"`
	RTT     float64 `json:"rtt"`
	Jitter  float64 `json:"jitter"`
	Thermal float64 `json:"thermal"`
}

// pressureSet names the elements of an array in telemetry.Signal order.
func pressureSet(p [telemetry.NumSignals]float64) PressureSet {
	return PressureSet{Queue: p[telemetry.SigQueue], TTFT: p[telemetry.SigTTFT], Errors: p[telemetry.SigErrors], KV: p[telemetry.SigKV],
		GPU: p[telemetry.SigGPU], Mem: p[telemetry.SigMem], SM: p[telemetry.SigSM], DRAM: p[telemetry.SigDRAM],
		RTT: p[telemetry.SigRTT], Jitter: p[telemetry.SigJitter], Thermal: p[telemetry.SigThermal]}
}

// Reasons a backend takes no new requests (AdminBackend.Ineligible).
const (
	WhyDrained        = "drained"
	WhyFailed         = "failed"
	WhyLoading        = "loading"
	WhyTerminated     = "terminated"
	WhyRefused        = "connection_refused"
	WhyStaleStats     = "stale_stats"
	WhyAllQuarantined = "all_workers_quarantined"
	WhyNoCapacity     = "no_free_capacity"
)

// AdminBackend is one backend as GET /v1/stargate/backends shows it.
type AdminBackend struct {
	// ID is the backend's stable identity: its name, which the router core
	// keys every backend by.
	ID     string   `json:"id"`
	Name   string   `json:"name"`
	URL    string   `json:"url"`
	Region string   `json:"region,omitempty"`
	Models []string `json:"models"`
	Static bool     `json:"static"`

	// State is the lifecycle state (loading, ready, draining, terminated,
	// failed), entered StateAgeSeconds ago.
	State           string  `json:"state"`
	StateAgeSeconds float64 `json:"state_age_seconds"`
	Drained         bool    `json:"drained"`
	// Eligible says whether new requests may go to the backend; Ineligible
	// lists why not (the Why* reasons), empty when eligible.
	Eligible   bool     `json:"eligible"`
	Ineligible []string `json:"ineligible_reasons"`

	// Weight is the policy's weight (integer, policy units; equal weights
	// for policies without their own) and WeightShareRatio its share of all
	// backends' weight, 0-1. Rank and Score are the pressure policy's.
	Weight           int     `json:"weight"`
	WeightShareRatio float64 `json:"weight_share_ratio"`
	Rank             int     `json:"rank"`
	ScoreRatio       float64 `json:"score_ratio"`
	// TelemetryFallback says the score runs without hardware signals;
	// HardwareError says why they are missing.
	TelemetryFallback bool   `json:"telemetry_fallback"`
	HardwareError     string `json:"hardware_error,omitempty"`

	// Admission at the backend's gateway, in requests.
	CapacityRequests int `json:"capacity_requests"`
	ActiveRequests   int `json:"active_requests"`
	WaitingRequests  int `json:"waiting_requests"`
	// This router's requests for the backend: dispatched but not yet in
	// its stats, and waiting here for it.
	PendingRequests      int `json:"router_pending_requests"`
	RouterQueuedRequests int `json:"router_queued_requests"`
	Workers              int `json:"workers"`
	QuarantinedWorkers   int `json:"quarantined_workers"`

	// DispatchesTotal counts this router's requests sent to the backend
	// since its gateway started (its stats' count plus the pending ones).
	DispatchesTotal uint64 `json:"dispatches_total"`
	// The gateway's own counts since it started, from every router.
	CompletedTotal uint64 `json:"completed_total"`
	RejectedTotal  uint64 `json:"rejected_total"`
	CancelledTotal uint64 `json:"cancelled_total"`

	InputTokensPerSecond    float64 `json:"input_tokens_per_second"`
	MaxInputTokensPerSecond float64 `json:"max_input_tokens_per_second"`

	// TTFTP95Seconds is the reported 95th percentile time to first token;
	// KVFillRatio the engine's KV-cache fill, 0-1.
	TTFTP95Seconds float64 `json:"ttft_p95_seconds"`
	KVFillRatio    float64 `json:"kv_fill_ratio"`
	// ErrorRatio is this router's recent error rate for the backend, and
	// ReportedErrorRatio the gateway's, both 0-1.
	ErrorRatio         float64 `json:"error_ratio"`
	ReportedErrorRatio float64 `json:"reported_error_ratio"`

	// Context limits in tokens: what the backend advertises, what its
	// context-length refusals taught this router (0: nothing yet), and the
	// limit placement uses.
	AdvertisedContextTokens int `json:"advertised_context_tokens"`
	LearnedContextTokens    int `json:"learned_context_tokens"`
	ContextTokens           int `json:"context_tokens"`

	// The probed path from this router: smoothed round trip and jitter.
	RTTSeconds    float64 `json:"rtt_seconds"`
	JitterSeconds float64 `json:"jitter_seconds"`

	// LastStatsAgeSeconds is how long ago its last stats message or
	// heartbeat arrived; StatsIntervalSeconds the longest gap it promised.
	LastStatsAgeSeconds  float64 `json:"last_stats_age_seconds"`
	StatsIntervalSeconds float64 `json:"stats_interval_seconds"`
	RefusedConnection    bool    `json:"connection_refused"`

	// Pressures are the eleven normalised signals, 0-1 each, by name;
	// PressureSource says where they come from: "policy" (the pressure
	// policy's own) or "signals" (normalised here, with the default levels,
	// for a policy that does not score pressures).
	Pressures      PressureSet `json:"pressures"`
	PressureSource string      `json:"pressure_source"`

	// Engine is what the gateway last scraped from the engine; Hardware
	// the GPU signals (nil without a hardware source).
	Engine   AdminEngine    `json:"engine"`
	Hardware *AdminHardware `json:"hardware,omitempty"`
}

// AdminEngine is the engine's own load, as its gateway last scraped it.
type AdminEngine struct {
	RunningRequests   float64 `json:"running_requests"`
	WaitingRequests   float64 `json:"waiting_requests"`
	KVCacheUsageRatio float64 `json:"kv_cache_usage_ratio"`
	ScrapedAgoSeconds float64 `json:"scraped_ago_seconds"`
	Error             string  `json:"error,omitempty"`
}

// AdminHardware are a backend's GPU signals (the hottest, slowest GPU).
type AdminHardware struct {
	GPUUtilRatio     float64 `json:"gpu_util_ratio"`
	MemUtilRatio     float64 `json:"mem_util_ratio"`
	SMOccupancyRatio float64 `json:"sm_occupancy_ratio"`
	DRAMActiveRatio  float64 `json:"dram_active_ratio"`
	TemperatureC     float64 `json:"temperature_celsius"`
	SMClockMHz       float64 `json:"sm_clock_mhz"`
	MaxSMClockMHz    float64 `json:"max_sm_clock_mhz"`
}

// displayScorer normalises signals for display where the policy does not.
var displayScorer = telemetry.NewScorer(telemetry.DefaultWeights(), telemetry.DefaultNorm())

// Admin returns the router's backends as GET /v1/stargate/backends shows
// them, built from Backends.
func (s *Server) Admin() AdminBackends {
	infos := s.Backends()
	s.mu.Lock()
	scored := false
	if s.core != nil {
		_, scored = s.core.Policy().(policy.WeightKeeper) // the pressure policy
	}
	s.mu.Unlock()
	out := adminView(s.cfg.ID, s.cfg.Policy, time.Now().UTC(), s.now(), s.cfg.Liveness.HeartbeatTTL, scored, infos)
	out.PressureWeights = pressureSet(s.cfg.Params.PressureParams().Weights) // the weights this router scores with
	return out
}

// adminView maps Backends' entries to the admin JSON; now is the router's
// clock (as BackendStatus.Since counts it), ttl its heartbeat TTL and scored
// whether the policy scores pressures itself.
func adminView(id, pol string, at time.Time, now, ttl time.Duration, scored bool, infos []BackendInfo) AdminBackends {
	out := AdminBackends{Router: id, Policy: pol, Time: at, PressureWeights: pressureSet(telemetry.DefaultWeights()),
		Backends: make([]AdminBackend, 0, len(infos))}
	total := 0
	for i := range infos {
		total += max(infos[i].Weight, 0)
	}
	for i := range infos {
		b := &infos[i]
		st, sig := &b.Stats, b.Stats.Signals
		a := AdminBackend{ID: b.Name, Name: b.Name, URL: b.URL, Region: b.Region, Models: st.Models, Static: b.Static,
			State: b.State, StateAgeSeconds: max(now-b.Status.Since, 0).Seconds(), Drained: b.Status.Drained,
			Eligible: b.Eligible, Weight: b.Weight, Rank: b.Policy.Rank, ScoreRatio: b.Policy.Score,
			TelemetryFallback: b.Fallback, HardwareError: st.HardwareError,
			CapacityRequests: st.Capacity, ActiveRequests: st.Active, WaitingRequests: st.Waiting,
			PendingRequests: b.Pending, RouterQueuedRequests: b.Queued, Workers: st.Workers, QuarantinedWorkers: st.Quarantined,
			DispatchesTotal: st.Received + uint64(max(b.Pending, 0)), CompletedTotal: st.Completed, RejectedTotal: st.Rejected, CancelledTotal: st.Cancelled,
			InputTokensPerSecond: st.InputTPS, MaxInputTokensPerSecond: st.MaxInputTPS,
			ErrorRatio:              b.Status.ErrorRate,
			AdvertisedContextTokens: st.MaxModelLen, LearnedContextTokens: b.Status.LearnedLimit, ContextTokens: b.Status.MaxModelLen,
			RTTSeconds: b.Status.RTT.Seconds(), JitterSeconds: b.Status.Jitter.Seconds(),
			LastStatsAgeSeconds: b.AgeS, StatsIntervalSeconds: st.Interval.Seconds(), RefusedConnection: b.Refused,
			Engine: AdminEngine{RunningRequests: st.Engine.Running, WaitingRequests: st.Engine.Waiting,
				KVCacheUsageRatio: st.Engine.KVUsage, ScrapedAgoSeconds: st.Engine.ScrapedAgo, Error: st.Engine.Error}}
		if a.Models == nil {
			a.Models = []string{}
		}
		if total > 0 {
			a.WeightShareRatio = float64(max(b.Weight, 0)) / float64(total)
		}
		a.KVFillRatio = st.Engine.KVUsage
		if sig != nil {
			a.TTFTP95Seconds, a.KVFillRatio, a.ReportedErrorRatio = sig.TTFTP95.Seconds(), sig.KVFill, sig.ErrorRate
			if sig.Hardware {
				a.Hardware = &AdminHardware{GPUUtilRatio: sig.GPUUtil, MemUtilRatio: sig.MemUtil, SMOccupancyRatio: sig.SMOccupancy,
					DRAMActiveRatio: sig.DRAMActive, TemperatureC: sig.TempC, SMClockMHz: sig.SMClockMHz, MaxSMClockMHz: sig.MaxSMClockMHz}
			}
		}
		a.Pressures, a.PressureSource = pressuresOf(b, scored)
		a.Ineligible = ineligible(b, ttl)
		out.Backends = append(out.Backends, a)
	}
	return out
}

// pressuresOf returns the policy's pressures if it scores them, else the
// backend's signals normalised with the default levels.
func pressuresOf(b *BackendInfo, scored bool) (PressureSet, string) {
	if scored {
		return pressureSet(b.Policy.Pressures), "policy"
	}
	var p telemetry.Pressures
	var avail [telemetry.NumSignals]bool
	path := telemetry.Path{Known: b.Status.RTT > 0, RTT: b.Status.RTT, Jitter: b.Status.Jitter}
	displayScorer.Normalise(&p, &avail, b.Stats.Signals,
		telemetry.Load{Capacity: b.Stats.Capacity, Waiting: b.Stats.Waiting + b.Queued}, &path)
	return pressureSet(p), "signals"
}

// ineligible lists why a backend takes no new requests (or may soon not).
func ineligible(b *BackendInfo, ttl time.Duration) []string {
	out := []string{}
	switch b.State {
	case "draining":
		out = append(out, WhyDrained)
	case "failed":
		out = append(out, WhyFailed)
	case "loading":
		out = append(out, WhyLoading)
	case "terminated":
		out = append(out, WhyTerminated)
	}
	if b.Status.Drained && b.State != "draining" {
		out = append(out, WhyDrained)
	}
	if b.Refused {
		out = append(out, WhyRefused)
	}
	if !b.Static && ttl > 0 && b.AgeS > ttl.Seconds() {
		out = append(out, WhyStaleStats)
	}
	if st := &b.Stats; st.Workers > 0 && st.Quarantined >= st.Workers {
		out = append(out, WhyAllQuarantined)
	}
	if b.Eligible && len(out) == 0 {
		return out
	}
	if len(out) == 0 {
		out = append(out, WhyNoCapacity)
	}
	return out
}

func (s *Server) listBackends(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Admin())
}
