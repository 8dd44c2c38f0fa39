package slowtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// WindowEnv is the environment variable that shortens the scale
// benchmarks' runs (study.BenchmarkScale, sim.BenchmarkTenfold):
// WARMUP+MEASURE, such as "60s+60s", for a run to profile.
const WindowEnv = "STARGATE_SCALE_WINDOW"

// ScaleWindow is the warm-up and measured window of a scale benchmark:
// 240 s + 240 s, or what WindowEnv says. A malformed value fails tb.
func ScaleWindow(tb testing.TB) (warmup, measure time.Duration) {
	tb.Helper()
	warmup, measure, err := parseWindow(os.Getenv(WindowEnv))
	if err != nil {
		tb.Fatalf("%s: %v", WindowEnv, err)
	}
	return warmup, measure
}

func parseWindow(w string) (warmup, measure time.Duration, err error) {
	if w == "" {
		return 240 * time.Second, 240 * time.Second, nil
	}
	a, m, ok := strings.Cut(w, "+")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want WARMUP+MEASURE, such as 60s+60s", w)
	}
	if warmup, err = time.ParseDuration(a); err != nil {
		return 0, 0, fmt.Errorf("%q: warm-up: %w", w, err)
	}
	if measure, err = time.ParseDuration(m); err != nil {
		return 0, 0, fmt.Errorf("%q: measure: %w", w, err)
	}
	if warmup < 0 || measure <= 0 {
		return 0, 0, fmt.Errorf("%q: want a warm-up of zero or more and a positive measured window", w)
	}
	return warmup, measure, nil
}
