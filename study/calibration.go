package study

import (
	"context"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/workload"
)

// The calibration the Solyx AI Grid paper runs before its SLO matrix: every
// routing mode serves baseline_mixed at 10 req/s for 60 s, from a cold
// start (no warm-up: it shows which policy is good from its first pass).
const (
	CalibrationClass = "baseline_mixed"
	CalibrationRate  = 10.0
)

// CalibrationWindows are the calibration's windows: no warm-up, 60 s
// measured, and the matrix steps' 15 s cool-down, whose turns are
// unfinished, not failed.
func CalibrationWindows() Windows {
	return Windows{Warmup: 0, Measure: 60 * time.Second, Cooldown: DefaultWindows().Cooldown}
}

// Calibration is one policy's calibration run.
type Calibration struct {
	Policy  string      `json:"policy"`
	Figures StepFigures `json:"figures"`
}

// Calibrate runs the calibration for each policy, seed 1, on runner.
func Calibrate(ctx context.Context, runner Runner, policies []string) ([]Calibration, error) {
	class, err := workload.ClassByName(CalibrationClass)
	if err != nil {
		return nil, fmt.Errorf("study: calibration: %w", err)
	}
	out := make([]Calibration, 0, len(policies))
	for _, pol := range policies {
		f, err := runner.Step(ctx, StepSpec{Class: class, Policy: pol, Rate: CalibrationRate, Seed: 1, Windows: CalibrationWindows()})
		if err != nil {
			return nil, fmt.Errorf("study: calibration of %s: %w", pol, err)
		}
		out = append(out, Calibration{Policy: pol, Figures: f})
	}
	return out, nil
}

// calibrationLines reports the calibration: each policy's TTFT
// percentiles and success, and which policy had the lowest p95.
func calibrationLines(cal []Calibration) []string {
	if len(cal) == 0 {
		return nil
	}
	lines := []string{fmt.Sprintf("calibration (%s at %.0f req/s, %v, no warm-up):", CalibrationClass, CalibrationRate, CalibrationWindows().Measure)}
	best := 0
	for i, c := range cal {
		f := c.Figures
		lines = append(lines, fmt.Sprintf("  %-14s TTFT p50 %.3f s, p95 %.3f s, p99 %.3f s; success %.2f%% of %d turns",
			c.Policy, f.TTFTP50S, f.TTFTP95S, f.TTFTP99S, 100*f.Success, f.Samples()))
		if f.TTFTP95S < cal[best].Figures.TTFTP95S {
			best = i
		}
	}
	return append(lines, fmt.Sprintf("  lowest p95 in calibration: %s", cal[best].Policy))
}
