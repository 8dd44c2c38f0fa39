package study

import (
	"math"
	"testing"
	"time"
)

// series builds alert samples every 500 ms over [0, 60 s) whose score is
// score(t), and turns every 200 ms whose TTFT is ttft(t) seconds.
func series(score func(time.Duration) float64, hw func(time.Duration) bool, ttft func(time.Duration) float64) ([]AlertSample, []TurnTTFT) {
	var as []AlertSample
	var ts []TurnTTFT
	for at := time.Duration(0); at < 60*time.Second; at += 500 * time.Millisecond {
		as = append(as, AlertSample{At: at, Score: score(at), HW: hw(at)})
	}
	for at := time.Duration(0); at < 60*time.Second; at += 200 * time.Millisecond {
		ts = append(ts, TurnTTFT{End: at, TTFT: ttft(at)})
	}
	return as, ts
}

func TestComputeLeadTime(t *testing.T) {
	const slo = 10 * time.Second
	from, to := 20*time.Second, 60*time.Second
	s := func(d float64) time.Duration { return time.Duration(d * float64(time.Second)) }
	step := func(at time.Duration, lo, hi float64) func(time.Duration) float64 {
		return func(t time.Duration) float64 {
			if t >= at {
				return hi
			}
			return lo
		}
	}
	never := func(time.Duration) bool { return false }
	tests := []struct {
		name  string
		score func(time.Duration) float64
		hw    func(time.Duration) bool
		ttft  func(time.Duration) float64
		want  LeadTime
	}{
		{
			// Score alert 5 s after the onset, hardware alert at 2 s; every
			// turn from 30 s takes 20 s to its first token: the p95 over the
			// last 10 s passes the SLO once more than 5% of the window's
			// turns are late (at 30 s + 3 turns: 30.4 s).
			name: "breach", score: step(s(25), 0.2, 0.7), hw: func(t time.Duration) bool { return t >= s(22) }, ttft: step(s(30), 1, 20),
			want: LeadTime{AlertS: 5, HWAlertS: 2, BreachS: 10.4, LeadS: 5.4, HWLeadS: 8.4},
		},
		{
			name: "censored", score: step(s(25), 0.2, 0.7), hw: never, ttft: step(0, 1, 1),
			want: LeadTime{AlertS: 5, HWAlertS: -1, BreachS: -1, LeadS: 35, HWLeadS: -1, Censored: true},
		},
		{
			name: "no alert", score: step(0, 0.2, 0.2), hw: never, ttft: step(s(30), 1, 20),
			want: LeadTime{AlertS: -1, HWAlertS: -1, BreachS: 10.4, LeadS: -1, HWLeadS: -1},
		},
		{
			// The breach comes first: a negative lead. Alerts before the
			// onset are false alarms, not the alert.
			name: "late alert", score: func(t time.Duration) float64 {
				if (t >= s(10) && t < s(11)) || t >= s(40) {
					return 0.9
				}
				return 0.1
			}, hw: never, ttft: step(s(30), 1, 20),
			want: LeadTime{AlertS: 20, HWAlertS: -1, BreachS: 10.4, LeadS: -9.6, HWLeadS: -1, FalseAlerts: 2},
		},
		{
			// A failed turn counts as over the SLO; too few turns in the
			// window is no breach.
			name: "failures", score: step(s(25), 0.2, 0.7), hw: never, ttft: step(s(50), 1, math.Inf(1)),
			want: LeadTime{AlertS: 5, HWAlertS: -1, BreachS: 30.4, LeadS: 25.4, HWLeadS: -1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			as, ts := series(tc.score, tc.hw, tc.ttft)
			got := ComputeLeadTime(as, ts, from, to, slo)
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			if !near(got.AlertS, tc.want.AlertS) || !near(got.HWAlertS, tc.want.HWAlertS) || !near(got.BreachS, tc.want.BreachS) ||
				!near(got.LeadS, tc.want.LeadS) || !near(got.HWLeadS, tc.want.HWLeadS) || got.Censored != tc.want.Censored || got.FalseAlerts != tc.want.FalseAlerts {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Too few turns in the window: no p95, no breach.
	as, _ := series(step(s(25), 0.2, 0.7), never, step(0, 1, 1))
	few := []TurnTTFT{{End: s(30), TTFT: 50}, {End: s(31), TTFT: 50}}
	if got := ComputeLeadTime(as, few, from, to, slo); got.BreachS != -1 || !got.Censored {
		t.Errorf("two late turns made a breach: %+v", got)
	}
}

// TestLeadPhases: the pcie phase runs only when named, and a thermal and a
// pcie run measure the lead time from the faulted backend's reports: the
// hardware alert comes after the onset, within the fault's ramp, and the
// fault-free span before the onset raises no score alert.
func TestLeadPhases(t *testing.T) {
	all, err := ResilienceSpecs(ResilienceOptions{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range all {
		if sp.Phase.Name == "pcie" {
			t.Fatal("the optional pcie phase is in the whole study")
		}
	}
	specs, err := ResilienceSpecs(ResilienceOptions{Quick: true, Phases: []string{"thermal", "pcie"}, Policies: []string{"pressure"}, Replicates: 2})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := SimPhaseRunner{Parallel: 1}.RunPhases(t.Context(), specs[:3], nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		m := Measure(r)
		lt := m.Extra.Lead
		if lt == nil {
			t.Fatalf("%s seed %d: no lead time", m.Phase, m.Seed)
		}
		if lt.HWAlertS < 0 || lt.HWAlertS > PCIeRamp.Seconds() || lt.FalseAlerts != 0 {
			t.Errorf("%s seed %d: %+v; want a hardware alert within the ramp and no false alert", m.Phase, m.Seed, *lt)
		}
		if lt.BreachS < 0 && (!lt.Censored || lt.HWLeadS != r.Spec.Post.Seconds()-lt.HWAlertS) {
			t.Errorf("%s seed %d: no breach but %+v", m.Phase, m.Seed, *lt)
		}
	}
	// Determinism: the same specs measure the same.
	again, err := SimPhaseRunner{Parallel: 1}.RunPhases(t.Context(), specs[:1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := *Measure(runs[0]).Extra.Lead, *Measure(again[0]).Extra.Lead; a != b {
		t.Errorf("same seed, lead %+v then %+v", a, b)
	}
}
