package sim

import (
	"context"
	"fmt"

	"github.com/stargate-llm/stargate/policy"
)

// RunInterleaved runs one simulation per configuration together in one
// goroutine, handling one event of each in turn, and returns their results
// in the order of cfgs. Each simulation is independent of the others, so the
// results are those of running each alone; what changes is the memory the
// processor works over between two events of the same run, which is that
// of all of them. BenchmarkTenfold uses it to measure how much of the
// simulator's cost at a larger scale is the memory a larger run touches
// rather than the work it does.
func RunInterleaved(ctx context.Context, cfgs []Config, reg *policy.Registry) ([]*Result, error) {
	sims := make([]*simulation, len(cfgs))
	for i, cfg := range cfgs {
		s, err := start(cfg, reg)
		if err != nil {
			return nil, fmt.Errorf("configuration %d: %w", i, err)
		}
		sims[i] = s
	}
	done := make([]bool, len(sims))
	for live := len(sims); live > 0; {
		for i, s := range sims {
			if done[i] {
				continue
			}
			d, err := s.step(ctx)
			if err != nil {
				return nil, fmt.Errorf("configuration %d: %w", i, err)
			}
			if d {
				done[i] = true
				live--
			}
		}
	}
	res := make([]*Result, len(sims))
	for i, s := range sims {
		res[i] = s.result()
	}
	return res, nil
}
