package study

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
		bad  string // part of the error, when bad
	}{
		{in: "1-10,31-40", want: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40}},
		{in: " 3 , 7,9-9", want: []uint64{3, 7, 9}},
		{in: "", bad: "no seeds"},
		{in: ",", bad: "no seeds"},
		{in: "0,1", bad: "at least 1"},
		{in: "x", bad: "whole number"},
		{in: "-3", bad: "whole number"},
		{in: "5-2", bad: "backwards"},
		{in: "1-3,2", bad: "listed twice"},
		{in: "1-18446744073709551615", bad: "more than 1000"},
		{in: "1-2-3", bad: "whole number"},
	} {
		got, err := ParseSeeds(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseSeeds(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"1-10,31-40", "5", "2-1", "0", "1,1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSeeds(s)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > MaxStudySeeds {
			t.Fatalf("%q: %d seeds", s, len(got))
		}
		for i, v := range got {
			if v == 0 || slices.Contains(got[:i], v) {
				t.Fatalf("%q: bad seeds %v", s, got)
			}
		}
	})
}

func TestResilienceSeedsOption(t *testing.T) {
	specs, err := ResilienceSpecs(ResilienceOptions{Seeds: []uint64{31, 7}, Phases: []string{"thermal"}, Policies: []string{"pressure", "pulsar-waw"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, sp := range specs {
		got = append(got, sp.Seed)
	}
	if want := []uint64{31, 7, 31, 7}; !slices.Equal(got, want) {
		t.Errorf("seeds %v, want %v (each policy on the chosen seeds)", got, want)
	}
	for _, bad := range []ResilienceOptions{
		{Seeds: []uint64{4}},
		{Seeds: []uint64{4, 4}},
		{Seeds: []uint64{0, 4}},
		{Seeds: []uint64{4, 5}, Replicates: 3},
	} {
		if _, err := ResilienceSpecs(bad); !errors.Is(err, ErrBadOptions) {
			t.Errorf("seeds %v replicates %d: err %v, want ErrBadOptions", bad.Seeds, bad.Replicates, err)
		}
	}
}

func TestPairedDiffs(t *testing.T) {
	// pressure is 0.1 s below pulsar-waw on every seed, though the seeds
	// spread by 1 s: the pairing sees a difference the separate intervals
	// cannot. Seed 9 ran for pressure only and is left out.
	var runs []PhaseMetrics
	for _, s := range []uint64{1, 2, 3, 9} {
		base := float64(s % 3)
		runs = append(runs, PhaseMetrics{Phase: "thermal", Policy: "pressure", Seed: s, P95S: base + 0.5, P99S: base + 2})
		if s != 9 {
			runs = append(runs, PhaseMetrics{Phase: "thermal", Policy: "pulsar-waw", Seed: s, P95S: base + 0.6, P99S: base + 2 + 0.1*float64(s)})
		}
	}
	runs = append(runs, PhaseMetrics{Phase: "baseline", Policy: "pressure", Seed: 1}, PhaseMetrics{Phase: "baseline", Policy: "pulsar-waw", Seed: 1})
	res := &ResilienceResults{Runs: runs}
	ds := res.Paired()
	if len(ds) != 2 {
		t.Fatalf("paired %+v: want p95 and p99 of thermal only (baseline has one common seed)", ds)
	}
	p95, p99 := ds[0], ds[1]
	if p95.Policy != "pressure" || p95.Against != "pulsar-waw" || p95.Measure != "ttft_p95_s" || p95.Diff.N != 3 {
		t.Errorf("p95 pair %+v: want pressure against pulsar-waw over 3 seeds", p95)
	}
	if math.Abs(p95.Diff.Mean+0.1) > 1e-9 || p95.Diff.Half > 1e-9 {
		t.Errorf("p95 diff %+v: want -0.1 ± 0", p95.Diff)
	}
	if math.Abs(p99.Diff.Mean+0.2) > 1e-9 || math.Abs(p99.Diff.Half-4.303*0.1/math.Sqrt(3)) > 1e-9 {
		t.Errorf("p99 diff %+v: want -0.2 ± 4.303 x 0.1 / sqrt 3", p99.Diff)
	}
	unpaired := NewStat([]float64{1.5, 2.5, 0.5})
	if unpaired.Half < 1 {
		t.Fatalf("test premise: pressure's own interval %v should be wide", unpaired)
	}
	lines := res.PairedLines()
	if len(lines) != 2 || !strings.Contains(lines[1], "thermal") || !strings.Contains(lines[1], "p95 -0.100 ± 0.000 s *") || !strings.Contains(lines[1], "(3 seeds)") {
		t.Errorf("paired lines %q", lines)
	}
}

// TestPairedReferenceIsPressure: the network phase runs its arms as
// round-robin, pressure-no-net, pressure; the pairs still read "pressure
// minus ...", in run order, and a cell without pressure compares with its
// first policy.
func TestPairedReferenceIsPressure(t *testing.T) {
	var runs []PhaseMetrics
	for _, s := range []uint64{1, 2, 3} {
		for i, pol := range NetworkArms {
			runs = append(runs, PhaseMetrics{Phase: "network", Policy: pol, Seed: s, P95S: float64(i) + 0.01*float64(s), P99S: float64(i)})
		}
		runs = append(runs, PhaseMetrics{Phase: "baseline", Policy: "pulsar-waw", Seed: s, P95S: 1}, PhaseMetrics{Phase: "baseline", Policy: "least-request", Seed: s, P95S: 3})
	}
	res := &ResilienceResults{Runs: runs}
	type pair struct{ policy, against, measure string }
	var got []pair
	for _, d := range res.Paired() {
		got = append(got, pair{d.Policy, d.Against, d.Measure})
	}
	want := []pair{
		{"pressure", "round-robin", "ttft_p95_s"}, {"pressure", "round-robin", "ttft_p99_s"},
		{"pressure", PressureNoNet, "ttft_p95_s"}, {"pressure", PressureNoNet, "ttft_p99_s"},
		{"pulsar-waw", "least-request", "ttft_p95_s"}, {"pulsar-waw", "least-request", "ttft_p99_s"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
	if d := res.Paired()[0]; math.Abs(d.Diff.Mean-2) > 1e-9 {
		t.Errorf("pressure minus round-robin p95 %+v, want +2", d.Diff)
	}
	lines := res.PairedLines()
	if len(lines) != 4 || !strings.Contains(lines[1], "pressure minus round-robin: TTFT p95 +2.000") || !strings.Contains(lines[3], "pulsar-waw minus least-request: TTFT p95 -2.000") {
		t.Errorf("paired lines %q", lines)
	}
}

// TestPairedCriterion: pressure 0.1 s below pulsar-waw on every seed while
// the seeds spread by a second passes the paired criterion and fails the
// separate intervals'; 0.1 s above fails both.
func TestPairedCriterion(t *testing.T) {
	for _, tc := range []struct {
		delta      float64
		separate   string
		pairedWant string
	}{{-0.1, "fail", "pass"}, {+0.1, "fail", "fail"}} {
		var runs []PhaseMetrics
		for _, s := range []uint64{1, 2, 3, 4} {
			base := float64(s % 3)
			runs = append(runs,
				PhaseMetrics{Phase: "thermal", Policy: "pressure", Seed: s, P95S: base + 0.5 + tc.delta + 0.001*float64(s), Turns: 100, SuccessPct: 100},
				PhaseMetrics{Phase: "thermal", Policy: "pulsar-waw", Seed: s, P95S: base + 0.5, Turns: 100, SuccessPct: 100})
		}
		res := &ResilienceResults{Runs: runs}
		got := map[string]string{}
		for _, c := range res.criteria() {
			got[c.What] = c.Result
		}
		if got["p95 TTFT below the best baseline's, beyond the intervals"] != tc.separate || got["p95 TTFT below the best baseline's, paired on the same seeds"] != tc.pairedWant {
			t.Errorf("delta %+v: criteria %v, want separate %s and paired %s", tc.delta, got, tc.separate, tc.pairedWant)
		}
	}
}
