package study

import (
	"context"
	"flag"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// The network-signal diagnosis in BENCHMARKS.md ("Network signals, thermal
// and failover on 80 held-out seeds"). TestNetsigShares and
// TestNetsigVariants are measurement tools, not tests: they print figures
// and assert nothing, and are skipped unless asked for,
// `go test ./study -run TestNetsig -v -args -netsig`.
var (
	netsigFigures  = flag.Bool("netsig", false, "print the wan-jitter diagnosis (BENCHMARKS.md, \"Network signals, thermal and failover on 80 held-out seeds\")")
	netsigPolicies = flag.String("netsig-policies", "pressure,netsig-jf15,netsig-jf10,netsig-jw1,netsig-jf10w1,netsig-rtt-only,netsig-jitter-only,netsig-move04,netsig-move03", "TestNetsigVariants: the variants, paired against the first")
	netsigSeeds    = flag.String("netsig-seeds", "11-30", "TestNetsigVariants: the seeds (training seeds by default; never tune on held-out ones)")
)

// netsigRegistry is the resilience registry with the pressure variants the
// diagnosis tried.
func netsigRegistry() *policy.Registry {
	reg := ResilienceRegistry()
	add := func(name string, f func(pp *policy.PressureParams)) {
		reg.Register(name, func(p policy.Params, b []policy.Backend, _ *rand.Rand) (policy.Policy, error) {
			pp := p.PressureParams()
			f(&pp)
			return policy.NewPressure(p, pp, b)
		})
	}
	add("netsig-jf15", func(pp *policy.PressureParams) { pp.Norm.JitterFull = 15 * time.Millisecond })
	add("netsig-jf10", func(pp *policy.PressureParams) { pp.Norm.JitterFull = 10 * time.Millisecond })
	add("netsig-jw1", func(pp *policy.PressureParams) { pp.Weights[telemetry.SigJitter] = 1 })
	add("netsig-jf10w1", func(pp *policy.PressureParams) {
		pp.Norm.JitterFull, pp.Weights[telemetry.SigJitter] = 10*time.Millisecond, 1
	})
	add("netsig-rtt-only", func(pp *policy.PressureParams) { pp.Weights[telemetry.SigJitter] = 0 })
	add("netsig-jitter-only", func(pp *policy.PressureParams) { pp.Weights[telemetry.SigRTT] = 0 })
	add("netsig-move04", func(pp *policy.PressureParams) { pp.Sticky.MoveScore = 0.4 })
	add("netsig-move03", func(pp *policy.PressureParams) { pp.Sticky.MoveScore = 0.3 })
	return reg
}

func wanJitterPhase(t *testing.T) Phase {
	for _, p := range ResiliencePhases() {
		if p.Name == "wan-jitter" {
			return p
		}
	}
	t.Fatal("no wan-jitter phase")
	return Phase{}
}

// TestNetsigShares: where the turns after the onset go, new sessions'
// (started after it) apart from old ones', and where the slowest 5% lie.
func TestNetsigShares(t *testing.T) {
	if !*netsigFigures {
		t.Skip("measurement: -args -netsig")
	}
	ph := wanJitterPhase(t)
	for _, pol := range []string{"pulsar-waw", "pressure"} {
		var specs []PhaseSpec
		for s := uint64(11); s <= 20; s++ {
			specs = append(specs, PhaseSpec{Phase: ph, Policy: pol, Seed: s, RPS: ResilienceRPS, Onset: 180 * time.Second, Pre: 30 * time.Second, Post: 60 * time.Second})
		}
		runs, err := SimPhaseRunner{}.RunPhases(context.Background(), specs, nil)
		if err != nil {
			t.Fatal(err)
		}
		onWest := func(b int) bool { return slices.Contains(westSite, b) }
		var all, fresh, westFresh, westOld, slow, slowWest int
		var westT, otherT []float64
		for _, r := range runs {
			from, to := r.Spec.Onset, r.Spec.Onset+r.Spec.Post
			isNew := map[uint64]bool{}
			var tt []float64
			for _, rec := range r.Records {
				if rec.Turn == 0 && rec.Start >= from {
					isNew[rec.Session] = true
				}
				if rec.End >= from && rec.End < to && rec.Completed {
					tt = append(tt, rec.TTFT().Seconds())
				}
			}
			slices.Sort(tt)
			p95 := metrics.Percentile(tt, 0.95)
			for _, rec := range r.Records {
				if rec.End < from || rec.End >= to || !rec.Completed {
					continue
				}
				all++
				w, s := onWest(rec.Backend), rec.TTFT().Seconds()
				switch {
				case isNew[rec.Session]:
					fresh++
					if w {
						westFresh++
					}
				case w:
					westOld++
				}
				if w {
					westT = append(westT, s)
				} else {
					otherT = append(otherT, s)
				}
				if s >= p95 {
					slow++
					if w {
						slowWest++
					}
				}
			}
		}
		slices.Sort(westT)
		slices.Sort(otherT)
		t.Logf("%s: %d turns; new sessions' %.3f of them, on west %.3f; old sessions' on west %.3f; slowest 5%% on west %.3f; TTFT p95 west %.3f s, others %.3f s",
			pol, all, float64(fresh)/float64(all), float64(westFresh)/float64(fresh), float64(westOld)/float64(all-fresh),
			float64(slowWest)/float64(slow), metrics.Percentile(westT, 0.95), metrics.Percentile(otherT, 0.95))
	}
}

// TestNetsigVariants runs the wan-jitter phase for the variants and prints
// their paired differences against the first.
func TestNetsigVariants(t *testing.T) {
	if !*netsigFigures {
		t.Skip("measurement: -args -netsig")
	}
	seeds, err := ParseSeeds(*netsigSeeds)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resilience(context.Background(), ResilienceOptions{Seeds: seeds, Phases: []string{"wan-jitter"},
		Policies: strings.Split(*netsigPolicies, ","), Runner: SimPhaseRunner{Registry: netsigRegistry()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cells() {
		t.Logf("%-20s p95 %.4f ± %.4f s, p99 %.4f ± %.4f s", c.Policy, c.P95.Mean, c.P95.Half, c.P99.Mean, c.P99.Half)
	}
	for _, l := range res.PairedLines() {
		t.Log(l)
	}
}
