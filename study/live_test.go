package study

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/metrics"
)

func TestAddedLatency(t *testing.T) {
	turns := func(n int, backend int, dur time.Duration, completed bool) []metrics.TurnRecord {
		out := make([]metrics.TurnRecord, n)
		for i := range out {
			out[i] = metrics.TurnRecord{Session: uint64(i/3 + 1), Turn: i % 3, Backend: backend,
				Start: time.Duration(i) * time.Second, End: time.Duration(i)*time.Second + dur, Completed: completed}
		}
		return out
	}
	simRecs := turns(90, 2, 2*time.Second, true)
	for _, tc := range []struct {
		name string
		live []metrics.TurnRecord
		want time.Duration
		ok   bool
	}{
		{"every turn 300 ms longer", turns(90, 2, 2300*time.Millisecond, true), 300 * time.Millisecond, true},
		{"faster live counts as nothing added", turns(90, 2, 1500*time.Millisecond, true), 0, true},
		{"other backend: not matched", turns(90, 3, 3*time.Second, true), 0, false},
		{"failed live turns: not matched", turns(90, 2, 3*time.Second, false), 0, false},
		{"too few turns", turns(minMatched-1, 2, 3*time.Second, true), 0, false},
	} {
		got, ok := addedLatency(simRecs, tc.live)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// Half the turns 1 s longer, half on time: the mean is what slows the
	// sessions down.
	live := turns(100, 2, 2*time.Second, true)
	for i := 0; i < 100; i += 2 {
		live[i].End += time.Second
	}
	if got, ok := addedLatency(turns(100, 2, 2*time.Second, true), live); !ok || got != 500*time.Millisecond {
		t.Errorf("mixed: got %v, %v; want 500ms", got, ok)
	}
}
