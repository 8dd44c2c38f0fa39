package engined

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/telemetry"
)

// Faults are what an operator injects into a mock engine, never a client:
// through flags at start or POST /admin/faults signed with the engine's HMAC
// key (package auth). The zero value injects nothing.
type Faults struct {
	// ErrorRate fails this share of requests with a 500 before any token.
	ErrorRate float64 `json:"error_rate"`
	// Hang accepts requests and never answers them.
	Hang bool `json:"hang"`
	// MaxModelLen, when > 0, lowers the context limit the engine enforces
	// (and only enforces: /v1/models still advertises the configured one,
	// as a misconfigured backend would), a capability mismatch.
	MaxModelLen int `json:"max_model_len"`
	// Slowdown multiplies every step's cost (a thermal throttle), >= 1;
	// HeatC is the temperature the exporter adds. Both ramp in over Ramp.
	Slowdown float64       `json:"slowdown"`
	HeatC    float64       `json:"heat_c"`
	Ramp     time.Duration `json:"ramp_ns"`
	// MinClock, when > 0, shapes the thermal fault as the simulator's
	// (sim.FaultThermal): the heat rises over Ramp; from half way through
	// it the clock falls linearly to MinClock of nominal at its end, and
	// every step costs 1/clock. Slowdown is then ignored.
	MinClock float64 `json:"min_clock"`
	// ExporterDead makes the mock DCGM exporter answer 503.
	ExporterDead bool `json:"exporter_dead"`
}

// Validate reports what is wrong with the faults.
func (f Faults) Validate() error {
	var errs []error
	if !(f.ErrorRate >= 0 && f.ErrorRate <= 1) {
		errs = append(errs, fmt.Errorf("error_rate must be in [0, 1], got %v", f.ErrorRate))
	}
	if f.MaxModelLen < 0 {
		errs = append(errs, fmt.Errorf("max_model_len must be >= 0, got %d", f.MaxModelLen))
	}
	if f.Slowdown != 0 && !(f.Slowdown >= 1 && f.Slowdown <= 100) {
		errs = append(errs, fmt.Errorf("slowdown must be 0 (none) or in [1, 100], got %v", f.Slowdown))
	}
	if !(f.MinClock >= 0 && f.MinClock <= 1) {
		errs = append(errs, fmt.Errorf("min_clock must be 0 (none) or in (0, 1], got %v", f.MinClock))
	}
	if f.HeatC < 0 || f.HeatC > 100 || f.Ramp < 0 {
		errs = append(errs, fmt.Errorf("heat_c must be in [0, 100] and ramp >= 0, got %v and %v", f.HeatC, f.Ramp))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine faults: %w", err)
	}
	return nil
}

// faultState is the faults in force and when they began. Guarded by Server.mu.
type faultState struct {
	Faults
	since time.Duration
	rng   *rand.Rand
}

// thermal is the fault's slowdown and heat at now, ramping linearly.
func (f *faultState) thermal(now time.Duration) (slowdown, heat float64) {
	if f.Slowdown < 1 && f.MinClock == 0 {
		return 1, 0
	}
	share := 1.0
	if f.Ramp > 0 {
		share = min(max(float64(now-f.since)/float64(f.Ramp), 0), 1)
	}
	if f.MinClock > 0 {
		clock := 1.0
		if share > 0.5 {
			clock = 1 - (1-f.MinClock)*(share-0.5)/0.5
		}
		return 1 / clock, f.HeatC * share
	}
	return 1 + (f.Slowdown-1)*share, f.HeatC * share
}

// SetFaults replaces the faults in force.
func (s *Server) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Faults, s.faults.since = f, s.now()
	s.applyThermal(s.now())
	signal(s.poke)
	return nil
}

// applyThermal sets every worker's step cost from the thermal fault. Called
// with mu held.
func (s *Server) applyThermal(now time.Duration) {
	slow, _ := s.faults.thermal(now)
	for w := range s.cl.Len() {
		_ = s.cl.Worker(w).SetSlowdown(now, slow)
	}
}

func (s *Server) adminFaults(w http.ResponseWriter, r *http.Request) {
	if s.admin == nil {
		openai.WriteError(w, http.StatusNotFound, "NotFoundError", "this engine has no HMAC key; start it with --hmac-key-file to use the admin API")
		return
	}
	body, msg, err := s.admin.Verify(r, 1<<12, auth.RoleOperator)
	auth.Audit(s.cfg.Logger.With("engine", s.cfg.ID), r, msg, err)
	if err != nil {
		openai.WriteError(w, http.StatusUnauthorized, "AuthenticationError", err.Error())
		return
	}
	var f Faults
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "faults body: "+err.Error())
		return
	}
	if err := s.SetFaults(f); err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	openai.WriteJSON(w, http.StatusOK, f)
}

// dcgm serves the mock DCGM exporter: each worker's state since the last
// scrape, mapped by telemetry.MockDCGM.
func (s *Server) dcgm(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	if s.faults.ExporterDead {
		s.mu.Unlock()
		http.Error(w, "exporter is down (injected fault)", http.StatusServiceUnavailable)
		return
	}
	now := s.now()
	s.advance(now)
	span := now - s.lastDCGM
	_, heat := s.faults.thermal(now)
	slow, _ := s.faults.thermal(now)
	gpus := make([]telemetry.GPUValues, s.cl.Len())
	for i := range gpus {
		wk := s.cl.Worker(i)
		wk.Sync(now)
		busy := wk.Totals().BusyTime
		frac := 0.0
		if span > 0 {
			frac = min(float64(busy-s.lastBusy[i])/float64(span), 1)
		}
		s.lastBusy[i] = busy
		gpus[i] = telemetry.MockDCGM(i, telemetry.GPUState{Busy: frac, Batch: wk.Running(), MaxSeqs: wk.Profile().MaxSeqs,
			KVUsed: wk.KVUsed() + wk.CacheTokens(), KVTokens: wk.Profile().KVTokens, ThermalC: heat, ClockFactor: 1 / slow})
	}
	s.lastDCGM = now
	s.mu.Unlock()
	host, _ := os.Hostname()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_ = telemetry.WriteDCGM(w, host, gpus)
}

// faultsFor draws the faults a request meets: the context limit enforced,
// whether it fails, whether it hangs.
func (s *Server) faultsFor() (limit int, fail, hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit = s.cfg.MaxModelLen
	if f := s.faults.MaxModelLen; f > 0 && f < limit {
		limit = f
	}
	fail = s.faults.ErrorRate > 0 && s.faults.rng.Float64() < s.faults.ErrorRate
	return limit, fail, s.faults.Hang
}
