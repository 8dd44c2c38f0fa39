package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// PressureSpec is a fleet file's pressure section: the pressure policy's
// scoring. Every part is optional; what is left out keeps its default
// (policy.DefaultPressureParams).
//
//	pressure:
//	  weights:            # by signal name: queue ttft errors kv gpu mem sm dram rtt jitter thermal
//	    queue: 0.5
//	    gpu: 0
//	  norm:               # telemetry.Norm: the levels at which a signal is full pressure
//	    ttft_full: 5s
//	    queue_full: 0.5
//	  projection:         # the level's range and hysteresis
//	    max: 100
//	    min: 1
//	    hysteresis: 10
//	  sticky:             # policy.StickyParams: sessions keep the backend holding their cache
//	    sessions: 65536   # table bound per router; 0 turns stickiness off
//	    ttl: 60s
//	    move_score: 1     # 1: sessions leave only a failing or unusable backend
//	    reprefill_tps: 0  # tokens/s of a re-prefill elsewhere; 0: no cost comparison
//	  burst:              # policy.BurstParams: levels follow the router's own counts at once in a burst
//	    window: 100ms     # arrivals counted over this span; 0 turns the detector off
//	    baseline: 30s     # against the rate of this span
//	    false_alarms: 1   # firings an hour per router for Poisson arrivals at that rate
//	    hold: 1s          # on this long after a firing
//	    hysteresis: 1     # least level move to more pressure while on
type PressureSpec struct {
	Weights    map[string]float64  `yaml:"weights"`
	Norm       telemetry.Norm      `yaml:"norm"`
	Projection telemetry.Projector `yaml:"projection"`
	Sticky     policy.StickyParams `yaml:"sticky"`
	Burst      policy.BurstParams  `yaml:"burst"`
}

// defaultPressureSpec is the section as decoding starts from it.
func defaultPressureSpec() *PressureSpec {
	d := policy.DefaultPressureParams()
	return &PressureSpec{Norm: d.Norm, Projection: d.Projector, Sticky: d.Sticky, Burst: d.Burst}
}

// Params turns the section into the policy's parameters, checking every
// weight's name and value and the levels and projection.
func (ps *PressureSpec) Params() (policy.PressureParams, error) {
	pp := policy.DefaultPressureParams()
	pp.Norm, pp.Projector, pp.Sticky, pp.Burst = ps.Norm, ps.Projection, ps.Sticky, ps.Burst
	var errs []error
	names := make([]string, 0, len(ps.Weights))
	for name := range ps.Weights {
		names = append(names, name)
	}
	slices.Sort(names) // errors in a stable order
	for _, name := range names {
		s, ok := signalByName(name)
		if !ok {
			errs = append(errs, fmt.Errorf("weights: unknown signal %q (signals: %s)", name, signalNames()))
			continue
		}
		pp.Weights[s] = ps.Weights[name]
	}
	errs = append(errs, pp.Validate())
	if err := errors.Join(errs...); err != nil {
		return policy.PressureParams{}, fmt.Errorf("pressure section: %w", err)
	}
	return pp, nil
}

// resolvePressure sets the policy's pressure parameters from the decoded
// section (left nil when the section changes nothing).
func (f *Fleet) resolvePressure() error {
	if f.Pressure == nil {
		return nil
	}
	pp, err := f.Pressure.Params()
	if err != nil {
		return err
	}
	if pp != policy.DefaultPressureParams() {
		f.Policy.Pressure = &pp
	}
	return nil
}

// ParsePressure decodes a file holding only a pressure section's contents
// (weights, norm, projection, sticky, burst), strictly, as a router's --pressure flag
// reads it. what names the input in messages.
func ParsePressure(what string, data []byte) (policy.PressureParams, error) {
	ps := defaultPressureSpec()
	if err := DecodeStrict(what, data, ps); err != nil {
		return policy.PressureParams{}, err
	}
	pp, err := ps.Params()
	if err != nil {
		return policy.PressureParams{}, fmt.Errorf("%s: %w", what, err)
	}
	return pp, nil
}

// LoadPressure reads a pressure file (see ParsePressure).
func LoadPressure(path string) (policy.PressureParams, error) {
	data, err := readLimited(path)
	if err != nil {
		return policy.PressureParams{}, fmt.Errorf("reading pressure file: %w", err)
	}
	return ParsePressure("pressure file "+path, data)
}

func signalByName(name string) (telemetry.Signal, bool) {
	for s := range telemetry.NumSignals {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

func signalNames() string {
	names := make([]string, 0, telemetry.NumSignals)
	for s := range telemetry.NumSignals {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}
