package sim

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/telemetry"
)

// withTelemetry is the small fleet with heartbeats, liveness and faults.
func withTelemetry(pol string, faults ...Fault) Config {
	cfg := small(pol, 30)
	cfg.Telemetry = DefaultTelemetry()
	cfg.Router = router.Config{HeartbeatTTL: router.DefaultHeartbeatTTL}
	cfg.Faults = faults
	cfg.RecordDispatches = true
	for i := range cfg.Backends {
		cfg.Backends[i].MaxModelLen = 131072
	}
	return cfg
}

// TestKilledBackendGetsNothingAfterDetection: every router marks a killed
// backend Failed within two heartbeat intervals, and no router dispatches to
// it after that, whatever the policy.
func TestKilledBackendGetsNothingAfterDetection(t *testing.T) {
	kill := 30 * time.Second
	for _, pol := range []string{"pressure", "pulsar-waw", "least-request", "round-robin"} {
		t.Run(pol, func(t *testing.T) {
			res := run(t, withTelemetry(pol, Fault{Kind: FaultKill, Backends: []int{0}, At: kill}))
			var detected time.Duration
			for r, re := range res.Routers {
				st := re.Backends[0]
				if st.State != telemetry.Failed {
					t.Fatalf("router %d sees the killed backend as %s", r, st.StateName)
				}
				if d := st.Since - kill; d < 0 || d > 2*DefaultTelemetry().Interval {
					t.Errorf("router %d detected the kill after %v, want within 2 heartbeat intervals", r, d)
				}
				detected = max(detected, st.Since)
			}
			before := 0
			for _, d := range res.Dispatches {
				if d.Backend != 0 {
					continue
				}
				if d.At >= detected {
					t.Fatalf("dispatch to the killed backend at %v, after detection at %v", d.At, detected)
				}
				if d.At >= kill {
					before++
				}
			}
			t.Logf("%d misroutes between the kill and detection at %v", before, detected-kill)
		})
	}
}

