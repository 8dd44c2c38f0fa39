package study

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/drive"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/fleet"
)

// LiveRunner runs sustainable-rate steps on live fleets: each step starts
// the fleet in this process (engines, gateways and routers on loopback,
// with the fleet's region latencies), drives the class's open loop over
// HTTP for the step's windows, and stops the fleet, so that no step
// inherits another's caches or queues. Steps run one at a time: use it
// with SLOMatrixOptions.Parallel 1.
type LiveRunner struct {
	Fleet    *config.Fleet
	Registry *policy.Registry
	// Log, if set, hears about every step as it ends.
	Log func(msg string)
}

var _ Runner = (*LiveRunner)(nil)

// Step implements Runner.
func (r *LiveRunner) Step(ctx context.Context, spec StepSpec) (StepFigures, error) {
	if spec.Class == nil {
		return StepFigures{}, errors.New("study: a step needs a workload class")
	}
	cfg, err := r.Fleet.SimConfig(config.Run{Policy: spec.Policy, RPS: spec.Rate, Seed: spec.Seed,
		Warmup: spec.Warmup, Measure: spec.Measure, Cooldown: spec.Cooldown, Class: spec.Class.Name}, r.Registry)
	if err != nil {
		return StepFigures{}, err
	}
	start := time.Now()
	f, err := fleet.Start(ctx, cfg, r.Registry, fleet.Options{Seed: spec.Seed})
	if err != nil {
		return StepFigures{}, fmt.Errorf("study: live fleet %s: %w", r.Fleet.Name, err)
	}
	defer f.Stop()
	res, err := drive.Run(ctx, driveConfig(f, &cfg))
	if err != nil {
		return StepFigures{}, fmt.Errorf("study: driving %s at %.2f req/s: %w", spec.Class.Name, spec.Rate, err)
	}
	fig := Figures(spec.Rate, res.Records, res.Unfinished)
	fig.WallS = time.Since(start).Seconds()
	if r.Log != nil {
		r.Log(fmt.Sprintf("%s %s seed %d at %.2f req/s: %d samples, success %.3f, TTFT p95 %.3f s",
			spec.Class.Name, spec.Policy, spec.Seed, spec.Rate, fig.Samples(), fig.Success, fig.TTFTP95S))
	}
	return fig, nil
}