func TestFaultsAreDeterministic(t *testing.T) {
	cfg := withTelemetry("pressure",
		Fault{Kind: FaultErrors, Backends: []int{1}, At: 25 * time.Second, Until: 40 * time.Second, Rate: 0.3},
		Fault{Kind: FaultPath, Backends: []int{2}, At: 20 * time.Second, Jitter: 20 * time.Millisecond},
		Fault{Kind: FaultThermal, Backends: []int{0}, At: 22 * time.Second, PeakC: 25, Ramp: 10 * time.Second, MinClock: 0.5},
		Fault{Kind: FaultBurst, At: 30 * time.Second, Count: 20},
		Fault{Kind: FaultExporter, Backends: []int{0, 1}, At: 35 * time.Second},
		Fault{Kind: FaultHang, Backends: []int{2}, At: 40 * time.Second})
	cfg.KeepRecords = true
	a, _ := json.Marshal(run(t, cfg))
	b, _ := json.Marshal(run(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("same faults and seed gave different results")
	}
	// The hung backend is Failed and its held requests end by timeout.
	res := run(t, cfg)
	timeouts := 0
	for _, r := range res.Records {
		if r.Reason == "timeout" {
			timeouts++
		}
	}
	for r, re := range res.Routers {
		if re.Backends[2].State != telemetry.Failed {
			t.Errorf("router %d sees the hung backend as %s", r, re.Backends[2].StateName)
		}
	}
	t.Logf("%d turns timed out", timeouts)
}

// TestCapabilityLimit: under a context limit, a capability-blind policy keeps
// sending long requests there; pressure learns the limit and stops.
func TestCapabilityLimit(t *testing.T) {
	limit := Fault{Kind: FaultLimit, Backends: []int{0}, At: 20 * time.Second, Limit: 8000}
	count := func(res *Result) (mis, late int) {
		for _, d := range res.Dispatches {
			if d.Misroute {
				mis++
				if d.At > 30*time.Second {
					late++
				}
			}
		}
		return mis, late
	}
	blind := run(t, withTelemetry("round-robin", limit))
	aware := run(t, withTelemetry("pressure", limit))
	bm, bl := count(blind)
	am, al := count(aware)
	if bl == 0 || al != 0 || am >= bm {
		t.Errorf("misroutes (after 30 s): round-robin %d (%d), pressure %d (%d); want pressure to stop and the blind policy to go on", bm, bl, am, al)
	}
	for _, re := range aware.Routers {
		if re.Backends[0].MaxModelLen != 8000 {
			t.Errorf("a router holds limit %d for the limited backend, want 8000", re.Backends[0].MaxModelLen)
		}
	}
}

func TestExporterDeathFallsBack(t *testing.T) {
	res := run(t, withTelemetry("pressure", Fault{Kind: FaultExporter, Backends: []int{1}, At: 20 * time.Second}))
	for r, re := range res.Routers {
		if re.Backends[1].Hardware || !re.Weights[1].Fallback || re.Weights[0].Fallback {
			t.Errorf("router %d: hardware %v, fallback %v/%v; want backend 1 alone on fallback", r, re.Backends[1].Hardware, re.Weights[1].Fallback, re.Weights[0].Fallback)
		}
	}
	found := false
	for _, m := range res.Marks {
		found = found || (m.What == "fallback" && m.Backend == 1 && m.At-20*time.Second <= DefaultTelemetry().Interval)
	}
	if !found {
		t.Errorf("no fallback mark within an interval of the exporter's death: %v", res.Marks)
	}
}

func TestBadFaultsRejected(t *testing.T) {
	for _, f := range []Fault{
		{Kind: "meteor", Backends: []int{0}},
		{Kind: FaultKill},
		{Kind: FaultKill, Backends: []int{7}},
		{Kind: FaultKill, Backends: []int{0}, At: time.Second, Until: 2 * time.Second},
		{Kind: FaultErrors, Backends: []int{0}, Rate: 1.5},
		{Kind: FaultThermal, Backends: []int{0}, PeakC: 10, Ramp: time.Second, MinClock: 0},
		{Kind: FaultBurst, Count: 0},
	} {
		cfg := withTelemetry("pressure", f)
		if err := cfg.Validate(nil); err == nil {
			t.Errorf("fault %+v accepted", f)
		}
	}
}

// TestRouterRetriesRefusals: as the live router does, a router places again,
// on a backend not yet tried, a request refused before its first byte (a
// killed backend's refused connection, a context-length refusal), so the
// client never sees it; with RouterAttempts 1 the client has to retry.
func TestRouterRetriesRefusals(t *testing.T) {
	// The smallest backend, whose load the others can take.
	kill := Fault{Kind: FaultKill, Backends: []int{1}, At: 30 * time.Second}
	limit := Fault{Kind: FaultLimit, Backends: []int{1}, At: 20 * time.Second, Limit: 8000}
	for _, tc := range []struct {
		name  string
		fault Fault
	}{{"kill", kill}, {"limit", limit}} {
		t.Run(tc.name, func(t *testing.T) {
			// count runs the fault with a router retry budget and counts the
			// turns one of whose attempts the faulty backend refused, by
			// whether the client's first attempt served them, and the turns
			// that failed as too long.
			count := func(attempts int) (oneAttempt, more, invalid int) {
				cfg := withTelemetry("round-robin", tc.fault)
				// A load the fleet carries without the faulty backend, so that
				// no other backend refuses the retry as overloaded.
				cfg.RPS, cfg.KeepRecords, cfg.RouterAttempts = 12, true, attempts
				res := run(t, cfg)
				for _, r := range res.Records {
					if r.Reason == "invalid" {
						invalid++
					}
					for _, d := range res.Dispatches {
						if d.Session == r.Session && d.Misroute && d.At >= r.Start && d.At <= r.End {
							if r.Attempts == 1 && r.Completed {
								oneAttempt++
							} else {
								more++
							}
							break
						}
					}
				}
				return oneAttempt, more, invalid
			}
			one, more, invalid := count(0)
			if one == 0 || invalid != 0 {
				t.Errorf("router retries: %d refused turns completed at the client's first attempt, %d failed as too long; want some and none", one, invalid)
			}
			oneB, moreB, invalidB := count(1)
			if oneB != 0 || moreB == 0 {
				t.Errorf("no router retries: %d refused turns completed at the client's first attempt (want 0), %d did not", oneB, moreB)
			}
			if tc.name == "limit" && invalidB == 0 {
				t.Error("no router retries: no long turn failed as too long")
			}
			t.Logf("router retries: %d refused turns served at once, %d not; without: %d, %d (%d too long)", one, more, oneB, moreB, invalidB)
		})
	}
}

// TestWeightMarksChangeNothing: recording dispatches and weight changes
// (marks "weights", for a policy whose weights move) leaves the run as it
// was; a burst moves pressure's weights.
func TestWeightMarksChangeNothing(t *testing.T) {
	burst := Fault{Kind: FaultBurst, At: 30 * time.Second, Count: 40}
	cfg := withTelemetry("pressure", burst)
	cfg.KeepRecords = true
	watched := run(t, cfg)
	cfg.RecordDispatches = false
	plain := run(t, cfg)
	a, _ := json.Marshal(watched.Records)
	b, _ := json.Marshal(plain.Records)
	if !bytes.Equal(a, b) || watched.Events != plain.Events {
		t.Fatal("recording dispatches and weights changed the run")
	}
	changes := 0
	for _, m := range watched.Marks {
		if m.What == "weights" && m.At >= burst.At {
			changes++
		}
	}
	if changes == 0 {
		t.Error("no weight change after a burst of 40 sessions")
	}
}
